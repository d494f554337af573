"""Where a virtual cluster's API server is reached: by its users (the endpoint) and by the operator (readiness)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.apiserver_endpoint import apiserver_endpoint


def _node(name, ip, ready=True):
    return {"metadata": {"name": name},
            "status": {"addresses": [{"type": "Hostname", "address": name}, {"type": "InternalIP", "address": ip}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _service(kind="NodePort", ingress=None, konnectivity=True):
    ports = [{"name": "https", "port": 6443, "nodePort": 31443}]
    if konnectivity:
        ports.append({"name": "konnectivity", "port": 8132, "nodePort": 31132})
    service = {"metadata": {"name": "vc1-apiserver", "namespace": "tenants"},
               "spec": {"type": kind, "clusterIP": "198.19.128.20", "ports": ports}, "status": {}}
    if ingress is not None:
        service["status"] = {"loadBalancer": {"ingress": ingress}}
    return service


POOL = [_node("pool-b", "192.0.2.12"), _node("pool-a", "192.0.2.11", ready=False), _node("pool-c", "192.0.2.13")]


def test_nodeport_uses_the_first_ready_placement_node_and_names_them_all():
    plan = apiserver_endpoint(_service(), POOL)
    assert plan["endpoint"] == "https://192.0.2.12:31443"
    assert plan["check_url"] == "https://192.0.2.12:31443/readyz"
    assert plan["node_addresses"] == ["192.0.2.12", "192.0.2.13", "192.0.2.11"]
    assert plan["ip_addresses"] == ["192.0.2.12", "192.0.2.13", "192.0.2.11", "198.19.128.20", "127.0.0.1"]
    assert plan["konnectivity_port"] == 31132 and plan["dns_names"] == []


def test_an_external_ip_is_the_endpoint_but_readiness_stays_on_a_placement_node():
    plan = apiserver_endpoint(_service(), POOL, external_ip="203.0.113.7", endpoint_address="203.0.113.9")
    assert plan["endpoint"] == "https://203.0.113.7:31443"
    assert plan["check_url"] == "https://192.0.2.12:31443/readyz"
    assert {"203.0.113.7", "203.0.113.9"} <= set(plan["ip_addresses"])


def test_the_sites_endpoint_address_comes_before_the_nodes():
    assert apiserver_endpoint(_service(), POOL, endpoint_address="203.0.113.9")["endpoint"] == "https://203.0.113.9:31443"


def test_ipv6_addresses_are_bracketed():
    plan = apiserver_endpoint(_service(), [_node("n", "2001:db8::5")])
    assert plan["endpoint"] == "https://[2001:db8::5]:31443"


def test_a_load_balancer_is_the_endpoint_on_the_service_port():
    plan = apiserver_endpoint(_service("LoadBalancer", [{"ip": "198.18.0.240", "ipMode": "Proxy"}]), POOL)
    assert plan["endpoint"] == "https://198.18.0.240:6443"
    assert plan["check_url"] == "https://192.0.2.12:31443/readyz"
    assert "198.18.0.240" in plan["ip_addresses"] and plan["konnectivity_port"] == 8132


def test_a_load_balancers_host_name_goes_into_the_certificates_names():
    plan = apiserver_endpoint(_service("LoadBalancer", [{"hostname": "vc1.lb.example.com"}], konnectivity=False),
                              POOL)
    assert plan["endpoint"] == "https://vc1.lb.example.com:6443"
    assert plan["dns_names"] == ["vc1.lb.example.com"] and plan["konnectivity_port"] == 0


def test_without_placement_nodes_readiness_goes_to_the_endpoint():
    plan = apiserver_endpoint(_service("LoadBalancer", [{"ip": "198.18.0.240"}]), [])
    assert plan["check_url"] == "https://198.18.0.240:6443/readyz"


@pytest.mark.parametrize("service,nodes,expected", [
    (_service("LoadBalancer", []), POOL, "has no load-balancer address yet"),
    (_service(), [], "no host node matches the control plane's placement"),
    (_service("ClusterIP"), POOL, "needs NodePort or LoadBalancer"),
    ({"metadata": {}, "spec": {"type": "NodePort", "ports": [{"name": "https", "port": 6443}]}}, POOL,
     "has no NodePort"),
])
def test_what_is_missing_is_named(service, nodes, expected):
    with pytest.raises(AnsibleFilterError, match=expected):
        apiserver_endpoint(service, nodes)
