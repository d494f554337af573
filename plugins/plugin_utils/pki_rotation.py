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


def rotate_ca(name, common_name, signer, others, files, step, validity_days, key_type):
    """Apply `step` (one of STEPS, or "" to keep) to the CA `name` whose signing pair is `signer` and whose other
    trusted certificates are `others`; returns the signing pair, the bundle (signer first) and what happened.
    `files` holds the pending key and is brought up to date."""
    pending = _load_key(files.get(NEXT_KEY % name))
    # The pending key's certificate is in the bundle; one lost with a hand-edited bundle is made again.
    if pending is not None and not any(pki.key_matches(cert, pending) for cert in others):
        others = others + [pki.new_ca(new_authority_name(common_name), validity_days, key=pending).cert]
    done = ""
    if step == "trust" and state(others, pending) == "none":
        pair = pki.new_ca(new_authority_name(common_name), validity_days, key_type=key_type)
        pending, others, done = pair.key, others + [pair.cert], "a new CA is trusted beside it"
    elif step == "sign":
        if state(others, pending) == "none":
            raise RotationError("%s: sign asked, but no new CA is trusted yet: its rotation starts with trust" % name)
        if pending is not None:
            new = [cert for cert in others if pki.key_matches(cert, pending)][0]
            others = [signer.cert] + [cert for cert in others if cert is not new]
            signer, pending, done = pki.CertAndKey(new, pending), None, "the new CA signs, the old one is trusted"
    elif step == "finish":
        if pending is not None:
            raise RotationError("%s: finish asked while the new CA does not sign yet: sign comes first" % name)
        if others:
            others, done = [], "the old CA is no longer trusted"
    _keep_pending(files, name, pending)
    return signer, [signer.cert] + others, done


def rotate_service_account_key(name, key, others, files, step, key_type):
    """The same for a service-account key pair: `key` signs tokens, `others` are the other trusted public keys
    (PEM); returns the signing key, the public keys trusted (PEM, signer first) and what happened."""
    pending = _load_key(files.get(NEXT_KEY % name))
    if pending is not None and _public(pending) not in others:
        others = others + [_public(pending)]
    done = ""
    if step == "trust" and state(others, pending) == "none":
        pending = pki.new_service_account_key(key_type)
        others, done = others + [_public(pending)], "a new key is trusted beside it"
    elif step == "sign":
        if state(others, pending) == "none":
            raise RotationError("%s: sign asked, but no new key is trusted yet: its rotation starts with trust" % name)
        if pending is not None:
            others = [_public(key)] + [pem for pem in others if pem != _public(pending)]
            key, pending, done = pending, None, "the new key signs, the old one is trusted"
    elif step == "finish":
        if pending is not None:
            raise RotationError("%s: finish asked while the new key does not sign yet: sign comes first" % name)
        if others:
            others, done = [], "the old key is no longer trusted"
    _keep_pending(files, name, pending)
    return key, [_public(key)] + others, done


def _keep_pending(files, name, pending):
    if pending is None:
        files.pop(NEXT_KEY % name, None)
    else:
        files[NEXT_KEY % name] = pki.private_key_pem(pending)
