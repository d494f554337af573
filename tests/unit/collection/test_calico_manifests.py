"""Calico's objects as data: settings land in fields of their own, the CNI configuration the installer gets is
valid once filled in, and nothing a setting holds can add a field."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.calico_manifests import calico_manifests
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.calico import CALICO_KINDS

BASE = {"node_image": "quay.io/calico/node:v9.9.9", "cni_image": "quay.io/calico/cni:v9.9.9",
        "controllers_image": "quay.io/calico/kube-controllers:v9.9.9", "api_host": "198.18.0.11",
        "api_port": 31443, "pod_cidr": "198.18.64.0/18"}


def _objects(**settings):
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in calico_manifests(dict(BASE, **settings))}


def _node_pod(**settings):
    return _objects(**settings)[("DaemonSet", "calico-node")]["spec"]["template"]["spec"]


def _env(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_every_calico_kind_is_declared_before_anything_uses_it():
    objects = calico_manifests(dict(BASE))
    kinds = [o["kind"] for o in objects]
    crds = {o["spec"]["names"]["kind"]: o for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert set(crds) == {kind[0] for kind in CALICO_KINDS} | {"ClusterNetworkPolicy"}
    assert kinds.index("DaemonSet") > max(i for i, k in enumerate(kinds) if k == "CustomResourceDefinition")
    assert crds["NetworkPolicy"]["spec"]["scope"] == "Namespaced" and crds["IPPool"]["spec"]["scope"] == "Cluster"
    assert crds["IPPool"]["metadata"]["name"] == "ippools.crd.projectcalico.org"
    # a CRD in a *.k8s.io group is refused without the approval annotation
    assert "api-approved.kubernetes.io" in crds["ClusterNetworkPolicy"]["metadata"]["annotations"]


def test_calico_node_reaches_the_api_server_the_kubelets_use_and_runs_vxlan_without_bgp():
    pod = _node_pod(vxlan_port=4790, mtu=1400)
    node = _env(pod["containers"][0])
    assert (node["KUBERNETES_SERVICE_HOST"], node["KUBERNETES_SERVICE_PORT"]) == ("198.18.0.11", "31443")
    assert node["CALICO_IPV4POOL_CIDR"] == "198.18.64.0/18"
    assert (node["CALICO_IPV4POOL_VXLAN"], node["CALICO_IPV4POOL_IPIP"]) == ("Always", "Never")
    assert node["FELIX_VXLANPORT"] == "4790"
    assert node["CLUSTER_TYPE"] == "k8s"
    config = _objects(mtu=1400)[("ConfigMap", "calico-config")]["data"]
    assert config["calico_backend"] == "vxlan" and config["veth_mtu"] == "1400"
    for init in pod["initContainers"][:2]:
        assert _env(init)["KUBERNETES_SERVICE_HOST"] == "198.18.0.11", init["name"]
    probes = pod["containers"][0]["livenessProbe"]["exec"]["command"] + \
        pod["containers"][0]["readinessProbe"]["exec"]["command"]
    assert not any("bird" in arg for arg in probes)


def test_the_cni_configuration_is_valid_json_once_the_installer_fills_it_in():
    text = _objects()[("ConfigMap", "calico-config")]["data"]["cni_network_config"]
    filled = (text.replace("__CNI_MTU__", "1450").replace("__KUBERNETES_NODE_NAME__", "kn-w1")
              .replace("__KUBECONFIG_FILEPATH__", "/etc/cni/net.d/calico-kubeconfig"))
    conf = json.loads(filled)
    calico = conf["plugins"][0]
    assert (calico["type"], calico["mtu"], calico["ipam"]["type"]) == ("calico", 1450, "calico-ipam")
    assert calico["datastore_type"] == "kubernetes" and calico["policy"] == {"type": "k8s"}


def test_images_paths_and_labels_land_where_they_belong():
    pod = _node_pod(cni_bin_dir="/opt/cni/bin")
    assert pod["containers"][0]["image"] == BASE["node_image"]
    assert [c["image"] for c in pod["initContainers"]] == [BASE["cni_image"], BASE["cni_image"],
                                                           BASE["node_image"]]
    volumes = {v["name"]: v["hostPath"] for v in pod["volumes"]}
    assert volumes["cni-bin-dir"]["path"] == "/opt/cni/bin"
    objects = _objects(labels={"app.kubernetes.io/managed-by": "kosmos.kubenest"})
    controllers = objects[("Deployment", "calico-kube-controllers")]
    assert controllers["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kosmos.kubenest"
    # selectors and pod templates keep their own labels: an extra label must not change what they select
    assert controllers["spec"]["selector"]["matchLabels"] == {"k8s-app": "calico-kube-controllers"}
    assert controllers["spec"]["template"]["spec"]["containers"][0]["image"] == BASE["controllers_image"]
    assert controllers["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] is True


def test_only_the_cni_plugin_token_may_be_minted_by_calico_node():
    rules = _objects()[("ClusterRole", "calico-node")]["rules"]
    token = [r for r in rules if "serviceaccounts/token" in r["resources"]]
    assert token == [{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                      "resourceNames": ["calico-cni-plugin"], "verbs": ["create"]}]
    assert not any("*" in r["verbs"] or "*" in r["resources"] for o in _objects().values()
                   if o["kind"] == "ClusterRole" for r in o["rules"])


def test_resources_have_defaults_and_can_be_given():
    assert _node_pod()["containers"][0]["resources"]["limits"]["memory"] == "1Gi"
    pod = _node_pod(node_resources={"requests": {"cpu": "250m"}})
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "250m"}}


@pytest.mark.parametrize("setting,value,message", [
    ("node_image", "quay.io/calico/node:v1\nhostPID: true", "image"),
    ("cni_image", "{{ lookup('pipe', 'id') }}", "image"),
    ("api_host", "198.18.0.11\n  privileged: true", "neither an IP address nor a DNS name"),
    ("api_port", "31443: x", "not a port number"),
    ("pod_cidr", "198.18.64.1/18", "not a network address"),
    ("pod_cidr", "198.18.64.0/28", "at least a /26"),
    ("pod_cidr", "fd00::/64", "IPv4"),
    ("vxlan_mode", "Never", "VXLAN mode"),
    ("vxlan_port", 0, "not a port number"),
    ("mtu", 100, "MTU"),
    ("cni_bin_dir", "usr/lib/cni", "absolute path"),
    ("node_resources", {"requests": {}, "hostPID": True}, "requests and limits"),
    ("typha", "on", "unknown settings typha"),
])
def test_bad_settings_are_refused_naming_the_setting(setting, value, message):
    with pytest.raises(AnsibleFilterError, match=r"\[kubenest:permanent:InvalidRequest\] pod network \(calico\)") \
            as err:
        calico_manifests(dict(BASE, **{setting: value}))
    assert message in str(err.value)
