"""The pod network's objects: settings land in fields of their own, kernel-wide settings stay out of reach."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.cilium_manifests import cilium_manifests
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import cilium

BASE = {"agent_image": "kubenest.local/cilium:v1.20.2", "operator_image": "kubenest.local/cilium-operator:v1.20.2",
        "api_host": "198.18.0.11", "api_port": 31443}


def _objects(**settings):
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in cilium_manifests(dict(BASE, **settings))}


def _env(container):
    return {e["name"]: e.get("value") for e in container["env"]}


def test_agents_and_operator_reach_the_api_server_the_kubelets_use():
    objects = _objects()
    agent = objects[("DaemonSet", "cilium")]["spec"]["template"]["spec"]["containers"][0]
    operator = objects[("Deployment", "cilium-operator")]["spec"]["template"]["spec"]["containers"][0]
    for container in (agent, operator):
        env = _env(container)
        assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == ("198.18.0.11", "31443")


def test_the_agent_sees_kernel_settings_read_only():
    pod = _objects()[("DaemonSet", "cilium")]["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/host/proc/sys/kernel"]["readOnly"] is True
    config = _objects()[("ConfigMap", "cilium-config")]["data"]
    assert config["procfs"] == "/host/proc"


def test_one_init_container_mounts_the_bpf_filesystem_and_installs_the_cni_plugin():
    pod = _objects()[("DaemonSet", "cilium")]["spec"]["template"]["spec"]
    [init] = pod["initContainers"]
    assert {m["mountPath"] for m in init["volumeMounts"]} == {"/sys/fs/bpf", "/host/opt/cni/bin"}
    assert init["command"][:3] == ["/bin/busybox", "sh", "-ec"]  # a failed step fails the container
    script = init["command"][3].splitlines()
    assert script[0].endswith("mount -t bpf bpf /sys/fs/bpf")
    assert script[2] == "mv /host/opt/cni/bin/.cilium-cni.new /host/opt/cni/bin/cilium-cni"
    assert script[-1].endswith("/usr/sbin/ip link add cilium_vxlan type vxlan external dstport 8472")


def test_the_init_container_makes_the_tunnel_device_on_the_configured_port():
    pod = _objects(tunnel_port=8473)[("DaemonSet", "cilium")]["spec"]["template"]["spec"]
    [init] = pod["initContainers"]
    assert init["command"][3].splitlines()[-1].endswith("type vxlan external dstport 8473")


def test_a_tunnel_port_out_of_range_is_refused():
    with pytest.raises(ValueError, match="tunnel port 70000 is not a port number"):
        cilium.agent_daemonset("kubenest.local/cilium:v1.20.2", "198.18.0.11", 6443, tunnel_port=70000)


def test_config_is_a_tunnel_with_network_policy_and_the_nodes_pod_cidrs():
    config = _objects(tunnel_port=8473, mtu=1400)[("ConfigMap", "cilium-config")]["data"]
    assert config["routing-mode"] == "tunnel" and config["tunnel-protocol"] == "vxlan"
    assert config["tunnel-port"] == "8473" and config["mtu"] == "1400"
    assert config["ipam"] == "kubernetes" and config["enable-k8s-networkpolicy"] == "true"
    assert all(isinstance(v, str) for v in config.values())


def test_labels_reach_every_object():
    for obj in cilium_manifests(dict(BASE, labels={"app.kubernetes.io/managed-by": "kosmos.kubenest"})):
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kosmos.kubenest"


@pytest.mark.parametrize(("setting", "value"), [
    ("agent_image", "kubenest.local/cilium:v1\n  hostPID: true"),
    ("operator_image", "kubenest.local/cilium operator:1"),
    ("api_host", "198.18.0.11; curl x"),
    ("api_host", ""),
    ("api_port", 0),
    ("api_port", "6443\n"),
    ("api_port", True),
    ("tunnel_port", 70000),
    ("mtu", 100),
    ("mtu", "1500x"),
    ("surprise", 1),
])
def test_bad_settings_are_refused_with_the_setting_named(setting, value):
    with pytest.raises(AnsibleFilterError, match="InvalidRequest"):
        cilium_manifests(dict(BASE, **{setting: value}))


def test_settings_must_be_a_dictionary():
    with pytest.raises(AnsibleFilterError, match="InvalidRequest"):
        cilium_manifests(["agent_image"])


def _crd(plural, group="cilium.io"):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}", "annotations": {"controller-gen.kubebuilder.io/version": "x"}},
            "spec": {"group": group, "names": {"plural": plural, "kind": plural.title()}, "scope": "Cluster",
                     "versions": [{"name": "v2", "served": True, "storage": True}]}}


def test_crds_are_registered_as_cilium_s_operator_does():
    from ansible_collections.kosmos.kubenest.plugins.plugin_utils import cilium

    crds = cilium.crd_definitions([("b", _crd("ciliumnodes")), ("a", _crd("ciliumendpoints"))], "1.33.12")
    assert [c["metadata"] for c in crds] == [
        {"name": "ciliumendpoints.cilium.io", "labels": {cilium.CRD_SCHEMA_LABEL: "1.33.12"}},
        {"name": "ciliumnodes.cilium.io", "labels": {cilium.CRD_SCHEMA_LABEL: "1.33.12"}}]
    assert set(crds[0]["spec"]) == {"group", "names", "scope", "versions"}
    todo = cilium.crds_to_register(crds, {"ciliumendpoints.cilium.io": "1.33.12", "ciliumnodes.cilium.io": "1.30.0"})
    assert [c["metadata"]["name"] for c in todo] == ["ciliumnodes.cilium.io"]
    assert cilium.crds_to_register(crds, {}) == crds


@pytest.mark.parametrize(("doc", "message"), [
    (_crd("widgets", group="example.com"), "is not in group cilium.io"),
    (dict(_crd("ciliumnodes"), metadata={"name": "other.cilium.io"}), "is not named <plural>.cilium.io"),
    (dict(_crd("ciliumnodes"), apiVersion="apiextensions.k8s.io/v1beta1"), "is not an apiextensions.k8s.io/v1"),
])
def test_a_definition_that_is_not_one_of_cilium_s_crds_is_refused(doc, message):
    from ansible_collections.kosmos.kubenest.plugins.plugin_utils import cilium

    with pytest.raises(ValueError, match=message):
        cilium.crd_definitions([("file.yaml", doc)], "1.33.12")


def test_the_agent_reads_configmaps_of_its_own_namespace_only():
    objects = _objects()
    role, binding = objects[("Role", "cilium")], objects[("RoleBinding", "cilium")]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "kube-system"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cilium"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "cilium", "namespace": "kube-system"}]
    cluster_wide = objects[("ClusterRole", "cilium")]["rules"]
    assert not [r for r in cluster_wide if "configmaps" in r["resources"]]
