# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A CA or a service-account key replaced without a moment in which something is not trusted.

What is stored for an authority `name`:

- `<name>.crt` (a CA) or `<name>.pub` (a service-account key): every certificate or public key that is trusted,
  the one that signs first. This is the file every verifier reads, so a bundle of two is trusted by all of them.
- `<name>.key`: the key that signs.
- `<name>.signer.crt` (a CA, where a Secret asks for it): the signing certificate alone, for a signer that takes
  exactly one (kube-controller-manager's `--cluster-signing-cert-file`).
- `<name>.next.key`: while a rotation is between its first two steps, the new key that is trusted but does not
  sign yet. It is kept in the Secret that holds `<name>.key`.

A rotation is three steps, each asked for by name and each a no-op when done already, so that a run that
stopped half-way is simply run again:

1. `trust`: a new authority is made and added to the bundle; the old one still signs.
2. `sign`: the new one signs (and every leaf is issued again by it); the old one stays trusted.
3. `finish`: the old one leaves the bundle.

Between the steps every consumer must have picked up the bundle (pods rolled, nodes' files rewritten): that is
the caller's business. Without a step asked for, whatever is stored is kept as it is.
"""

from __future__ import annotations

import datetime
import re

from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

STEPS = ("trust", "sign", "finish")
NEXT_KEY = "%s.next.key"
SIGNER_CERT = "%s.signer.crt"


class RotationError(ValueError):
    """A step asked for out of order; nothing has been written."""


# On the Secret that holds an authority's key, with rotation_id: "<id> <trust|sign|done>", so that a named rotation
# that has finished is not started again by a caller that repeats its steps.
MARKER = "kubenest.kosmos.io/rotation.%s"
ROTATION_ID = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$")


def rotation_steps(p, holders):
    """The steps to take of `p["rotations"]`, given the Secrets (or None) that hold each authority's key: with a
    `rotation_id`, an authority whose rotation of that id has finished takes none, and one still inside another
    named rotation is refused."""
    steps = dict(p["rotations"])
    if not p.get("rotation_id"):
        return steps
    for name, step in sorted(steps.items()):
        annotations = ((holders.get(name) or {}).get("metadata") or {}).get("annotations") or {}
        marked, state = (annotations.get(MARKER % name, "").split(" ", 1) + [""])[:2]
        if marked == p["rotation_id"] and state == "done":
            steps[name] = ""
        elif step and marked and marked != p["rotation_id"] and state != "done":
            raise RotationError("%s: rotation %s is under way (%s), finish it before %s starts"
                                % (name, marked, state, p["rotation_id"]))
    return steps


def state(others, pending):
    """Where a rotation stands: `none`, `trust` (a new one is trusted, not signing) or `sign` (the new one signs,
    the old one is still trusted)."""
    if pending is not None:
        return "trust"
    return "sign" if others else "none"


def _load_key(pem):
    if pem is None:
        return None
    try:
        return pki.load_private_key_pem(pem)
    except ValueError:
        return None


def _public(key):
    return pki.public_key_pem(key)


def new_authority_name(common_name, now=None):
    """The common name of a CA made by a rotation: the CA's own, with the time it was made, so that the old and
    the new one never share a subject (a verifier that looks an issuer up by name finds the right one)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return pki.ca_common_name("%s-%s" % (common_name, now.strftime("%Y%m%d%H%M%S")))


class _Kind:
    """What differs between rotating a CA and a service-account key: the noun, whether a trusted entry (a CA
    certificate, a public key) is a key's, the entry made for a key, and a new key."""

    def __init__(self, noun, is_for, entry_for, new_key):
        self.noun, self.is_for, self.entry_for, self.new_key = noun, is_for, entry_for, new_key


def _rotate(kind, name, signing_key, signing_entry, others, files, step):
    """Apply `step` (one of STEPS, or "" to keep) to the authority `name`: its signing key, the entry trusted for it
    and the `others` trusted beside it. Returns the signing key, the bundle (the signer's entry first) and what
    happened; `files` keeps the pending key."""
    pending = _load_key(files.get(NEXT_KEY % name))
    # The pending key's entry is in the bundle; one lost with a hand-edited bundle is made again.
    if pending is not None and not any(kind.is_for(entry, pending) for entry in others):
        others = others + [kind.entry_for(pending)]
    done = ""
    if step == "trust" and state(others, pending) == "none":
        pending = kind.new_key()
        others, done = others + [kind.entry_for(pending)], "a new %s is trusted beside it" % kind.noun
    elif step == "sign":
        if state(others, pending) == "none":
            raise RotationError("%s: sign asked, but no new %s is trusted yet: its rotation starts with trust"
                                % (name, kind.noun))
        if pending is not None:
            new = [entry for entry in others if kind.is_for(entry, pending)][0]
            others = [signing_entry] + [entry for entry in others if entry is not new]
            signing_key, signing_entry, pending = pending, new, None
            done = "the new %s signs, the old one is trusted" % kind.noun
    elif step == "finish":
        if pending is not None:
            raise RotationError("%s: finish asked while the new %s does not sign yet: sign comes first"
                                % (name, kind.noun))
        if others:
            others, done = [], "the old %s is no longer trusted" % kind.noun
    _keep_pending(files, name, pending)
    return signing_key, [signing_entry] + others, done


def rotate_ca(name, common_name, signer, others, files, step, validity_days, key_type):
    """A CA: `signer` its signing pair, `others` the other trusted certificates; returns the signing pair, the
    bundle of certificates (signer first) and what happened."""
    kind = _Kind("CA", pki.key_matches,
                 lambda key: pki.new_ca(new_authority_name(common_name), validity_days, key=key).cert,
                 lambda: pki.generate_private_key(key_type))
    key, bundle, done = _rotate(kind, name, signer.key, signer.cert, others, files, step)
    return pki.CertAndKey(bundle[0], key), bundle, done


def rotate_service_account_key(name, key, others, files, step, key_type):
    """A service-account key pair: `key` signs tokens, `others` are the other trusted public keys (PEM); returns
    the signing key, the public keys trusted (PEM, signer first) and what happened."""
    kind = _Kind("key", lambda pem, candidate: pem == _public(candidate), _public,
                 lambda: pki.new_service_account_key(key_type))
    return _rotate(kind, name, key, _public(key), others, files, step)


def _keep_pending(files, name, pending):
    if pending is None:
        files.pop(NEXT_KEY % name, None)
    else:
        files[NEXT_KEY % name] = pki.private_key_pem(pending)
