"""A soak with faults (make test-long): for KUBENEST_SOAK_MINUTES (default 8) minutes a stream of creates, node
count changes, tenant writes and deletes across up to three virtual clusters (one of them, soak-keep, Ready
before the soak starts and never deleted, so that writes always find a tenant), while at random moments the
operator is SIGKILLed and started again, a node agent is killed, a tenant's etcd or API server pod is deleted, or
a node's containerd is restarted. Then the faults stop, every virtual cluster settles, and the end is judged:

- every GlobalNode is free, or occupied by exactly the VirtualCluster whose status lists it;
- every ConfigMap a tenant accepted during the soak is still in it;
- every worker runs a kubelet that is Ready, in the host or in the tenant that holds it;
- nothing labelled for a deleted VirtualCluster is left in the host namespace.

The choices follow from a seed (KUBENEST_SOAK_SEED, else the time), printed with the counts, so a failure can be
replayed. Bounded: the soak stops by itself, settling has its own deadline.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from sandbox.machines.machine import Machine
from tests.support import virtualclusters as vcs
from tests.support.nodes import globalnode, host_node_ready, tenant_api

pytestmark = [pytest.mark.long, pytest.mark.timeout(5400)]

NS = "kubenest-e2e-soak"
WORKERS = ("kn-w1", "kn-w2", "kn-w3")
MAX_CLUSTERS = 3
KEEPER = "soak-keep"
SETTLE_S = 1200


def _policy(count: int) -> list[dict]:
    """Nodes by count from the workers; none is no policy (a count is at least 1)."""
    if not count:
        return []
    return [{"labelSelector": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": list(WORKERS)}]}, "nodeCount": count}]


class Soak:
    """The workload and the faults, chosen by one seeded generator, and what they did."""

    def __init__(self, sb, api, operator, seed: int):
        self.sb, self.api, self.operator = sb, api, operator
        self.rng = random.Random(seed)
        self.custom, self.core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
        self.wanted: dict[str, int] = {}  # live virtual clusters -> nodes asked for
        self.deleted: list[str] = []
        self.written: dict[str, list[str]] = {}  # virtual cluster -> ConfigMaps its tenant accepted
        self.counts: dict[str, int] = {}
        self.made = 0

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    # The workload
    def create(self, name: str | None = None) -> None:
        self.made += 1
        name, nodes = name or f"soak{self.made}", self.rng.choice((0, 1))
        vcs.create_vc(self.api, NS, name, {"promotePolicies": _policy(nodes)})
        self.wanted[name] = nodes
        self.count("create")

    def scale(self) -> None:
        name = self.rng.choice(sorted(self.wanted))
        nodes = 1 - self.wanted[name] if self.wanted[name] < 2 else 1
        if sum(self.wanted.values()) - self.wanted[name] + nodes > len(WORKERS):
            return
        self.custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", name,
                                                   {"spec": {"promotePolicies": _policy(nodes)}})
        self.wanted[name] = nodes
        self.count("node count change")

    def delete(self) -> None:
        name = self.rng.choice(sorted(n for n in self.wanted if n != KEEPER))
        self.custom.delete_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", name)
        del self.wanted[name]
        self.deleted.append(name)
        self.count("delete")

    def write(self) -> None:
        ready = [n for n in sorted(self.wanted)
                 if vcs.condition(vcs.get_vc(self.api, NS, n), "Ready").get("status") == "True"]
        if not ready:
            self.count("tenant write skipped (none Ready)")
            return
        name = self.rng.choice(ready)
        key = f"soak-{len(self.written.get(name, [])) + 1}"
        try:
            k8s.CoreV1Api(tenant_api(self.api, NS, name)).create_namespaced_config_map(
                "default", {"metadata": {"name": key}, "data": {"written": str(time.time())}}, _request_timeout=10)
        except Exception:  # a tenant down under a fault: not accepted, not counted
            self.count("tenant write refused")
            return
        self.written.setdefault(name, []).append(key)
        self.count("tenant write")

    def step(self) -> None:
        choices = [self.write, self.write]
        if len(self.wanted) < MAX_CLUSTERS:
            choices += [self.create, self.create]
        if self.wanted:
            choices.append(self.scale)
        if len(self.wanted) > 2:
            choices.append(self.delete)
        self.rng.choice(choices)()

    # The faults
    def machine(self, name: str) -> Machine:
        return Machine(self.sb, next(n for n in self.sb.nodes if n.name == name))

    def kill_operator(self) -> None:
        self.operator.kill()
        time.sleep(self.rng.uniform(1, 8))
        self.operator.start()
        self.count("operator killed")

    def kill_agent(self) -> None:
        machine = self.machine(self.rng.choice(WORKERS))
        machine.nsenter(["systemctl", "kill", "--signal=KILL", "kubenest-agent"], check=False)
        time.sleep(1)
        machine.nsenter(["systemctl", "start", "kubenest-agent"], check=False)
        self.count("agent killed")

    def delete_control_plane_pod(self) -> None:
        if not self.wanted:
            return
        name, component = self.rng.choice(sorted(self.wanted)), self.rng.choice(("etcd", "apiserver"))
        pods = self.core.list_namespaced_pod(NS, label_selector=f"kosmos.io/virtualcluster={name},"
                                                                f"app.kubernetes.io/component={component}").items
        for pod in pods[:1]:
            self.core.delete_namespaced_pod(pod.metadata.name, NS)
            self.count(f"{component} pod deleted")

    def restart_containerd(self) -> None:
        machine = self.machine(self.rng.choice(WORKERS))
        machine.nsenter(["systemctl", "restart", "containerd"], timeout=120, check=False)
        self.count("containerd restarted")

    def fault(self) -> None:
        self.rng.choice((self.kill_operator, self.kill_agent, self.delete_control_plane_pod,
                         self.restart_containerd))()


def _settled(api, soak: Soak) -> bool:
    for name, nodes in soak.wanted.items():
        vc = vcs.get_vc(api, NS, name)
        status = (vc or {}).get("status") or {}
        # Ready stays True while a run for a newer spec goes on (phase Updating): only a finished run of the
        # latest spec counts, or a run returning a node is judged by the status of the run before it.
        current = status.get("phase") == "Completed" and \
            status.get("observedGeneration") == (vc.get("metadata") or {}).get("generation")
        if not current or vcs.condition(vc, "Ready").get("status") != "True" \
                or status.get("nodesReady") != f"{nodes}/{nodes}":
            return False
    return all(vcs.get_vc(api, NS, name) is None for name in soak.deleted)


def _kubelet_ready_somewhere(api, soak: Soak, worker: str) -> bool:
    holder = (globalnode(api, worker).get("status") or {}).get("virtualCluster")
    if not holder:
        return host_node_ready(api, worker)
    tenant = k8s.CoreV1Api(tenant_api(api, *holder.split("/")))
    node = tenant.read_node(worker, _request_timeout=10)
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def test_a_soak_with_faults_ends_with_every_node_and_every_write_where_it_belongs(host_cluster, tmp_path):
    sb, api = host_cluster
    minutes = float(os.environ.get("KUBENEST_SOAK_MINUTES", "8"))
    seed = int(os.environ.get("KUBENEST_SOAK_SEED", str(int(time.time()))))
    print(f"\nsoak: {minutes:g} min, seed {seed} (KUBENEST_SOAK_SEED={seed} replays the choices)")
    with vcs.own_operator(sb, api, NS, Path(tmp_path), "--node-wait-interval", "5", "--resync-interval", "10",
                          "--backoff-base", "10", leftovers_timeout=900) as operator:
        soak = Soak(sb, api, operator, seed)
        soak.create(KEEPER)  # never deleted: the tenant the writes mostly go to
        vcs.wait_ready(api, NS, KEEPER, timeout=900)
        deadline = time.monotonic() + minutes * 60
        while time.monotonic() < deadline:
            time.sleep(soak.rng.uniform(8, 20))
            (soak.fault if soak.rng.random() < 0.35 else soak.step)()
        if operator.proc.poll() is not None:
            operator.start()
        started = time.monotonic()
        vcs.wait_for(lambda: _settled(api, soak), SETTLE_S, "every virtual cluster settled after the soak", interval=5)
        settled = time.monotonic() - started

        claims = {}
        for name in soak.wanted:
            for node in vcs.get_vc(api, NS, name)["status"].get("nodes") or []:
                claims[node["name"]] = f"{NS}/{name}"
        for worker in WORKERS:
            status = globalnode(api, worker).get("status") or {}
            if worker in claims:
                assert status.get("state") == "occupied" and status.get("virtualCluster") == claims[worker], (
                    worker, status, claims)
            else:
                assert status.get("state") == "free" and not status.get("virtualCluster"), (worker, status, claims)
            assert _kubelet_ready_somewhere(api, soak, worker), f"{worker} has no Ready kubelet"
        lost = {}
        for name, keys in soak.written.items():
            if name not in soak.wanted:
                continue
            tenant = k8s.CoreV1Api(tenant_api(api, NS, name))
            have = set()
            for key in keys:
                try:
                    have.add(tenant.read_namespaced_config_map(key, "default", _request_timeout=10).metadata.name)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            if set(keys) - have:
                lost[name] = sorted(set(keys) - have)
        assert not lost, f"tenant writes lost: {lost}"

        def leftovers():
            return {name: {kind: names for kind, names in vcs.labelled_objects(api, NS, name).items() if names}
                    for name in soak.deleted}
        try:  # pods of a deleted control plane may still be terminating
            vcs.wait_for(lambda: not any(leftovers().values()), 180, "nothing left of the deleted virtual clusters")
        except AssertionError:
            pass
        assert not any(leftovers().values()), f"left behind by deleted virtual clusters: {leftovers()}"
        kept = sum(len(keys) for name, keys in soak.written.items() if name in soak.wanted)
        assert soak.written.get(KEEPER), f"no write reached {KEEPER} during the soak: nothing was put to the test"
        print(f"soak seed {seed}: {dict(sorted(soak.counts.items()))}; settled {settled:.0f}s after the soak; "
              f"{len(soak.wanted)} virtual clusters left holding {len(claims)} node(s), {len(soak.deleted)} deleted "
              f"without leftovers; {kept} tenant writes all kept; every worker Ready where its GlobalNode says")
        for name in list(soak.wanted):
            vcs.delete_vc(api, NS, name, timeout=900)
    vcs.wait_for(lambda: all((globalnode(api, w).get("status") or {}).get("state") == "free" for w in WORKERS),
                 300, "every worker free after the soak")
    assert all(host_node_ready(api, w) for w in WORKERS)
