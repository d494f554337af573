# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What pki_secrets issues: the checks of its arguments and the PKI brought up to date in memory."""

from __future__ import annotations

import ipaddress

from ansible_collections.kosmos.kubenest.plugins.module_utils import kubeconfig as kc
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.module_utils.files import is_file_name


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
    stored = [k for s in p["secrets"] for k in s["keys"]]
    bad = sorted(set(k for k in stored if not is_file_name(k)))
    if bad:
        problems.append("secrets: keys that are not file names: %s" % ", ".join(bad))
    unknown = sorted(set(stored) - set(produced))
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
    """Bring `files` (key -> PEM bytes, what the Secrets hold) up to date; per certificate what happened."""
    pairs = {}
    report = {}
    for cert in p["certificates"]:
        name = cert["name"]
        ca = pairs.get(cert["ca"]) if not cert["is_ca"] else None
        wanted = pki.wanted_spec(cert["common_name"], cert["organizations"], cert["dns_names"],
                                 cert["ip_addresses"], cert["usages"], cert["is_ca"])
        reason = pki.reissue_reason(files.get(name + ".crt"), files.get(name + ".key"), ca, wanted,
                                    p["renew_before_days"])
        if reason is None:
            pair = pki.CertAndKey(pki.load_certificate_pem(files[name + ".crt"]),
                                  pki.load_private_key_pem(files[name + ".key"]))
        elif cert["is_ca"]:
            pair = pki.new_ca(cert["common_name"], validity_days=p["ca_validity_days"], key_type=p["key_type"])
        else:
            pair = pki.issue_certificate(ca, cert["common_name"], organizations=cert["organizations"],
                                         dns_names=cert["dns_names"], ip_addresses=cert["ip_addresses"],
                                         server="server" in cert["usages"], client="client" in cert["usages"],
                                         validity_days=p["validity_days"], key_type=p["key_type"])
        if reason is not None:
            files[name + ".crt"] = pki.certificate_pem(pair.cert)
            files[name + ".key"] = pki.private_key_pem(pair.key)
        pairs[name] = pair
        report[name] = dict(sha256=pki.certificate_sha256(pair.cert), reason=reason or "unchanged",
                            not_after=pki.certificate_not_after(pair.cert).isoformat())
    for name in p["service_account_keys"]:
        key = None
        if files.get(name + ".key") is not None:
            try:
                key = pki.load_private_key_pem(files[name + ".key"])
            except ValueError:
                key = None
        if key is None:
            key = pki.new_service_account_key(p["key_type"])
            files[name + ".key"] = pki.private_key_pem(key)
        files[name + ".pub"] = pki.public_key_pem(key)
    for conf in p["kubeconfigs"]:
        config = kc.client_cert_kubeconfig(conf["server"], files[conf["ca"] + ".crt"], files[conf["cert"] + ".crt"],
                                           files[conf["cert"] + ".key"], cluster_name=conf["cluster_name"],
                                           user_name=conf["user_name"])
        files[conf["name"]] = kc.dump_kubeconfig(config).encode()
    return report
