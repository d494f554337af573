"""The sandbox's load-balancer stand-in: which nodes it sends traffic to, and which addresses it gives out."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client as k8s

from sandbox.loadbalancer import EXCLUDE_LABEL, POOL_SIZE, backend_nodes, backends, default_pool, holder
from sandbox.machines.config import Sandbox


def _node(name, ip, ready=True, labels=None):
    return k8s.V1Node(metadata=k8s.V1ObjectMeta(name=name, labels=labels or {}),
                      status=k8s.V1NodeStatus(addresses=[k8s.V1NodeAddress(type="Hostname", address=name),
                                                         k8s.V1NodeAddress(type="InternalIP", address=ip)],
                                              conditions=[k8s.V1NodeCondition(type="Ready", status=str(ready))]))


def test_traffic_goes_only_to_ready_nodes_that_are_not_excluded_in_name_order():
    nodes = [_node("b", "192.0.2.2"), _node("a", "192.0.2.1"), _node("c", "192.0.2.3", ready=False),
             _node("d", "192.0.2.4", labels={EXCLUDE_LABEL: ""})]
    assert backends(nodes) == ["192.0.2.1", "192.0.2.2"]


def test_addresses_come_from_the_top_of_the_node_range_away_from_the_machines(tmp_path: Path):
    sb = Sandbox(state_dir=tmp_path, cache_dir=tmp_path, cidr="198.18.7.0/24")
    pool = default_pool(sb)
    assert len(pool) == POOL_SIZE and pool[0] == "198.18.7.240" and pool[-1] == "198.18.7.254"
    assert not {n.ip for n in sb.nodes} & set(pool)


def test_in_vip_mode_the_address_stays_on_its_node_while_that_may_hold_it_and_moves_to_the_first_otherwise():
    assert holder(["kn-cp1", "kn-w2"], "kn-w2") == "kn-w2"
    assert holder(["kn-cp1", "kn-w2"], "kn-w1") == "kn-cp1"  # kn-w1 left the host (promoted) or is not Ready
    assert holder(["kn-cp1"], None) == "kn-cp1"
    assert holder([], "kn-w1") is None


def test_the_names_of_the_nodes_come_with_their_addresses():
    nodes = [_node("b", "192.0.2.2"), _node("a", "192.0.2.1"), _node("c", "192.0.2.3", ready=False)]
    assert backend_nodes(nodes) == [("a", "192.0.2.1"), ("b", "192.0.2.2")]
