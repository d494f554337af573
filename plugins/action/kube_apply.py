# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import FIELD_MANAGER, ClientPool, comparable
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction, plain

# Requests of one call in flight at once: each round trip is mostly waiting for the server's storage.
APPLY_WORKERS = 4
# Kinds applied before the rest (others may live in them, be defined by them or be let in by them), and
# workloads after the rest, whose pods then find their configuration, identities and policies in place.
_FIRST_KINDS = frozenset(("Namespace", "CustomResourceDefinition", "NetworkPolicy", "PriorityClass"))
_LAST_KINDS = frozenset(("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Pod", "Job", "CronJob"))


def _objects(definition, namespace):
    items = definition if isinstance(definition, list) else [definition]
    # A List (as kubectl writes one file of several objects) stands for its items.
    items = [entry for item in items
             for entry in (item["items"] if isinstance(item, dict) and item.get("kind") == "List"
                           and isinstance(item.get("items"), list) else [item])]
    objects = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise AnsibleActionFail("definition %d is not a mapping" % index)
        obj = plain(item)
        meta = obj.get("metadata")
        if not obj.get("apiVersion") or not obj.get("kind") or not isinstance(meta, dict) or not meta.get("name"):
            raise AnsibleActionFail("definition %d needs apiVersion, kind and metadata.name" % index)
        if namespace and not meta.get("namespace"):
            meta["namespace"] = namespace
        objects.append(obj)
    return objects


def _wave(obj):
    kind = obj["kind"]
    return 0 if kind in _FIRST_KINDS else 2 if kind in _LAST_KINDS else 1


def _ref(obj):
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        definition=dict(type="raw"),
        api_version=dict(type="str", default="v1"),
        kind=dict(type="str"),
        name=dict(type="str"),
        namespace=dict(type="str"),
        label_selectors=dict(type="list", elements="str", default=[]),
        state=dict(type="str", choices=["present", "absent", "patched"], default="present"),
        patch_type=dict(type="str", choices=["merge", "json"], default="merge"),
        wait=dict(type="bool", default=False),
        wait_timeout=dict(type="float", default=120.0),
        field_manager=dict(type="str", default=FIELD_MANAGER),
        force_conflicts=dict(type="bool", default=True),
        propagation=dict(type="str", choices=["Background", "Foreground", "Orphan"], default="Background"),
    )
    MUTUALLY_EXCLUSIVE = [("definition", "label_selectors"), ("name", "label_selectors")]
    REQUIRED_ONE_OF = [("definition", "kind")]

    def act(self, api, args, check_mode):
        if args["state"] == "patched":
            json_patch = args["patch_type"] == "json"
            if not (args["kind"] and args["name"] and isinstance(args["definition"], list if json_patch else dict)):
                raise AnsibleActionFail("state=patched %sneeds kind, name and a definition that is %s"
                                        % (("with patch_type=json ", "a list of operations") if json_patch
                                           else ("", "one mapping")))
            return self._patched(api, args, check_mode)
        if args["patch_type"] != "merge":
            raise AnsibleActionFail("patch_type goes with state=patched only")
        if args["definition"] is not None and (args["kind"] or args["name"]):
            raise AnsibleActionFail("a definition names its objects itself: kind and name go with state=absent or "
                                    "state=patched only")
        if args["definition"] is not None:
            objects = _objects(args["definition"], args["namespace"])
            refs = [_ref(obj) for obj in objects]
        elif args["state"] == "present" or not (args["name"] or args["label_selectors"]):
            raise AnsibleActionFail("without a definition only state=absent with kind and a name or label selectors "
                                    "is possible")
        elif args["name"]:
            objects, refs = None, [(args["api_version"], args["kind"], args["name"], args["namespace"])]
        else:
            found = api.list(args["api_version"], args["kind"], args["namespace"],
                             label_selector=",".join(args["label_selectors"]))
            objects, refs = None, [_ref(obj) for obj in found]
        if args["state"] == "absent":
            return self._absent(api, refs, args, check_mode)
        return self._present(api, objects, args, check_mode)

    @staticmethod
    def _present(api, objects, args, check_mode):
        """Applies wave by wave (_wave); the objects of one wave go out together, each request on a connection
        no other request uses meanwhile. The result lists them in the order given."""
        def apply_one(client, obj):
            before = client.get(*_ref(obj))
            after = client.apply(obj, dry_run=check_mode, force=args["force_conflicts"],
                                 field_manager=args["field_manager"])
            return after, before is None or comparable(before) != comparable(after)

        applied = [None] * len(objects)
        changed = False
        with ClientPool(api, min(APPLY_WORKERS, len(objects))) as clients:
            for wave in (0, 1, 2):
                indexes = [i for i, obj in enumerate(objects) if _wave(obj) == wave]
                for i, (after, object_changed) in zip(indexes, clients.map(apply_one, [objects[i] for i in indexes]),
                                                      strict=True):
                    applied[i] = after
                    changed = changed or object_changed
        out = {"changed": changed, "objects": applied}
        if len(applied) == 1:
            out["result"] = applied[0]
        return out

    @staticmethod
    def _patched(api, args, check_mode):
        """A JSON merge patch (null removes a field) or a JSON patch (whose `test` operations make it all or
        nothing) of one object; a missing object is no change and no result."""
        ref = (args["api_version"], args["kind"], args["name"], args["namespace"])
        before = api.get(*ref)
        if before is None:
            return {"changed": False, "objects": [], "result": {}}
        if args["patch_type"] == "json":
            after = api.request("PATCH", api.path(*ref[:2], namespace=ref[3], name=ref[2]),
                                query={"fieldManager": args["field_manager"], "dryRun": "All" if check_mode else None},
                                body=plain(args["definition"]), content_type="application/json-patch+json")
        else:
            after = api.merge_patch(*ref, patch=plain(args["definition"]), dry_run=check_mode)
        return {"changed": comparable(before) != comparable(after), "objects": [after], "result": after}

    @staticmethod
    def _absent(api, refs, args, check_mode):
        changed = False
        for api_version, kind, name, namespace in refs:
            if api.delete(api_version, kind, name, namespace, propagation=args["propagation"], dry_run=check_mode):
                changed = True
                if args["wait"] and not check_mode:
                    api.wait_gone(api_version, kind, name, namespace, timeout=args["wait_timeout"])
        return {"changed": changed, "objects": [], "result": {}}
