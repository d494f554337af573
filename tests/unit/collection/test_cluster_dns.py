"""The cluster DNS objects: one address for kubelets and Service, a Corefile no setting can add to."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.cluster_dns_ip import cluster_dns_ip
from ansible_collections.kosmos.kubenest.plugins.filter.cluster_dns_manifests import cluster_dns_manifests
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import cluster_dns

IMAGE = "registry.example.com/coredns:1.2.3"


def _by_kind(objects):
    return {obj["kind"]: obj for obj in objects}


@pytest.mark.parametrize(("cidr", "ip"), [("10.96.0.0/12", "10.96.0.10"), ("198.18.128.0/17", "198.18.128.10"),
                                          ("10.100.0.0/24", "10.100.0.10"), ("fd00:10:96::/108", "fd00:10:96::a")])
def test_dns_address_is_the_tenth_of_the_service_range(cidr, ip):
    assert cluster_dns_ip(cidr) == ip
    service = _by_kind(cluster_dns_manifests(cidr, {"image": IMAGE}))["Service"]
    assert service["spec"]["clusterIP"] == ip


@pytest.mark.parametrize("cidr", ["10.96.0.0/29", "not-a-cidr", "10.96.0.300/12", ""])
def test_bad_service_ranges_are_refused(cidr):
    with pytest.raises(AnsibleFilterError, match="InvalidRequest"):
        cluster_dns_ip(cidr)


def test_without_upstream_other_names_get_nxdomain_at_once():
    corefile = cluster_dns.corefile("cluster.local", [])
    assert "forward" not in corefile and "rcode NXDOMAIN" in corefile
    assert corefile.startswith("cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {")
    assert "kubernetes cluster.local in-addr.arpa ip6.arpa {" in corefile


def test_upstream_resolvers_are_forwarded_to_with_loop_detection():
    upstream = ["10.0.0.2", "10.0.0.3:5353", "/etc/resolv.conf", "fd00::53", "[fd00::54]:53"]
    corefile = cluster_dns.corefile("tenant.example", upstream)
    assert "forward . " + " ".join(upstream) in corefile and "    loop" in corefile
    assert "NXDOMAIN" not in corefile


@pytest.mark.parametrize("domain", ["cluster.local }\n. { whoami", "Cluster.Local", "cluster..local", "-x.local",
                                    "a" * 64 + ".local", "cluster.local # x", ""])
def test_hostile_or_malformed_domains_are_refused(domain):
    with pytest.raises(AnsibleFilterError, match="cluster domain"):
        cluster_dns_manifests("10.96.0.0/12", {"image": IMAGE, "cluster_domain": domain})


@pytest.mark.parametrize("upstream", ["8.8.8.8 }\n. { whoami", "dns.example.com", "10.0.0.1:99999", "10.0.0.1:",
                                      "/etc/hosts", "tls://1.1.1.1", "[10.0.0.1]", "fd00::1:53x"])
def test_hostile_or_malformed_upstreams_are_refused(upstream):
    with pytest.raises(AnsibleFilterError, match="upstream resolver"):
        cluster_dns_manifests("10.96.0.0/12", {"image": IMAGE, "upstream": [upstream]})


def test_hostile_images_are_refused():
    with pytest.raises(AnsibleFilterError, match="InvalidRequest"):
        cluster_dns_manifests("10.96.0.0/12", {"image": "kubenest.local/coredns:1\n  hostNetwork: true"})


def test_the_image_is_required():
    with pytest.raises(AnsibleFilterError, match="settings need an image"):
        cluster_dns_manifests("10.96.0.0/12", {"upstream": []})


def test_unknown_settings_are_named():
    with pytest.raises(AnsibleFilterError, match="unknown settings replica"):
        cluster_dns_manifests("10.96.0.0/12", {"image": IMAGE, "replica": 2})


@pytest.mark.parametrize(("nodes", "replicas"), [(0, 1), (1, 1), (2, 2), (7, 2)])
def test_replicas_follow_the_nodes_so_the_required_anti_affinity_can_be_met(nodes, replicas):
    objects = _by_kind(cluster_dns_manifests("10.96.0.0/12", {"image": IMAGE, "nodes": nodes}))
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == replicas
    terms = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == [{"labelSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                      "topologyKey": "kubernetes.io/hostname"}]
    # a drain is never blocked by the budget, even with one replica
    assert objects["PodDisruptionBudget"]["spec"] == {"maxUnavailable": 1,
                                                      "selector": {"matchLabels": {"k8s-app": "kube-dns"}}}


def test_objects_are_complete_and_the_corefile_is_the_one_mounted():
    objects = cluster_dns_manifests("10.96.0.0/12", {"image": IMAGE, "labels": {"team": "dns"}, "upstream": []})
    assert [o["kind"] for o in objects] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                                            "Deployment", "Service", "PodDisruptionBudget"]
    for obj in objects:
        assert obj["metadata"]["labels"] == {"team": "dns", "k8s-app": "kube-dns"}
        assert obj["metadata"].get("namespace") == (None if obj["kind"].startswith("Cluster") else "kube-system")
    kinds = _by_kind(objects)
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["dnsPolicy"] == "Default" and pod["serviceAccountName"] == "coredns"
    assert container["image"] == IMAGE
    assert container["readinessProbe"]["httpGet"]["port"] == cluster_dns.READY_PORT
    assert container["securityContext"]["capabilities"] == {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}
    assert kinds["ConfigMap"]["data"]["Corefile"] == cluster_dns.corefile("cluster.local", [])
    assert {p["protocol"] for p in kinds["Service"]["spec"]["ports"] if p["port"] == 53} == {"UDP", "TCP"}
