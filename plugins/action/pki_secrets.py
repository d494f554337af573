# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import base64

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki, run_result
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.kosmos.kubenest.plugins.module_utils.secrets import put_secret, read_secret
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction, plain
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.pki_plan import issue, problems_of
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.pki_rotation import (
    MARKER,
    NEXT_KEY,
    RotationError,
    rotation_steps,
)


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        namespace=dict(type="str", required=True),
        secrets=dict(type="list", elements="dict", required=True, no_log=False, options=dict(
            name=dict(type="str", required=True),
            keys=dict(type="list", elements="str", required=True, no_log=False),
        )),
        certificates=dict(type="list", elements="dict", default=[], options=dict(
            name=dict(type="str", required=True),
            common_name=dict(type="str", required=True),
            is_ca=dict(type="bool", default=False),
            ca=dict(type="str"),
            organizations=dict(type="list", elements="str", default=[]),
            dns_names=dict(type="list", elements="str", default=[]),
            ip_addresses=dict(type="list", elements="str", default=[]),
            usages=dict(type="list", elements="str", choices=["server", "client"], default=["client"]),
            kept_until_finish=dict(type="bool", default=False),
        )),
        service_account_keys=dict(type="list", elements="str", default=[], no_log=False),
        kubeconfigs=dict(type="list", elements="dict", default=[], options=dict(
            name=dict(type="str", required=True),
            server=dict(type="str", required=True),
            ca=dict(type="str", required=True),
            cert=dict(type="str", required=True),
            cluster_name=dict(type="str", default="kubernetes"),
            user_name=dict(type="str", default="admin"),
        )),
        labels=dict(type="dict", default={}),
        owner_references=dict(type="list", elements="dict", default=[]),
        validity_days=dict(type="float", default=float(pki.LEAF_VALIDITY_DAYS)),
        ca_validity_days=dict(type="float", default=float(pki.CA_VALIDITY_DAYS)),
        renew_before_days=dict(type="float", default=float(pki.RENEW_BEFORE_DAYS)),
        key_type=dict(type="str", choices=["rsa", "ec"], default="rsa", no_log=False),
        rotations=dict(type="dict", default={}, no_log=False),
        rotation_id=dict(type="str", default=""),
    )

    def act(self, api, args, check_mode):
        if not pki.HAS_CRYPTOGRAPHY:
            raise AnsibleActionFail("the Python package cryptography is needed on the controller")
        problems = problems_of(args)
        if problems:
            raise AnsibleActionFail("; ".join(problems))
        try:
            return self._run(api, args, check_mode)
        except KubeApiError as exc:
            raise AnsibleActionFail("Secrets in %s: API call failed: %s" % (args["namespace"], exc)) from None

    @staticmethod
    def _run(api, p, check_mode):
        labels, owners = plain(p["labels"]), plain(p["owner_references"])
        current, files, keys = {}, {}, {}
        for secret in p["secrets"]:
            found = read_secret(api, p["namespace"], secret["name"])
            current[secret["name"]] = found
            # A rotation's pending key lives beside the signing key, in whichever Secret holds that.
            keys[secret["name"]] = list(secret["keys"]) + [
                NEXT_KEY % key[:-len(".key")] for key in secret["keys"] if key.endswith(".key")]
            for key, value in ((found or {}).get("data") or {}).items():
                if key in keys[secret["name"]]:
                    files[key] = base64.b64decode(value)
        holders = dict((key[:-len(".key")], secret["name"]) for secret in p["secrets"] for key in secret["keys"]
                       if key.endswith(".key"))
        try:
            steps = rotation_steps(p, dict((name, current[holders[name]]) for name in p["rotations"]))
            reports = issue(dict(p, rotations=steps), files)
        except RotationError as exc:
            # Asking again cannot help: the step or the rotation asked for must change.
            raise AnsibleActionFail(run_result.permanent(
                "CARotationRefused", "Secrets in %s: %s; nothing was changed" % (p["namespace"], exc))) from None
        markers = {}
        for name, step in steps.items():
            if step and p["rotation_id"]:
                state = "done" if step == "finish" else reports[name]["rotation"]
                markers.setdefault(holders[name], {})[MARKER % name] = "%s %s" % (p["rotation_id"], state)
        secrets = {}
        for secret in p["secrets"]:
            data = dict((key, base64.b64encode(files[key]).decode()) for key in keys[secret["name"]] if key in files)
            changed = put_secret(api, current[secret["name"]], p["namespace"], secret["name"], data, labels, owners,
                                 check_mode=check_mode, annotations=markers.get(secret["name"]))
            secrets[secret["name"]] = dict(found=current[secret["name"]] is not None, changed=changed)
        accounts = set(p["service_account_keys"])
        also_trusted = [sha for report in reports.values() for sha in report.get("trusted", [])[1:]]
        return dict(changed=any(s["changed"] for s in secrets.values()), secrets=secrets, also_trusted=also_trusted,
                    certificates=dict((k, v) for k, v in reports.items() if k not in accounts),
                    service_account_keys=dict((k, v) for k, v in reports.items() if k in accounts))
