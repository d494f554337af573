"""The control plane's NetworkPolicies, built as data."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_network_policies import hosted_network_policies

from tests.unit.collection.test_hosted_manifests import SETTINGS, VC, hosted_manifest


def _by_name(policies):
    return {p["metadata"]["name"]: p for p in policies}


def test_etcd_answers_only_its_own_apiserver_and_its_peers():
    policy = _by_name(hosted_network_policies(VC, ["etcd"]))["vc1-etcd"]
    etcd_pods = hosted_manifest("etcd", VC, SETTINGS)["spec"]["template"]["metadata"]["labels"]
    apiserver_pods = hosted_manifest("apiserver", VC, SETTINGS)["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= etcd_pods.items() and not selector.items() <= apiserver_pods.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    rule, members = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 2379}]
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"].items() <= apiserver_pods.items()
    assert "namespaceSelector" not in peer and "ipBlock" not in peer  # own namespace, own apiserver only
    # the members of a multi-member etcd, on the peer port only
    assert members["ports"] == [{"protocol": "TCP", "port": 2380}]
    (member,) = members["from"]
    assert member["podSelector"]["matchLabels"].items() <= etcd_pods.items()
    assert "namespaceSelector" not in member and "ipBlock" not in member
    assert policy["metadata"]["ownerReferences"] == VC["owner_references"]
    assert policy["metadata"]["labels"]["kosmos.io/virtualcluster"] == "vc1"


def test_the_apiserver_opens_only_its_port_and_the_controllers_nothing():
    policies = _by_name(hosted_network_policies(VC))
    assert set(policies) == {"vc1-etcd", "vc1-apiserver", "vc1-controllers"}
    api_ports = [{"protocol": "TCP", "port": 6443}, {"protocol": "TCP", "port": 8132}]  # API, Konnectivity agents
    assert policies["vc1-apiserver"]["spec"]["ingress"] == [{"ports": api_ports}]
    controllers = policies["vc1-controllers"]["spec"]
    assert controllers["ingress"] == [] and controllers["policyTypes"] == ["Ingress"]
    for component in ("controller-manager", "scheduler"):
        labels = hosted_manifest(component, VC, SETTINGS)["spec"]["template"]["metadata"]["labels"]
        selector = controllers["podSelector"]
        assert selector["matchLabels"].items() <= labels.items()
        assert labels["app.kubernetes.io/component"] in selector["matchExpressions"][0]["values"]


def test_another_virtual_cluster_in_the_namespace_is_not_selected():
    other = dict(VC, name="vc2", labels={"kosmos.io/virtualcluster": "vc2"},
                 selector={"kosmos.io/virtualcluster": "vc2"})
    mine = _by_name(hosted_network_policies(VC))["vc1-etcd"]
    theirs = hosted_manifest("apiserver", other, SETTINGS)["spec"]["template"]["metadata"]["labels"]
    assert not mine["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"].items() <= theirs.items()


def test_unknown_policies_and_bad_names_are_refused():
    with pytest.raises(AnsibleFilterError, match="unknown network policies kube-dns"):
        hosted_network_policies(VC, ["kube-dns"])
    with pytest.raises(AnsibleFilterError, match="InvalidRequest"):
        hosted_network_policies(dict(VC, name="1vc"))
