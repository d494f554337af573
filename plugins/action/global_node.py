# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as gn
from ansible_collections.kosmos.kubenest.plugins.module_utils.host_essentials import stranded_by_drain
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.kosmos.kubenest.plugins.module_utils.selectors import SelectorError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction

CLAIM_ATTEMPTS = 3


def _summary(node):
    return {"state": gn.state_of(node), "virtualCluster": gn.owner_of(node),
            "agentCertificates": gn.agent_pins_of(node)}


def _host_essentials(api, essentials):
    """protected(name, away) for plan_claim, from the host's Nodes and the pods of the essentials' namespaces."""
    host_nodes = api.list("v1", "Node")
    pods = []
    for namespace in sorted(set(entry["namespace"] for entry in essentials)):
        pods.extend(api.list("v1", "Pod", namespace))

    def protected(name, away):
        stranded = stranded_by_drain(name, pods, host_nodes, away, essentials)
        return "draining it would leave %s nowhere to run" % ", ".join(stranded) if stranded else None

    return protected


def _pins(given):
    pins = sorted(set(pin.strip().lower().replace(":", "") for pin in given))
    bad = [pin for pin in pins if len(pin) != 64 or pin.strip("0123456789abcdef")]
    if bad or not pins:
        raise AnsibleActionFail("agent_certificates: %s is not a list of SHA-256 fingerprints (64 hex digits)"
                                % (bad or given))
    return pins


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        virtual_cluster=dict(type="str", required=True),
        state=dict(type="str", choices=["reserved", "occupied", "returning", "held", "free"]),
        names=dict(type="list", elements="str"),
        policies=dict(type="list", elements="dict"),
        select_nodes=dict(type="list", elements="str"),
        exclude=dict(type="list", elements="str", default=[]),
        blocked=dict(type="list", elements="str", default=[]),
        queue=dict(type="list", elements="dict", default=[], options=dict(
            virtual_cluster=dict(type="str", required=True),
            policies=dict(type="list", elements="dict"),
            select_nodes=dict(type="list", elements="str"),
        )),
        namespace_rules=dict(type="list", elements="dict", default=[], options=dict(
            namespaces=dict(type="list", elements="str", required=True),
            node_selector=dict(type="dict"),
            max_nodes=dict(type="int"),
            max_virtual_clusters=dict(type="int"),
        )),
        protect=dict(type="list", elements="dict", default=[], options=dict(
            namespace=dict(type="str", required=True),
            selector=dict(type="dict", required=True),
        )),
        agent_certificates=dict(type="list", elements="str"),
        reason=dict(type="str", default="Updated"),
        note=dict(type="str", default=""),
    )
    MUTUALLY_EXCLUSIVE = [("names", "policies"), ("names", "select_nodes")]
    REQUIRED_ONE_OF = [("state", "agent_certificates")]

    def act(self, api, args, check_mode):
        owner = args["virtual_cluster"]
        if owner.count("/") != 1 or not all(owner.split("/")):
            raise AnsibleActionFail("virtual_cluster: %r must be namespace/name" % owner)
        if args["agent_certificates"] is not None and args["names"] is None:
            raise AnsibleActionFail("agent_certificates needs names")
        selecting = args["policies"] is not None or args["select_nodes"] is not None
        if selecting and args["state"] != gn.RESERVED:
            raise AnsibleActionFail("policies and select_nodes choose nodes to reserve: use them with state=reserved")
        if not selecting and args["names"] is None:
            raise AnsibleActionFail("give names, or policies/select_nodes with state=reserved")
        pins = _pins(args["agent_certificates"]) if args["agent_certificates"] is not None else None
        nodes = gn.GlobalNodes(api)
        try:
            if selecting:
                result, diff = self._claim(api, nodes, args, owner, check_mode)
            else:
                result, diff = self._move(nodes, args, owner, pins, check_mode)
        except gn.ClaimError as exc:
            raise AnsibleActionFail(str(exc)) from None
        except gn.Conflict as exc:
            raise AnsibleActionFail("GlobalNode %s changed while claiming; nothing is held, run again" % exc) \
                from None
        except SelectorError as exc:
            raise AnsibleActionFail("policies: %s" % exc) from None
        except KubeApiError as exc:
            if exc.status == 404:
                raise AnsibleActionFail("GlobalNode not found (%s): is the kosmos.io CRD installed and the node "
                                        "known?" % exc) from None
            raise AnsibleActionFail("GlobalNode API call failed: %s" % exc) from None
        result["changed"] = bool(result["moved"])
        if self._task.diff:
            result["diff"] = diff
        return result

    @staticmethod
    def _claim(api, nodes, args, owner, check_mode):
        result = dict(satisfied=True, moved=[], nodes={})
        diff = {"before": {}, "after": {}}
        done = []
        # Another virtual cluster may win a node between our read and our write: plan again from a fresh list.
        for attempt in range(CLAIM_ATTEMPTS):
            listed = nodes.list()
            protected = _host_essentials(api, args["protect"]) if args["protect"] else None
            queue = [w for w in args["queue"] if w["virtual_cluster"] != owner]
            rules = args["namespace_rules"]
            blocked = gn.kept_for_queue(listed, queue, exclude=set(args["exclude"]), blocked=set(args["blocked"]),
                                        protected=protected, rules=rules)
            plan = gn.plan_claim(listed, owner, policies=args["policies"], names=args["select_nodes"],
                                 exclude=set(args["exclude"]), blocked=blocked, protected=protected,
                                 rule=gn.namespace_rule(rules, owner.split("/")[0]))
            if not plan.satisfied:
                break
            try:
                done = nodes.reserve_all(plan.add, owner, args["reason"], args["note"] or plan.message(),
                                         check_mode=check_mode)
                break
            except (gn.ClaimError, gn.Conflict):
                if attempt == CLAIM_ATTEMPTS - 1:
                    raise
        result.update(satisfied=plan.satisfied, message=plan.message(), wanted=plan.wanted,
                      available=plan.available, added=[], assigned=[], surplus=plan.surplus)
        if plan.satisfied:
            for name, before, after in done:
                result["moved"].append(name)
                diff["before"][name], diff["after"][name] = _summary(before), _summary(after)
            result.update(added=plan.add, assigned=plan.assigned)
        by_name = dict((gn.name_of(n), n) for n in listed)
        result["nodes"] = dict((name, gn.node_facts(by_name[name])) for name in plan.assigned + plan.surplus)
        return result, diff

    @staticmethod
    def _move(nodes, args, owner, pins, check_mode):
        result = dict(satisfied=True, moved=[], nodes={})
        diff = {"before": {}, "after": {}}
        for name in args["names"]:
            changed, before, after = nodes.transition(name, owner, args["state"], args["reason"], args["note"],
                                                      check_mode=check_mode, pins=pins)
            if changed:
                result["moved"].append(name)
                diff["before"][name], diff["after"][name] = _summary(before), _summary(after)
            result["nodes"][name] = gn.node_facts(after)
        result["message"] = "%d node(s) %s" % (len(args["names"]), args["state"] or "with agent certificates recorded")
        return result, diff
