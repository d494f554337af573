# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import ipaddress

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

ARGUMENT_SPEC = dict(
    ca_path=dict(type="path", required=True),
    common_name=dict(type="str", required=True),
    organizations=dict(type="list", elements="str", default=[]),
    dns_names=dict(type="list", elements="str", default=[]),
    ip_addresses=dict(type="list", elements="str", default=[]),
    usages=dict(type="list", elements="str", choices=["server", "client"], default=["client"]),
    validity_days=dict(type="float", default=pki.LEAF_VALIDITY_DAYS),
    key_type=dict(type="str", choices=["rsa", "ec"], default="rsa"),
)


def load_ca(ca_path):
    try:
        with open(ca_path + ".crt", "rb") as cert, open(ca_path + ".key", "rb") as key:
            ca = pki.CertAndKey(pki.load_certificate_pem(cert.read()), pki.load_private_key_pem(key.read()))
    except (OSError, ValueError) as exc:
        raise AnsibleActionFail("ca_path: cannot load the CA pair %s.crt/.key: %s" % (ca_path, exc)) from None
    if not pki.certificate_spec(ca.cert)["is_ca"]:
        raise AnsibleActionFail("ca_path: %s.crt is not a CA certificate" % ca_path)
    return ca


def issue(args):
    for ip in args["ip_addresses"]:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise AnsibleActionFail("ip_addresses: %r is not an IP address" % ip) from None
    if not args["usages"]:
        raise AnsibleActionFail("usages: a leaf certificate needs at least one of server, client")
    if args["validity_days"] <= 0:
        raise AnsibleActionFail("validity_days must be positive, got %s" % args["validity_days"])
    pair = pki.issue_certificate(load_ca(args["ca_path"]), str(args["common_name"]),
                                 organizations=[str(o) for o in args["organizations"]],
                                 dns_names=[str(d) for d in args["dns_names"]],
                                 ip_addresses=[str(i) for i in args["ip_addresses"]],
                                 server="server" in args["usages"], client="client" in args["usages"],
                                 validity_days=args["validity_days"], key_type=args["key_type"])
    return dict(certificate=pki.certificate_pem(pair.cert).decode(), private_key=pki.private_key_pem(pair.key).decode(),
                sha256=pki.certificate_sha256(pair.cert),
                not_after=pki.certificate_not_after(pair.cert).isoformat())


class ActionModule(ActionBase):
    """Issues in this process: the pair exists only in memory until a task puts it where it belongs."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        try:
            if not pki.HAS_CRYPTOGRAPHY:
                raise AnsibleActionFail("the Python library cryptography is required on the controller")
            args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
            # Nothing is written, so check mode issues too: the tasks after it get a real pair to work with.
            result.update(issue(args), changed=False)
        except AnsibleActionFail as exc:
            result.update(exc.result)
            result.setdefault("changed", False)
        return result
