# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GlobalNode claim protocol: which virtual cluster holds which host node, and how that changes.

    free --reserve--> reserved --promote--> occupied --return--> returning --release--> free
      ^                   |                                          |
      +------release------+------------------------------------------+   (held: kept out of the pool)

Every write is a merge patch of the status subresource carrying the resourceVersion that was read, so two
writers never both win (compare-and-swap). Reservations for one virtual cluster are all-or-nothing: a plan
that cannot be met reserves nothing, and a partial reservation interrupted by a conflict is undone.

Pure planning is separated from the API calls so it can be reasoned about (and tested) on its own.
"""

from __future__ import annotations

import datetime

from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.kosmos.kubenest.plugins.module_utils.selectors import selector_match

GROUP, VERSION, PLURAL = "kosmos.io", "v1alpha1", "globalnodes"
FREE, RESERVED, OCCUPIED, RETURNING, HELD = "free", "reserved", "occupied", "returning", "held"
STATES = (FREE, RESERVED, OCCUPIED, RETURNING, HELD)
OWNED = (RESERVED, OCCUPIED, RETURNING, HELD)
CONDITION = "Claimed"
# A held node asks to be cleared and given back with this annotation (the operator runs playbooks/node_clear.yml);
# a clear that failed leaves the node held and says why in the second one.
CLEAR_ANNOTATION = "kubenest.kosmos.io/clear"
CLEAR_FAILED_ANNOTATION = "kubenest.kosmos.io/clear-failed"
# Which state a transition may start from, by target state.
ALLOWED_FROM = {
    RESERVED: (FREE, RESERVED),
    OCCUPIED: (RESERVED, OCCUPIED),
    RETURNING: (RESERVED, OCCUPIED, RETURNING),
    HELD: (RESERVED, OCCUPIED, RETURNING, HELD),
    FREE: (FREE, RESERVED, OCCUPIED, RETURNING, HELD),
}


class ClaimError(Exception):
    """A transition that the protocol refuses (wrong owner, wrong state, unknown node)."""


class Conflict(Exception):
    """The GlobalNode changed between read and write."""


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def name_of(node):
    return (node.get("metadata") or {}).get("name")


def state_of(node):
    return (node.get("status") or {}).get("state") or FREE


def owner_of(node):
    return (node.get("status") or {}).get("virtualCluster") or None


def labels_of(node):
    return (node.get("spec") or {}).get("labels") or {}


def agent_pins_of(node):
    """SHA-256s of the agent certificates accepted for the node, as recorded when one was re-issued."""
    return list(((node.get("status") or {}).get("agent") or {}).get("certificateSHA256") or [])


def node_facts(node):
    """What a run needs of a GlobalNode to reach and place its node: the address, the labels, where it is, and the
    agent certificates the node's agent may present (none recorded: any the agents' CA signed for the address)."""
    spec = node.get("spec") or {}
    return {"nodeIP": spec.get("nodeIP"), "labels": spec.get("labels") or {}, "state": state_of(node),
            "virtualCluster": owner_of(node), "agentCertificates": agent_pins_of(node)}


def clear_refusals(found):
    """Why each of `found` ({name: GlobalNode or None}) cannot be cleared; empty when all can."""
    why = []
    for name, node in found.items():
        if node is None:
            why.append("no GlobalNode %s" % name)
        elif state_of(node) != HELD:
            owner = owner_of(node)
            why.append("%s is %s%s, not held" % (name, state_of(node), " by %s" % owner if owner else ""))
    return why


def address_of(node):
    return (node.get("spec") or {}).get("nodeIP") or ""


def address_conflicts(globalnodes):
    """Why each node whose address another GlobalNode reports too must not be promoted, by name.

    A node's address comes from what its kubelet reports; a node that reports another's could have runs for
    that node connect to it. Neither of the two is promoted until one address is one node again.
    """
    by_address = {}
    for node in globalnodes:
        if address_of(node):
            by_address.setdefault(address_of(node), []).append(name_of(node))
    return dict((name, "its address %s is also GlobalNode %s's (spec.nodeIP); no node is promoted while two "
                       "report one address" % (address, ", ".join(sorted(n for n in names if n != name))))
                for address, names in by_address.items() if len(names) > 1 for name in names)


def owned_by(node, owner):
    return state_of(node) in OWNED and owner_of(node) == owner


class Plan:
    """Which nodes a virtual cluster should hold: `keep` it holds already, `add` to reserve, `surplus` to give
    back. `wanted` and `available` count what the request asks and what it could get; `shortfall` says why it
    cannot be met (empty when it can)."""

    def __init__(self):
        self.keep, self.add, self.surplus, self.shortfall = [], [], [], []
        self.wanted = 0
        self.beyond_pool = 0  # how many it asks for beyond what the host could give it were every node free

    @property
    def satisfied(self):
        return not self.shortfall

    @property
    def assigned(self):
        return self.keep + self.add

    @property
    def available(self):
        return self.wanted - sum(missing for missing, _text in self.shortfall)

    def message(self):
        if self.satisfied:
            return "%d of %d nodes available" % (self.wanted, self.wanted)
        reasons = "; ".join(text for _missing, text in self.shortfall)
        if self.beyond_pool:
            reasons += ("; it asks for %d node(s) more than the host has GlobalNodes for it, so it can never be met "
                        "as it stands and keeps no free node from later requests" % self.beyond_pool)
        return "%d of %d nodes available: %s" % (self.available, self.wanted, reasons)


def namespace_rule(rules, namespace):
    """The first of the site's namespace rules that names `namespace` (or C(*)); {} when none does (no limits).

    A rule: {namespaces: [names, or "*"], node_selector: labelSelector of the GlobalNodes they may take,
    max_nodes: nodes their virtual clusters may hold in all, max_virtual_clusters}.
    """
    for rule in rules or []:
        names = rule.get("namespaces") or []
        if namespace in names or "*" in names:
            return rule
    return {}


def _namespace_of(owner):
    return (owner or "").split("/", 1)[0]


def holder_seen_by(node, owner):
    """The node's holder as a message to `owner` may name it: messages end up in the status of owner's
    VirtualCluster, which its namespace reads, and never name another namespace's virtual cluster."""
    holder = owner_of(node)
    if not holder:
        return "nobody"
    if _namespace_of(holder) == _namespace_of(owner):
        return holder
    return "a virtual cluster of another namespace"


class _Tenancy:
    """What the namespace rule of `owner` lets it take: nodes its selector matches, up to `cap` more than the
    namespace's other virtual clusters hold (nodes held out of the pool for clearing do not count)."""

    def __init__(self, globalnodes, owner, rule):
        self.namespace = _namespace_of(owner)
        self.selector = (rule or {}).get("node_selector")
        self.max_nodes = (rule or {}).get("max_nodes")
        self.others = sum(1 for n in globalnodes if owner_of(n) != owner and state_of(n) not in (FREE, HELD)
                          and _namespace_of(owner_of(n)) == self.namespace)
        self.cap = None if self.max_nodes is None else max(0, int(self.max_nodes) - self.others)

    def refuses(self, node):
        if self.selector is not None and not selector_match(labels_of(node), self.selector):
            return "outside the nodes namespace %s may take" % self.namespace
        return None

    def full(self, holding):
        if self.cap is None or holding < self.cap:
            return None
        return ("namespace %s may hold at most %d node(s) (its other virtual clusters hold %d)"
                % (self.namespace, int(self.max_nodes), self.others))


def _as_free(node):
    spec = dict(node.get("spec") or {})
    spec["nodeIP"] = ""  # an address two nodes report is a passing fault, not a smaller pool
    return {"metadata": node.get("metadata") or {}, "spec": spec, "status": {"state": FREE}}


def beyond_pool(globalnodes, owner, policies=None, names=None, exclude=(), rule=None):
    """How many nodes a request asks for beyond what the host could ever give it: were every GlobalNode free,
    how many it would still lack (0 when it fits). Nodes in `exclude` (the operator's), and nodes or counts the
    namespace's `rule` does not allow, never count."""
    plan = plan_claim([_as_free(n) for n in globalnodes], owner, policies=policies, names=names, exclude=exclude,
                      rule=rule, judge_pool=False)
    return plan.wanted - plan.available


def plan_claim(globalnodes, owner, policies=None, names=None, exclude=(), blocked=(), protected=None, rule=None,
               judge_pool=True):
    """Choose the nodes `owner` ("namespace/name") should hold.

    policies: promotePolicies ([{labelSelector, nodeCount}], adding up, a node counting for one policy);
    names: promoteResources.nodes. Nodes the owner holds are preferred (no churn), then free ones in name
    order. `exclude` never gets chosen (e.g. the node running the operator); `blocked` free nodes are kept
    for virtual clusters that asked earlier and are still waiting. `protected(name, away)` says why a free node
    must stay in the host when the nodes in `away` leave too (e.g. it runs the host's DNS), or returns None.
    `rule` is the site's rule for the owner's namespace (namespace_rule): which free nodes it may take and how
    many its namespace may hold; nodes the owner holds already stay its own.
    """
    plan = Plan()
    tenancy = _Tenancy(globalnodes, owner, rule)
    by_name = dict((name_of(n), n) for n in globalnodes)
    mine = sorted(name_of(n) for n in globalnodes if owned_by(n, owner) and state_of(n) != HELD)
    free = sorted(name_of(n) for n in globalnodes
                  if state_of(n) == FREE and name_of(n) not in exclude and name_of(n) not in blocked)
    taken = set()
    # Nodes that are or will be out of the host cluster whatever this plan chooses.
    gone = set(name_of(n) for n in globalnodes if state_of(n) != FREE)
    conflicts = address_conflicts(globalnodes)

    def refusal(name):
        if name in mine:
            return None
        if name in conflicts:
            return conflicts[name]
        why = tenancy.refuses(by_name[name]) or tenancy.full(len(taken))
        if why:
            return why
        return protected(name, gone | taken) if protected is not None else None

    def take(name):
        taken.add(name)
        (plan.keep if name in mine else plan.add).append(name)

    if names:
        plan.wanted = len(names)
        for name in names:
            node = by_name.get(name)
            if node is None:
                plan.shortfall.append((1, "%s is not a GlobalNode" % name))
            elif name in mine:
                take(name)
            elif name in exclude:
                plan.shortfall.append((1, "%s runs the operator and is never promoted" % name))
            elif state_of(node) == FREE and name in blocked:
                plan.shortfall.append((1, "%s is kept for a virtual cluster that asked earlier" % name))
            elif state_of(node) == FREE and refusal(name):
                plan.shortfall.append((1, "%s stays in the host: %s" % (name, refusal(name))))
            elif state_of(node) == FREE:
                take(name)
            else:
                plan.shortfall.append((1, "%s is %s by %s" % (name, state_of(node), holder_seen_by(node, owner))))
    # The namespace's rule narrows the free nodes silently: one note per policy says so, not one per node.
    free_here = [name for name in free if not tenancy.refuses(by_name[name])]
    for index, policy in enumerate(policies or []):
        count = int(policy.get("nodeCount") or 0)
        selector = policy.get("labelSelector") or {}
        plan.wanted += count
        got, kept = 0, []
        for pool in (mine, free_here):
            for name in pool:
                if got == count:
                    break
                if name not in taken and selector_match(labels_of(by_name[name]), selector):
                    full = tenancy.full(len(taken)) if name not in mine else None
                    if full:  # the namespace's cap: no other node would do
                        kept.append(full)
                        break
                    why = refusal(name)
                    if why:
                        kept.append("%s stays in the host: %s" % (name, why))
                        continue
                    take(name)
                    got += 1
        if got < count:
            waiting = [name for name in sorted(blocked) if name in by_name and name not in taken
                       and state_of(by_name[name]) == FREE and selector_match(labels_of(by_name[name]), selector)]
            if waiting:
                kept.append("%s kept for a virtual cluster that asked earlier" % ", ".join(waiting))
            if tenancy.selector is not None and len(free_here) < len(free):
                kept.append("namespace %s may take only the nodes its rule selects" % tenancy.namespace)
            plan.shortfall.append((count - got, "promotePolicies[%d] matches %d free node(s), wants %d%s"
                                   % (index, got, count, "".join(" (%s)" % k for k in kept))))
    plan.surplus = [name for name in mine if name not in taken]
    if plan.shortfall and judge_pool:
        plan.beyond_pool = beyond_pool(globalnodes, owner, policies=policies, names=names, exclude=exclude,
                                       rule=rule)
    return plan


def kept_for_queue(globalnodes, queue, exclude=(), blocked=(), protected=None, rules=()):
    """Free nodes kept for the virtual clusters of `queue`, which asked earlier and still wait, oldest first.

    queue: [{virtual_cluster, policies, select_nodes}]. Each waiter in turn keeps the free nodes it would take
    (also while it cannot be met yet: nodes accumulate for it), so later, smaller requests cannot starve it. A
    waiter asking for more than the host could ever give it keeps nothing: it would block every later request.
    Each waiter is held to the site's rule for its namespace (`rules`, see namespace_rule).
    """
    kept = set(blocked)
    for waiter in queue:
        rule = namespace_rule(rules, _namespace_of(waiter["virtual_cluster"]))
        if beyond_pool(globalnodes, waiter["virtual_cluster"], policies=waiter.get("policies"),
                       names=waiter.get("select_nodes"), exclude=exclude, rule=rule):
            continue
        plan = plan_claim(globalnodes, waiter["virtual_cluster"], policies=waiter.get("policies"),
                          names=waiter.get("select_nodes"), exclude=exclude, blocked=kept, protected=protected,
                          rule=rule)
        kept.update(plan.add)
    return kept


def check_transition(node, owner, target):
    """Raise ClaimError unless `owner` may move `node` to `target`; return False when nothing changes."""
    state, holder = state_of(node), owner_of(node)
    if target not in ALLOWED_FROM:
        raise ClaimError("unknown state %r (expected one of %s)" % (target, ", ".join(STATES)))
    if state == FREE and target == FREE:
        return False
    if state != FREE and holder != owner:
        raise ClaimError("GlobalNode %s is %s by %s, not by %s"
                         % (name_of(node), state, holder_seen_by(node, owner), owner))
    if state not in ALLOWED_FROM[target]:
        raise ClaimError("GlobalNode %s is %s; it cannot become %s (allowed from: %s)"
                         % (name_of(node), state, target, ", ".join(ALLOWED_FROM[target])))
    return state != target


def check_pins(node, owner, pins):
    """Raise ClaimError unless `owner` may record agent certificates for `node` (only while it holds it);
    return whether they differ from the recorded ones."""
    if state_of(node) == FREE or owner_of(node) != owner:
        raise ClaimError("GlobalNode %s is %s by %s: only its holder %s records its agent certificate"
                         % (name_of(node), state_of(node), holder_seen_by(node, owner), owner))
    return sorted(pins) != sorted(agent_pins_of(node))


def transition_patch(node, owner, target, reason, message, at=None, pins=None):
    """The status merge patch moving `node` to `target` (and recording its agent certificates when `pins` is
    given), guarded by its resourceVersion."""
    at = at or now()
    status = {"state": target, "virtualCluster": None if target == FREE else owner, "stateSince": at}
    if target == state_of(node):
        status["stateSince"] = (node.get("status") or {}).get("stateSince") or at
    if pins is not None:
        status["agent"] = {"certificateSHA256": list(pins), "recordedAt": at}
    claimed = "False" if target == FREE else "True"
    previous = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == CONDITION]
    moved = not previous or previous[0].get("status") != claimed or not previous[0].get("lastTransitionTime")
    status["conditions"] = [{
        "type": CONDITION, "status": claimed, "reason": reason, "message": message,
        "lastTransitionTime": at if moved else previous[0]["lastTransitionTime"],
    }]
    return {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "status": status}


class GlobalNodes:
    """GlobalNode reads and compare-and-swap status writes through the collection's API client (KubeApi)."""

    API_VERSION = "%s/%s" % (GROUP, VERSION)

    def __init__(self, api):
        self.api = api

    def list(self):
        return self.api.list(self.API_VERSION, "GlobalNode")

    def get(self, name):
        node = self.api.get(self.API_VERSION, "GlobalNode", name)
        if node is None:
            raise KubeApiError("GET GlobalNode %s: HTTP 404 Not Found" % name, status=404, reason="Not Found")
        return node

    def write(self, patch, name):
        path = self.api.path(self.API_VERSION, "GlobalNode", name=name) + "/status"
        try:
            return self.api.request("PATCH", path, body=patch, content_type="application/merge-patch+json")
        except KubeApiError as exc:
            if exc.status == 409:
                raise Conflict(name) from None
            raise

    def transition(self, name, owner, target, reason, message, attempts=5, check_mode=False, pins=None):
        """Move one node (and record its agent certificates when `pins` is given); re-read and re-check on
        conflicts. `target` None keeps the node's state. Returns (changed, before, after)."""
        for _attempt in range(attempts):
            node = self.get(name)
            pins_change = pins is not None and check_pins(node, owner, pins)
            moves = check_transition(node, owner, target or state_of(node))
            if not moves and not pins_change:
                return False, node, node
            patch = transition_patch(node, owner, target or state_of(node), reason, message, pins=pins)
            if check_mode:
                return True, node, _merged(node, patch)
            try:
                return True, node, self.write(patch, name)
            except Conflict:
                continue
        raise ClaimError("GlobalNode %s kept changing while moving it to %s" % (name, target))

    def reserve_all(self, names, owner, reason, message, check_mode=False):
        """Reserve every one of `names` for `owner`, or none: on a refusal, undo what this call reserved."""
        done = []
        try:
            for name in names:
                changed, before, after = self.transition(name, owner, RESERVED, reason, message,
                                                         check_mode=check_mode)
                if changed:
                    done.append((name, before, after))
        except (ClaimError, Conflict):
            if not check_mode:
                for name, _before, _after in reversed(done):
                    self.transition(name, owner, FREE, "ClaimAbandoned",
                                    "released: the rest of the claim could not be had")
            raise
        return done


def _merged(node, patch):
    after = dict(node)
    status = dict(node.get("status") or {})
    status.update(patch["status"])
    after["status"] = dict((k, v) for k, v in status.items() if v is not None)
    return after
