"""The Konnectivity pieces as data: the API server's egress selector, the proxy server's and the agents' flags,
and the agents' objects in the tenant; a value that fails its check never reaches a flag."""

from __future__ import annotations

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import konnectivity


def _flags(args):
    return dict(arg[2:].split("=", 1) for arg in args)


def test_cluster_traffic_of_the_api_server_goes_to_the_socket():
    config = konnectivity.egress_selector_config("/run/konnectivity/konnectivity.socket")
    assert config["kind"] == "EgressSelectorConfiguration"
    [selection] = config["egressSelections"]
    assert selection["name"] == "cluster" and selection["connection"]["proxyProtocol"] == "GRPC"
    assert selection["connection"]["transport"] == {"uds": {"udsName": "/run/konnectivity/konnectivity.socket"}}


def test_the_server_takes_agents_only_with_a_token_of_their_own_account_for_it():
    flags = _flags(konnectivity.server_args("/run/k.socket", "/pki/apiserver.crt", "/pki/apiserver.key",
                                            "/etc/kubernetes/konnectivity.conf"))
    assert (flags["server-port"], flags["uds-name"], flags["mode"]) == ("0", "/run/k.socket", "grpc")
    assert (flags["agent-namespace"], flags["agent-service-account"], flags["authentication-audience"]) == \
        ("kube-system", "konnectivity-agent", "system:konnectivity-server")
    assert flags["health-bind-address"] == "127.0.0.1" and flags["agent-port"] == "8132"
    assert "agent-bind-address" not in flags


def test_the_agents_dial_out_with_a_projected_token_and_the_tenant_ca():
    sa, daemonset = konnectivity.agent_objects("kubenest.local/konnectivity-agent:v1", "198.18.0.13", 31132)
    assert sa["metadata"] == {"name": "konnectivity-agent", "namespace": "kube-system"}
    pod = daemonset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    flags = _flags(container["args"])
    assert (flags["proxy-server-host"], flags["proxy-server-port"]) == ("198.18.0.13", "31132")
    assert flags["agent-identifiers"] == "ipv4=$(HOST_IP)"
    assert {e["name"] for e in container["env"]} == {"HOST_IP"}
    [token] = pod["volumes"][0]["projected"]["sources"]
    assert token["serviceAccountToken"]["audience"] == konnectivity.AUDIENCE
    assert pod["automountServiceAccountToken"] is False  # no API token: the agent needs no rights
    assert container["securityContext"]["readOnlyRootFilesystem"] is True and pod["securityContext"]["runAsNonRoot"]
    [binding] = konnectivity.server_rbac()
    assert binding["roleRef"]["name"] == "system:auth-delegator"
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                    "name": "system:konnectivity-server"}]


@pytest.mark.parametrize("call,message", [
    (lambda: konnectivity.agent_objects("kubenest.local/a:1\nhostPID: true", "198.18.0.13", 31132), "image"),
    (lambda: konnectivity.agent_args("198.18.0.13 --kubeconfig=/x", 8132, "/ca.crt"), "neither an IP"),
    (lambda: konnectivity.agent_args("198.18.0.13", 70000, "/ca.crt"), "not a port number"),
    (lambda: konnectivity.server_args("k.socket", "/c", "/k", "/conf"), "absolute path"),
    (lambda: konnectivity.egress_selector_config("/run/k.socket\n- name: etcd"), "absolute path"),
])
def test_bad_values_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
