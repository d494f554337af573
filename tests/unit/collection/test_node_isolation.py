"""Who may reach whom on the node network: every node's filter, worked out from the host's objects."""

from __future__ import annotations

import pytest
from ansible_collections.kosmos.kubenest.plugins.filter.tenant_api_endpoints import tenant_api_endpoints
from ansible_collections.kosmos.kubenest.plugins.modules.node_firewall import (
    InvalidRule,
    chain_rules,
    restore_script,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_isolation import (
    plan,
    recorded_endpoints,
    recorded_ports,
)

CP, W1, W2, W3 = "198.18.0.10", "198.18.0.11", "198.18.0.12", "198.18.0.13"


def _node(name, ip):
    return {"metadata": {"name": name}, "status": {"addresses": [{"type": "Hostname", "address": name},
                                                                 {"type": "InternalIP", "address": ip}]}}


PORTS = {"t/a": "31001,31002", "t/b": "31003,31004"}


def _gnode(name, ip, state="free", owner=None, ports=None):
    status = {"state": state, **({"virtualCluster": owner} if owner else {})}
    ports = PORTS.get(owner) if ports is None else ports
    annotations = {"kosmos.io/tenant-api-ports": ports} if ports else {}
    return {"metadata": {"name": name, "annotations": annotations}, "spec": {"nodeIP": ip}, "status": status}


def test_host_nodes_let_each_tenant_reach_only_its_own_api_server_and_tenants_drop_each_other():
    result = plan([_node("kn-cp1", CP), _node("kn-w3", W3)],
                  [_gnode("kn-w1", W1, "occupied", "t/a"), _gnode("kn-w2", W2, "occupied", "t/b"),
                   _gnode("kn-w3", W3)])
    assert list(result) == ["kn-cp1", "kn-w1", "kn-w2", "kn-w3"]
    host = {"allow": [{"sources": [W1], "tcp_ports": [31001, 31002]}, {"sources": [W2], "tcp_ports": [31003, 31004]}],
            "deny": [W1, W2]}
    none = {"agentCertificates": [], "ipv6_deny_unlisted": True, "ipv6_allow": []}
    assert result["kn-cp1"] == {"address": CP, "side": "host", **host, **none, "node_address": CP}
    assert result["kn-w3"] == {"address": W3, "side": "host", **host, **none, "node_address": W3}
    assert result["kn-w1"] == {"address": W1, "side": "t/a", "allow": [], "deny": [W2], **none, "node_address": W1}
    assert result["kn-w2"] == {"address": W2, "side": "t/b", "allow": [], "deny": [W1], **none, "node_address": W2}


def test_ipv6_is_closed_where_a_node_has_someone_to_keep_off_but_for_the_hosts_own():
    cp = _node("kn-cp1", CP)
    # A dual-stack host node: its IPv6 InternalIP and pod network stay reachable between host nodes; the IPv4
    # address is the one the filters are written for, whichever the node lists first.
    cp["status"]["addresses"].insert(0, {"type": "InternalIP", "address": "fd00:18::10"})
    cp["spec"] = {"podCIDRs": ["10.244.0.0/24", "fd00:244::/64", "fd00:245::1/64"]}  # the last is no network
    result = plan([cp, _node("kn-w3", W3)], [_gnode("kn-w1", W1, "occupied", "t/a"), _gnode("kn-w3", W3)])
    assert result["kn-cp1"]["address"] == CP and result["kn-cp1"]["node_address"] == CP
    assert result["kn-cp1"]["ipv6_deny_unlisted"] is True
    assert result["kn-cp1"]["ipv6_allow"] == ["fd00:18::10/128", "fd00:244::/64"]
    assert result["kn-w1"]["ipv6_deny_unlisted"] is False and result["kn-w1"]["ipv6_allow"] == []  # alone

    # No tenant node at all: nothing to keep off, IPv6 left as it is.
    quiet = plan([cp], [_gnode("kn-w1", W1)])
    assert quiet["kn-cp1"]["ipv6_deny_unlisted"] is False and quiet["kn-cp1"]["ipv6_allow"] == []


def test_each_node_is_planned_with_the_agent_certificates_its_own_globalnode_records():
    w1, w3 = _gnode("kn-w1", W1, "occupied", "t/a"), _gnode("kn-w3", W3)
    w1["status"]["agent"] = {"certificateSHA256": ["aa" * 32]}
    w3["status"]["agent"] = {"certificateSHA256": ["bb" * 32, "cc" * 32]}
    result = plan([_node("kn-cp1", CP), _node("kn-w3", W3)], iter([w1, w3]))
    assert result["kn-w1"]["agentCertificates"] == ["aa" * 32]
    assert result["kn-w3"]["agentCertificates"] == ["bb" * 32, "cc" * 32]  # a host node that is a GlobalNode too
    assert result["kn-cp1"]["agentCertificates"] == []  # no GlobalNode: the CA and the address only


def test_nodes_of_one_tenant_reach_each_other():
    result = plan([_node("kn-cp1", CP)], [_gnode("kn-w1", W1, "occupied", "t/a"),
                                          _gnode("kn-w2", W2, "returning", "t/a")])
    assert result["kn-w1"]["deny"] == [] and result["kn-w2"]["deny"] == []
    assert result["kn-cp1"]["allow"] == [{"sources": [W1, W2], "tcp_ports": [31001, 31002]}]


def test_a_reserved_node_is_the_hosts_until_its_host_node_is_gone():
    still_in_host = plan([_node("kn-cp1", CP), _node("kn-w1", W1)], [_gnode("kn-w1", W1, "reserved", "t/a")])
    assert still_in_host["kn-w1"]["side"] == "host" and still_in_host["kn-cp1"]["deny"] == []
    left = plan([_node("kn-cp1", CP)], [_gnode("kn-w1", W1, "reserved", "t/a")])
    assert left["kn-w1"]["side"] == "t/a" and left["kn-cp1"]["deny"] == [W1]


def test_a_wiped_node_without_the_annotation_is_no_tenants_before_it_registers_in_the_host():
    result = plan([_node("kn-cp1", CP)], [_gnode("kn-w1", W1, "returning", "t/a", ports=""),
                                          _gnode("kn-w2", W2, "occupied", "t/b")])
    assert "kn-w1" not in result  # let in everywhere; it gets the host's chain once it is a host Node
    assert result["kn-cp1"]["deny"] == [W2] and result["kn-w2"]["deny"] == []


def test_a_tenant_without_recorded_ports_gets_none_and_free_nodes_no_rule():
    result = plan([_node("kn-cp1", CP)], [_gnode("kn-w1", W1, "occupied", "t/c", ports="x"),
                                          _gnode("kn-w2", W2, "free")])
    assert result["kn-cp1"]["allow"] == [] and result["kn-cp1"]["deny"] == [W1]
    assert "kn-w2" not in result  # neither in the host nor a tenant's: nothing to filter there


@pytest.mark.parametrize(("value", "ports"), [
    ("31001,31002", [31001, 31002]), ("31002, 31001,31002", [31001, 31002]), ("", []),
    ("31001,x", []), ("0", []), ("70000", []), ("31001;rm -rf /", []),
])
def test_recorded_ports_are_read_strictly(value, ports):
    assert recorded_ports({"metadata": {"annotations": {"kosmos.io/tenant-api-ports": value}}}) == ports


def test_too_many_recorded_ports_count_as_none():
    many = ",".join(str(p) for p in range(31000, 31016))
    result = plan([_node("kn-cp1", CP)], [_gnode("kn-w1", W1, "occupied", "t/a", ports=many)])
    assert result["kn-cp1"]["allow"] == [] and result["kn-cp1"]["deny"] == [W1]


VIP = "198.18.0.241"


def test_host_nodes_let_a_tenant_behind_a_vip_load_balancer_reach_its_address_at_the_service_ports():
    behind = _gnode("kn-w1", W1, "occupied", "t/a")
    behind["metadata"]["annotations"]["kosmos.io/tenant-api-endpoints"] = f"{VIP}:6443,{VIP}:8132"
    result = plan([_node("kn-cp1", CP)], [behind, _gnode("kn-w2", W2, "occupied", "t/b")])
    assert result["kn-cp1"]["allow"] == [
        {"sources": [W1], "tcp_ports": [31001, 31002]},
        {"sources": [W1], "destinations": [VIP], "tcp_ports": [6443, 8132]},
        {"sources": [W2], "tcp_ports": [31003, 31004]},  # the other tenant: its NodePorts only, not the address
    ]
    assert result["kn-w1"]["allow"] == [] and result["kn-w2"]["deny"] == [W1]


@pytest.mark.parametrize(("value", "expected"), [
    (f"{VIP}:6443,{VIP}:8132", ([VIP], [6443, 8132])),
    (f" {VIP}:8132 , 198.18.0.9:6443,{VIP}:6443", (["198.18.0.9", VIP], [6443, 8132])),
    ("", ([], [])),
    (f"{VIP}:6443,{VIP}", ([], [])),  # one bad pair and none count
    (f"{VIP}:0", ([], [])),
    ("127.0.0.1:6443", ([], [])),
    ("0.0.0.0:6443", ([], [])),
    ("[fd00::1]:6443", ([], [])),
    (f"{VIP}:6443 -j ACCEPT", ([], [])),
    (",".join(f"198.18.0.{i}:6443" for i in range(1, 10)), ([], [])),  # more than a Service has
])
def test_recorded_endpoints_are_read_strictly(value, expected):
    assert recorded_endpoints({"metadata": {"annotations": {"kosmos.io/tenant-api-endpoints": value}}}) == expected


def _service(kind="LoadBalancer", ingress=None):
    ports = [{"name": "https", "port": 6443, "nodePort": 31001},
             {"name": "konnectivity", "port": 8132, "nodePort": 31002},
             {"name": "metrics", "port": 9000, "nodePort": 31003}]
    return {"spec": {"type": kind, "ports": ports}, "status": {"loadBalancer": {"ingress": ingress or []}}}


@pytest.mark.parametrize(("service", "expected"), [
    (_service(ingress=[{"ip": VIP, "ipMode": "VIP"}]), f"{VIP}:6443,{VIP}:8132"),
    (_service(ingress=[{"ip": VIP}]), f"{VIP}:6443,{VIP}:8132"),  # no ipMode means VIP
    (_service(ingress=[{"ip": VIP, "ipMode": "Proxy"}]), ""),  # it connects to the NodePorts from its own address
    (_service(ingress=[{"hostname": "lb.example.com"}]), ""),
    (_service(ingress=[]), ""),
    (_service("NodePort"), ""),
])
def test_the_recorded_pairs_are_those_the_host_nodes_take_traffic_for(service, expected):
    assert tenant_api_endpoints(service) == expected
    if expected:
        assert recorded_endpoints({"metadata": {"annotations": {"kosmos.io/tenant-api-endpoints": expected}}}) == (
            [VIP], [6443, 8132])


def test_rules_with_destinations_read_as_iptables_prints_them():
    rules = chain_rules("KUBENEST-ISOLATION", [{"sources": [W1, W2], "destinations": [VIP],
                                                "tcp_ports": [6443, 8132]}], [W1])
    assert rules[1:] == [
        f"-A KUBENEST-ISOLATION -s {W1}/32 -d {VIP}/32 -p tcp -m multiport --dports 6443,8132 -j RETURN",
        f"-A KUBENEST-ISOLATION -s {W2}/32 -d {VIP}/32 -p tcp -m multiport --dports 6443,8132 -j RETURN",
        f"-A KUBENEST-ISOLATION -s {W1}/32 -j DROP",
    ]


def test_rules_read_as_iptables_prints_them():
    rules = chain_rules("KUBENEST-ISOLATION", [{"sources": [W1, "198.18.1.0/24"], "tcp_ports": [31001, 31002]}],
                        [W1, W2, W1])
    assert rules == [
        "-A KUBENEST-ISOLATION -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
        f"-A KUBENEST-ISOLATION -s {W1}/32 -p tcp -m multiport --dports 31001,31002 -j RETURN",
        "-A KUBENEST-ISOLATION -s 198.18.1.0/24 -p tcp -m multiport --dports 31001,31002 -j RETURN",
        f"-A KUBENEST-ISOLATION -s {W1}/32 -j DROP",
        f"-A KUBENEST-ISOLATION -s {W2}/32 -j DROP",
    ]
    script = restore_script("KUBENEST-ISOLATION", rules, jump="-j KUBENEST-ISOLATION")
    assert script.startswith("*mangle\n:KUBENEST-ISOLATION - [0:0]\n")
    assert script.endswith("-I PREROUTING 1 -j KUBENEST-ISOLATION\nCOMMIT\n")


@pytest.mark.parametrize(("chain", "allow", "deny", "message"), [
    ("KUBENEST-ISOLATION", [], ["198.18.0.1; rm -rf /"], "not an IP address"),
    ("KUBENEST-ISOLATION", [], ["fd00::1"], "only IPv4"),
    ("KUBENEST-ISOLATION", [], ["198.18.0.1/24"], "not an IP address"),  # host bits set
    ("KUBENEST-ISOLATION", [{"sources": [W1], "tcp_ports": [0]}], [], "not a TCP port"),
    ("KUBENEST-ISOLATION", [{"sources": [W1], "tcp_ports": [True]}], [], "not a TCP port"),
    ("KUBENEST-ISOLATION", [{"sources": [W1], "tcp_ports": list(range(1000, 1016))}], [], "1 to 15 ports"),
    ("KUBENEST-ISOLATION", [{"sources": [W1], "destinations": ["fd00::1"], "tcp_ports": [6443]}], [],
     "only IPv4 destinations"),
    ("KUBENEST-ISOLATION", [{"sources": [W1], "destinations": ["lb.example.com"], "tcp_ports": [6443]}], [],
     "not an IP address"),
    ("PREROUTING", [], [], "not a chain name of ours"),
    ("KUBENEST-X -j ACCEPT", [], [], "not a chain name of ours"),
])
def test_bad_rules_are_refused_by_name(chain, allow, deny, message):
    with pytest.raises(InvalidRule, match=message):
        chain_rules(chain, allow, deny)
