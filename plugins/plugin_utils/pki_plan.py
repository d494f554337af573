# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What pki_secrets issues: the checks of its arguments and the PKI brought up to date in memory."""

from __future__ import annotations

import hashlib
import ipaddress

from ansible_collections.kosmos.kubenest.plugins.module_utils import kubeconfig as kc
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.module_utils.files import is_file_name
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import pki_rotation


def problems_of(p):
    """Every mistake in the arguments, before anything is read or written."""
    problems = []
    produced = []
    known = set()
    for cert in p["certificates"]:
        name = cert["name"]
        if not is_file_name(name):
            problems.append("certificates: %r is not a file name" % name)
        if cert["is_ca"] and cert["ca"]:
            problems.append("certificates: %s is a CA and cannot name a ca" % name)
        if not cert["is_ca"]:
            if not cert["ca"]:
                problems.append("certificates: %s needs a ca (or is_ca)" % name)
            elif cert["ca"] not in known:
                problems.append("certificates: %s names ca %r, which is not an earlier CA" % (name, cert["ca"]))
            if not cert["usages"]:
                problems.append("certificates: %s needs at least one of the usages server, client" % name)
            # A leaf's name is an identity and is not shortened (a CA's is: pki.ca_common_name).
            if not 0 < len(cert["common_name"]) <= pki.COMMON_NAME_MAX:
                problems.append("certificates: %s: common name %r must have 1 to %d characters"
                                % (name, cert["common_name"], pki.COMMON_NAME_MAX))
        for ip in cert["ip_addresses"]:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                problems.append("certificates: %s: %r is not an IP address" % (name, ip))
        if cert["is_ca"]:
            known.add(name)
        produced += [name + ".crt", name + ".key"]
    for name in p["service_account_keys"]:
        produced += [name + ".key", name + ".pub"]
    names = set(c["name"] for c in p["certificates"])
    for conf in p["kubeconfigs"]:
        if not conf["server"].startswith("https://"):
            problems.append("kubeconfigs: %s: server %r must be an https:// URL" % (conf["name"], conf["server"]))
        for field in ("ca", "cert"):
            if conf[field] not in names:
                problems.append("kubeconfigs: %s: %s %r is not one of the certificates"
                                % (conf["name"], field, conf[field]))
        produced.append(conf["name"])
    duplicates = sorted(set(k for k in produced if produced.count(k) > 1))
    if duplicates:
        problems.append("produced more than once: %s" % ", ".join(duplicates))
    cas = [c["name"] for c in p["certificates"] if c["is_ca"]]
    for name, step in sorted((p.get("rotations") or {}).items()):
        if name not in cas and name not in p["service_account_keys"]:
            problems.append("rotations: %r is neither a CA nor a service-account key" % name)
        elif step not in pki_rotation.STEPS + ("",):
            problems.append("rotations: %s: %r is not a step (%s)" % (name, step, ", ".join(pki_rotation.STEPS)))
    if p.get("rotation_id") and not pki_rotation.ROTATION_ID.match(p["rotation_id"]):
        problems.append("rotation_id: %r must be 1 to 63 letters, digits, '-', '_' or '.', starting with a letter "
                        "or digit" % p["rotation_id"])
    stored = [k for s in p["secrets"] for k in s["keys"]]
    bad = sorted(set(k for k in stored if not is_file_name(k)))
    if bad:
        problems.append("secrets: keys that are not file names: %s" % ", ".join(bad))
    own = sorted(set(k for k in stored if k in [pki_rotation.NEXT_KEY % n for n in cas + p["service_account_keys"]]))
    if own:
        problems.append("secrets: keys a rotation keeps by itself, beside the signing key: %s" % ", ".join(own))
    # A CA's signing certificate alone is stored only where a Secret asks for it.
    signers = [pki_rotation.SIGNER_CERT % n for n in cas]
    unknown = sorted(set(stored) - set(produced) - set(signers) - set(own))
    if unknown:
        problems.append("secrets: keys nothing produces: %s" % ", ".join(unknown))
    unstored = sorted(set(produced) - set(stored))
    if unstored:
        problems.append("produced but stored in no Secret: %s" % ", ".join(unstored))
    twice = sorted(set(k for k in stored if stored.count(k) > 1))
    if twice:
        problems.append("secrets: keys stored more than once: %s" % ", ".join(twice))
    return problems


def issue(p, files):
    """Bring `files` (key -> PEM bytes, what the Secrets hold) up to date; per certificate and service-account key
    what happened. Raises RotationError, before anything is stored, for a rotation step asked for out of order."""
    steps = p.get("rotations") or {}
    pairs, bundles = {}, {}
    report = {}
    for cert in p["certificates"]:
        name = cert["name"]
        if cert["is_ca"]:
            pairs[name], report[name] = _ca(cert, p, files, steps.get(name, ""))
            bundles[name] = pki.load_certificates_pem(files[name + ".crt"])
            continue
        ca = pairs.get(cert["ca"])
        wanted = pki.wanted_spec(cert["common_name"], cert["organizations"], cert["dns_names"],
                                 cert["ip_addresses"], cert["usages"], cert["is_ca"])
        reason = pki.reissue_reason(files.get(name + ".crt"), files.get(name + ".key"), ca, wanted,
                                    p["renew_before_days"])
        if reason == "not signed by the given CA" and cert.get("kept_until_finish"):
            # Verified by clients the caller cannot reach (copies of a kubeconfig, pods): the old CA's signature
            # stays until the rotation's finish, so that they may take the new bundle up until then.
            current = pki.load_certificate_pem(files[name + ".crt"])
            if (any(pki.signed_by(current, trusted) for trusted in bundles[cert["ca"]])
                    and pki.renewal_due(current, p["renew_before_days"]) is None):
                reason = None
        if reason is None:
            pair = pki.CertAndKey(pki.load_certificate_pem(files[name + ".crt"]),
                                  pki.load_private_key_pem(files[name + ".key"]))
        else:
            pair = pki.issue_certificate(ca, cert["common_name"], organizations=cert["organizations"],
                                         dns_names=cert["dns_names"], ip_addresses=cert["ip_addresses"],
                                         server="server" in cert["usages"], client="client" in cert["usages"],
                                         validity_days=p["validity_days"], key_type=p["key_type"])
            files[name + ".crt"] = pki.certificate_pem(pair.cert)
            files[name + ".key"] = pki.private_key_pem(pair.key)
        pairs[name] = pair
        report[name] = dict(sha256=pki.certificate_sha256(pair.cert), reason=reason or "unchanged",
                            not_after=pki.certificate_not_after(pair.cert).isoformat())
    for name in p["service_account_keys"]:
        report[name] = _service_account_key(name, p, files, steps.get(name, ""))
    for conf in p["kubeconfigs"]:
        # A CA's .crt is its whole bundle: during a rotation a kubeconfig trusts the old and the new CA.
        config = kc.client_cert_kubeconfig(conf["server"], files[conf["ca"] + ".crt"], files[conf["cert"] + ".crt"],
                                           files[conf["cert"] + ".key"], cluster_name=conf["cluster_name"],
                                           user_name=conf["user_name"])
        files[conf["name"]] = kc.dump_kubeconfig(config).encode()
    return report


def _ca(cert, p, files, step):
    """A CA: kept, made, or moved along its rotation; its signing pair and its report."""
    name = cert["name"]
    wanted = pki.wanted_spec(cert["common_name"], is_ca=True)
    stored = pki.load_certificates_pem(files.get(name + ".crt"))
    first = pki.certificate_pem(stored[0]) if stored else None
    reason = pki.reissue_reason(first, files.get(name + ".key"), None, wanted, p["renew_before_days"])
    if reason is None:
        signer = pki.CertAndKey(stored[0], pki.load_private_key_pem(files[name + ".key"]))
        seen = {pki.certificate_sha256(signer.cert)}
        others = []
        for other in stored[1:]:
            if pki.certificate_sha256(other) not in seen:
                seen.add(pki.certificate_sha256(other))
                others.append(other)
    else:
        # A CA made anew starts no rotation: nothing trusts a pending key of the one it replaces.
        signer = pki.new_ca(cert["common_name"], validity_days=p["ca_validity_days"], key_type=p["key_type"])
        others = []
        files.pop(pki_rotation.NEXT_KEY % name, None)
    signer, bundle, done = pki_rotation.rotate_ca(name, cert["common_name"], signer, others, files, step,
                                                  p["ca_validity_days"], p["key_type"])
    files[name + ".crt"] = b"".join(pki.certificate_pem(c) for c in bundle)
    files[name + ".key"] = pki.private_key_pem(signer.key)
    files[pki_rotation.SIGNER_CERT % name] = pki.certificate_pem(signer.cert)
    return signer, dict(sha256=pki.certificate_sha256(signer.cert), reason=reason or "unchanged",
                        not_after=pki.certificate_not_after(signer.cert).isoformat(),
                        trusted=[pki.certificate_sha256(c) for c in bundle],
                        rotation=pki_rotation.state(bundle[1:], files.get(pki_rotation.NEXT_KEY % name)),
                        rotated=done)


def _service_account_key(name, p, files, step):
    """A service-account key pair: kept, made, or moved along its rotation; its report."""
    key = None
    if files.get(name + ".key") is not None:
        try:
            key = pki.load_private_key_pem(files[name + ".key"])
        except ValueError:
            key = None
    others = []
    if key is None:
        key = pki.new_service_account_key(p["key_type"])
        files.pop(pki_rotation.NEXT_KEY % name, None)
    else:
        for public in pki.load_public_keys_pem(files.get(name + ".pub")):
            pem = pki.public_key_pem(public)
            if pem != pki.public_key_pem(key) and pem not in others:
                others.append(pem)
    key, trusted, done = pki_rotation.rotate_service_account_key(name, key, others, files, step, p["key_type"])
    files[name + ".key"] = pki.private_key_pem(key)
    files[name + ".pub"] = b"".join(trusted)
    return dict(sha256=hashlib.sha256(trusted[0]).hexdigest(),
                trusted=[hashlib.sha256(pem).hexdigest() for pem in trusted],
                rotation=pki_rotation.state(trusted[1:], files.get(pki_rotation.NEXT_KEY % name)),
                rotated=done)
