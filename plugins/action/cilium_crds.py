# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import time

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import ClientPool
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import cilium
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction

CRD_API = "apiextensions.k8s.io/v1"
POLL_S = 0.2
# The API server validates and stores each CRD on its own: a few applies at once overlap their round trips and that
# work (Cilium's 22 take about half the time of one after another on two cores).
WORKERS = 4


def load_file(path):
    """The release's CRDs and schema version from a JSON file {"schemaVersion": ..., "definitions": [...]}."""
    try:
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
        if not isinstance(content, dict) or not isinstance(content.get("definitions"), list):
            raise ValueError("expected an object with schemaVersion and a list of definitions")
        return cilium.crd_definitions([("definition %d" % i, obj) for i, obj in enumerate(content["definitions"])],
                                      content.get("schemaVersion"))
    except (OSError, ValueError) as exc:
        raise AnsibleActionFail("crds_file %s: %s" % (path, exc)) from None


def established(crd):
    # A CRD read right after its apply may have no status yet, or null conditions.
    conditions = (((crd or {}).get("status") or {}).get("conditions")) or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def apply_all(api, crds, dry_run):
    """Server-side apply of every CRD, WORKERS at a time, each on a connection of its own."""
    with ClientPool(api, min(WORKERS, len(crds))) as clients:
        clients.map(lambda client, crd: client.apply(crd, dry_run=dry_run), crds)


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        crds_file=dict(type="path", required=True),
        wait=dict(type="bool", default=True),
        timeout=dict(type="float", default=60.0),
    )

    def act(self, api, args, check_mode):
        crds = load_file(args["crds_file"])
        registered = {item["metadata"]["name"]: (item["metadata"].get("labels") or {}).get(cilium.CRD_SCHEMA_LABEL)
                      for item in api.list_metadata(CRD_API, "CustomResourceDefinition",
                                                    label_selector=cilium.CRD_SCHEMA_LABEL)}
        todo = cilium.crds_to_register(crds, registered)
        names = [crd["metadata"]["name"] for crd in todo]
        apply_all(api, todo, check_mode)
        if todo and args["wait"] and not check_mode:
            deadline = time.monotonic() + args["timeout"]
            pending = list(names)
            while pending:
                pending = [name for name in pending if not established(api.get(CRD_API, "CustomResourceDefinition",
                                                                               name))]
                if not pending:
                    break
                if time.monotonic() >= deadline:
                    raise AnsibleActionFail("CRDs not Established within %.0f s: %s"
                                            % (args["timeout"], ", ".join(pending)))
                time.sleep(POLL_S)
        return dict(changed=bool(todo), registered=names, current=len(crds) - len(todo))
