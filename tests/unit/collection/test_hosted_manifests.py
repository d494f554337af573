"""Hosted control-plane manifests are built as data: hostile values are refused or land in one field."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest

VC = {"name": "vc1", "namespace": "tenants", "labels": {"kosmos.io/virtualcluster": "vc1"},
      "selector": {"kosmos.io/virtualcluster": "vc1"},
      "owner_references": [{"apiVersion": "kosmos.io/v1alpha1", "kind": "VirtualCluster", "name": "vc1",
                            "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]}
SETTINGS = {"image": "kubenest.local/etcd:v3.6.16", "advertise_ip": "10.96.0.20",
            "image_repository": "kubenest.local", "version": "v1.36.3", "etcd_endpoint": "https://10.96.0.20:2379",
            "service_cidr": "198.18.128.0/17", "pod_cidr": "198.18.64.0/18", "node_cidr_mask": 24,
            "node_selector": {"node-role.kubernetes.io/control-plane": ""},
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}
COMPONENTS = ["etcd", "apiserver", "controller-manager", "scheduler"]
# What the CRD's old maxLength-only imageRepository let through: a newline adds pod-spec fields when the
# value is pasted into YAML text.
HOSTILE = [
    "kubenest.local\n      hostPID: true\n      hostNetwork: true",
    "kubenest.local/x:1\n          securityContext: {privileged: true}",
    "{{ lookup('pipe', 'id -un') }}",
    "kubenest.local: evil", "kubenest.local\"", "'kubenest.local'", "{kubenest.local}", "&a kubenest.local",
    "*a", "kubenest.local #", "kubenest.local/", "-kubenest.local", "kubenest.local/UPPER", "kubenest.local:99999x",
    "", " kubenest.local", "kubenest.local ",
]


def shape(value, path="$"):
    """Every path of a manifest (list positions included): what a hostile value must not change."""
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in shape(v, f"{path}.{k}")} | {path}
    if isinstance(value, list):
        return {p for i, v in enumerate(value) for p in shape(v, f"{path}[{i}]")} | {path}
    return {path}


@pytest.mark.parametrize("component", COMPONENTS)
def test_manifests_are_complete_and_owned(component):
    manifest = hosted_manifest(component, VC, SETTINGS)
    assert manifest["kind"] == ("StatefulSet" if component == "etcd" else "Deployment")
    assert manifest["metadata"]["name"] == "vc1-" + component
    assert manifest["metadata"]["ownerReferences"] == VC["owner_references"]
    pod = manifest["spec"]["template"]["spec"]
    template_labels = manifest["spec"]["template"]["metadata"]["labels"]
    assert manifest["spec"]["selector"]["matchLabels"].items() <= template_labels.items()
    assert pod["automountServiceAccountToken"] is False
    for forbidden in ("hostPID", "hostNetwork", "hostIPC", "securityContext"):
        assert forbidden not in pod
    assert "initContainers" not in pod  # an etcd restored from a snapshot has one (below)
    assert all("securityContext" not in c for c in pod["containers"] + pod.get("initContainers", []))
    assert all(v.get("secret") or "emptyDir" in v for v in pod["volumes"])
    json.dumps(manifest)


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("component", ["apiserver", "controller-manager", "scheduler"])
def test_a_hostile_image_repository_is_refused(component, value):
    with pytest.raises(AnsibleFilterError, match=r"\[kubenest:permanent:InvalidRequest\].*imageRepository"):
        hosted_manifest(component, VC, dict(SETTINGS, image_repository=value))


@pytest.mark.parametrize("value", [v for v in HOSTILE if v != "kubenest.local:99999x"]
                         + ["kubenest.local/etcd", "kubenest.local/etcd:v3\nhostPID: true"])
def test_a_hostile_etcd_image_is_refused(value):
    with pytest.raises(AnsibleFilterError, match="image must be a reference"):
        hosted_manifest("etcd", VC, dict(SETTINGS, image=value))


@pytest.mark.parametrize("field,value", [
    ("version", "v1.36.3\n    hostPID: true"), ("version", "latest"), ("version", "{{ 1 }}"),
    ("service_cidr", "198.18.128.0/17 --anonymous-auth=true"), ("pod_cidr", "198.18.64.1/18"),
    ("advertise_ip", "10.96.0.20:2379,https://evil"), ("node_cidr_mask", "24 x"),
])
def test_other_hostile_settings_are_refused(field, value):
    component = {"version": "apiserver", "service_cidr": "apiserver", "pod_cidr": "controller-manager",
                 "advertise_ip": "etcd", "node_cidr_mask": "controller-manager"}[field]
    with pytest.raises(AnsibleFilterError, match=r"\[kubenest:permanent:InvalidRequest\]"):
        hosted_manifest(component, VC, dict(SETTINGS, **{field: value}))


@pytest.mark.parametrize("name", ["1vc", "vc_1", "Vc", "vc-", "a" * 64, "vc\nx", "{{ x }}"])
def test_names_that_cannot_become_service_names_are_refused(name):
    with pytest.raises(AnsibleFilterError, match="starting with a letter"):
        hosted_manifest("apiserver", dict(VC, name=name), SETTINGS)


@pytest.mark.parametrize("value", ["a: b\nhostPID: true", "{{ lookup('pipe', 'id') }}", "&x *x", "\"'{"])
def test_label_and_owner_values_stay_in_their_field(value):
    """Values that are not checked (labels, owner uid) cannot change the manifest's structure either."""
    benign = dict(VC, labels=dict(VC["labels"], note="x"))
    vc = dict(VC, labels=dict(VC["labels"], note=value), owner_references=[dict(VC["owner_references"][0], uid=value)])
    for component in COMPONENTS:
        plain, hostile = hosted_manifest(component, benign, SETTINGS), hosted_manifest(component, vc, SETTINGS)
        assert shape(hostile) == shape(plain)
        assert hostile["metadata"]["labels"]["note"] == value
        assert hostile["metadata"]["ownerReferences"][0]["uid"] == value


def test_every_container_has_its_requests_and_limits_and_etcd_a_quota():
    settings = dict(SETTINGS, resources={"limits": {"memory": "1Gi"}, "requests": {"cpu": "100m"}},
                    quota_backend_bytes=1024 ** 3, ephemeral=True)
    etcd = hosted_manifest("etcd", VC, settings)
    (container,) = etcd["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {"limits": {"memory": "1Gi"}, "requests": {"cpu": "100m"}}
    assert "--quota-backend-bytes=1073741824" in container["command"]
    data = next(v for v in etcd["spec"]["template"]["spec"]["volumes"] if v["name"] == "data")
    assert data["emptyDir"] == {"sizeLimit": "2048Mi"}
    by_component = {"apiserver": {"limits": {"memory": "2Gi"}}, "scheduler": {"requests": {"cpu": 0.05}}}
    for component in ("apiserver", "scheduler"):
        manifest = hosted_manifest(component, VC, dict(SETTINGS, resources=by_component))
        (container,) = manifest["spec"]["template"]["spec"]["containers"]
        assert container["resources"] == {k: {r: str(q) for r, q in v.items()}
                                          for k, v in by_component[component].items()}
    with pytest.raises(AnsibleFilterError, match="requests and limits"):
        hosted_manifest("etcd", VC, dict(SETTINGS, resources={"limit": {}}))


def test_etcd_data_is_on_a_claim_of_the_default_class_unless_told_otherwise():
    manifest = hosted_manifest("etcd", VC, SETTINGS)
    (claim,) = manifest["spec"]["volumeClaimTemplates"]
    assert "storageClassName" not in claim["spec"]
    assert claim["metadata"]["labels"]["app.kubernetes.io/component"] == "etcd"
    assert claim["metadata"]["labels"].items() >= VC["labels"].items()
    assert manifest["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    assert all(v["name"] != "data" for v in manifest["spec"]["template"]["spec"]["volumes"])

    manifest = hosted_manifest("etcd", VC, dict(SETTINGS, storage_class="fast", storage_size="5Gi"))
    (claim,) = manifest["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "fast"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"

    ephemeral = hosted_manifest("etcd", VC, dict(SETTINGS, ephemeral=True, storage_class="fast"))
    assert "volumeClaimTemplates" not in ephemeral["spec"]
    assert any("emptyDir" in v for v in ephemeral["spec"]["template"]["spec"]["volumes"])


@pytest.mark.parametrize("value", ["Fast", "fast class", "a" * 254, "fast\nx: y"])
def test_a_bad_storage_class_is_refused(value):
    with pytest.raises(AnsibleFilterError, match="storage class"):
        hosted_manifest("etcd", VC, dict(SETTINGS, storage_class=value))


def test_an_unknown_component_is_refused():
    with pytest.raises(AnsibleFilterError, match="unknown component"):
        hosted_manifest("kube-proxy", VC, SETTINGS)


@pytest.mark.parametrize("component", ["apiserver", "controller-manager", "scheduler"])
def test_the_certificate_revision_is_on_the_pod_template(component):
    revision = "0123456789abcdef" * 4
    manifest = hosted_manifest(component, VC, dict(SETTINGS, pki_revision=revision))
    assert manifest["spec"]["template"]["metadata"]["annotations"] == {"kubenest.kosmos.io/pki-revision": revision}
    assert "annotations" not in hosted_manifest(component, VC, SETTINGS)["spec"]["template"]["metadata"]


@pytest.mark.parametrize("value", ["x", "ABCDEF", "0" * 65, "ab\ncd", "{{ 1 }}"])
def test_a_revision_that_is_not_a_digest_is_refused(value):
    with pytest.raises(AnsibleFilterError, match="pki_revision must be a hexadecimal digest"):
        hosted_manifest("apiserver", VC, dict(SETTINGS, pki_revision=value))


def test_three_etcd_members_find_each_other_under_the_peer_service():
    manifest = hosted_manifest("etcd", VC, dict(SETTINGS, members="3"))
    spec = manifest["spec"]
    assert spec["replicas"] == 3 and spec["serviceName"] == "vc1-etcd-peer"
    assert spec["podManagementPolicy"] == "Parallel"
    (container,) = spec["template"]["spec"]["containers"]
    command = dict(flag.split("=", 1) for flag in container["command"][1:])
    assert command["--name"] == "$(POD_NAME)"
    assert command["--initial-cluster"] == ",".join(
        f"vc1-etcd-{i}=https://vc1-etcd-{i}.vc1-etcd-peer.tenants.svc:2380" for i in range(3))
    assert command["--initial-advertise-peer-urls"] == "https://$(POD_NAME).vc1-etcd-peer.tenants.svc:2380"
    assert command["--listen-peer-urls"] == "https://0.0.0.0:2380"
    # Members dial from pod IPs that no certificate names: their CA vouches for them, not the address.
    assert command["--peer-skip-client-san-verification"] == "true"
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert {"name": "peer", "containerPort": 2380} in container["ports"]
    one = hosted_manifest("etcd", VC, SETTINGS)
    assert one["spec"]["replicas"] == 1 and "podManagementPolicy" not in one["spec"]
    assert "--listen-peer-urls=https://127.0.0.1:2380" in one["spec"]["template"]["spec"]["containers"][0]["command"]
    assert not any("skip-client-san" in f for f in one["spec"]["template"]["spec"]["containers"][0]["command"])
    # A lone member elects itself sooner; members with peers keep etcd's timing, which their elections need.
    assert {"--heartbeat-interval=50", "--election-timeout=250"} <= set(
        one["spec"]["template"]["spec"]["containers"][0]["command"])
    assert not any(f.startswith(("--heartbeat-interval", "--election-timeout")) for f in container["command"])


def test_a_deleted_member_of_several_serves_until_the_service_has_left_it_and_stops_within_its_grace():
    pod = hosted_manifest("etcd", VC, dict(SETTINGS, members=3))["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    # etcd's own stop takes up to its request timeout (7 s with the default election timeout) after the delay
    assert pod.get("terminationGracePeriodSeconds", 30) >= 5 + 7 + 5
    # a lone member has no other to send its clients to: its template stays as it was
    one = hosted_manifest("etcd", VC, SETTINGS)["spec"]["template"]["spec"]
    assert "lifecycle" not in one["containers"][0]


@pytest.mark.parametrize("members", [0, 2, 5, True, "two"])
def test_other_etcd_member_counts_are_refused(members):
    with pytest.raises(AnsibleFilterError, match="etcd members must be one of 1, 3"):
        hosted_manifest("etcd", VC, dict(SETTINGS, members=members))


DIGEST = "ab" * 32


@pytest.mark.parametrize("members", [1, 3])
def test_a_restored_etcd_starts_each_member_from_the_snapshot_chunks(members):
    manifest = hosted_manifest("etcd", VC, dict(SETTINGS, members=members, restore={"sha256": DIGEST, "chunks": "3"}))
    pod = manifest["spec"]["template"]["spec"]
    (etcd,) = pod["containers"]
    (restore,) = pod["initContainers"]
    assert restore["image"] == etcd["image"] and restore["command"][:2] == ["/usr/local/bin/etcd-snapshot", "restore"]
    flags = dict(flag.split("=", 1) for flag in restore["command"][2:])
    etcd_flags = dict(flag.split("=", 1) for flag in etcd["command"][1:])
    # The restored member is the member etcd then runs as.
    for key in ("--data-dir", "--name", "--initial-cluster", "--initial-advertise-peer-urls"):
        assert flags[key] == etcd_flags[key]
    assert flags.get("--initial-cluster-token") == etcd_flags.get("--initial-cluster-token")
    assert flags["--sha256"] == DIGEST and flags["--chunks"] == "/var/run/kubenest/restore"
    assert restore.get("env") == etcd.get("env")
    (volume,) = [v for v in pod["volumes"] if v["name"] == "restore"]
    sources = volume["projected"]["sources"]
    names = ["vc1-etcd-restore-000", "vc1-etcd-restore-001", "vc1-etcd-restore-002"]
    assert [s["secret"]["name"] for s in sources] == names
    assert all(s["secret"]["optional"] for s in sources)
    assert [s["secret"]["items"][0]["path"] for s in sources] == ["chunk-000", "chunk-001", "chunk-002"]


def test_an_etcd_without_a_restore_has_no_init_container():
    for restore in (None, {}, ""):
        pod = hosted_manifest("etcd", VC, dict(SETTINGS, restore=restore))["spec"]["template"]["spec"]
        assert "initContainers" not in pod and [v["name"] for v in pod["volumes"]] == ["pki"]


@pytest.mark.parametrize("restore", [
    {"sha256": DIGEST}, {"sha256": DIGEST, "chunks": 0}, {"sha256": DIGEST, "chunks": 257},
    {"sha256": DIGEST, "chunks": True}, {"sha256": "AB" * 32, "chunks": 1}, {"sha256": DIGEST[:-1], "chunks": 1},
    {"sha256": DIGEST, "chunks": 1, "image": "x"}, {"sha256": DIGEST[:-2] + "\n-", "chunks": 1}, "restore",
])
def test_a_bad_restore_is_refused(restore):
    with pytest.raises(AnsibleFilterError, match="restore"):
        hosted_manifest("etcd", VC, dict(SETTINGS, restore=restore))


def test_a_restore_into_an_emptydir_is_refused():
    with pytest.raises(AnsibleFilterError, match="volume claim"):
        hosted_manifest("etcd", VC, dict(SETTINGS, ephemeral=True, restore={"sha256": DIGEST, "chunks": 1}))


@pytest.mark.parametrize(("component", "conf", "port"), [("controller-manager", "controller-manager.conf", 10257),
                                                         ("scheduler", "scheduler.conf", 10259)])
def test_the_controllers_wait_for_their_api_server_with_their_kubeconfig_only(component, conf, port):
    (container,) = hosted_manifest(component, VC, SETTINGS)["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    # await-ready (in the component's image) waits, then becomes the component: same container, same process
    assert command[:4] == ["/usr/local/bin/await-ready", f"--kubeconfig=/etc/kubernetes/conf/{conf}",
                           "--timeout=86400s", "--"]
    assert command[4] == f"/usr/local/bin/kube-{component}"
    assert f"--kubeconfig=/etc/kubernetes/conf/{conf}" in command[5:]
    # the liveness probe waits until the component is healthy, however long the wait is
    assert container["startupProbe"] == {
        "exec": {"command": ["/usr/local/bin/await-ready", f"--local=https://127.0.0.1:{port}/healthz",
                             "--timeout=9s"]},
        "periodSeconds": 1, "timeoutSeconds": 10, "failureThreshold": 8640}
    assert container["livenessProbe"]["httpGet"]["port"] == port


def test_the_api_server_waits_for_a_leader_of_its_etcd_with_its_own_etcd_client_certificate():
    pod = hosted_manifest("apiserver", VC, SETTINGS)["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "kube-apiserver")
    assert container["command"][:7] == [
        "/usr/local/bin/await-ready", "--url=https://10.96.0.20:2379/health", "--cacert=/etc/kubernetes/etcd/ca.crt",
        "--cert=/etc/kubernetes/etcd/apiserver-etcd-client.crt",
        "--key=/etc/kubernetes/etcd/apiserver-etcd-client.key", "--timeout=86400s", "--"]
    assert container["command"][7] == "/usr/local/bin/kube-apiserver"
    assert "--etcd-servers=https://10.96.0.20:2379" in container["command"]
    assert {"name": "etcd", "mountPath": "/etc/kubernetes/etcd", "readOnly": True} in container["volumeMounts"]
    assert container["startupProbe"]["exec"]["command"][1] == "--local=https://127.0.0.1:6443/readyz"
    assert container["readinessProbe"]["periodSeconds"] == 1


def test_a_stopping_api_server_serves_until_its_endpoint_has_left_the_nodes_rules():
    pod = hosted_manifest("apiserver", VC, SETTINGS)["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "kube-apiserver")
    assert "--shutdown-delay-duration=3s" in container["command"]
    # the delay must fit in the grace period, or the kubelet kills the server while it still serves
    assert pod.get("terminationGracePeriodSeconds", 30) > 3


@pytest.mark.parametrize("component", ["apiserver", "controller-manager", "scheduler"])
def test_without_await_apiserver_the_components_start_plainly(component):
    pod = hosted_manifest(component, VC, dict(SETTINGS, await_apiserver=False))["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] != "konnectivity-server"]
    assert container["command"][0] == f"/usr/local/bin/kube-{component}"
    assert "startupProbe" not in container and "initContainers" not in pod
    with pytest.raises(AnsibleFilterError, match="await_apiserver must be true or false"):
        hosted_manifest(component, VC, dict(SETTINGS, await_apiserver="yes"))


def test_gogc_is_set_by_component_and_checked():
    settings = dict(SETTINGS, gogc={"apiserver": 25, "scheduler": 0})
    api = hosted_manifest("apiserver", VC, settings)["spec"]["template"]["spec"]["containers"][0]
    assert api["env"] == [{"name": "GOGC", "value": "25"}]
    for component in ("scheduler", "controller-manager"):  # 0 and absent: Go's default
        assert "env" not in hosted_manifest(component, VC, settings)["spec"]["template"]["spec"]["containers"][0]
    for bad, says in (({"etcd": 25}, "by component"), ({"apiserver": "25; rm"}, "percentage"),
                      ({"apiserver": -1}, "percentage"), ({"apiserver": True}, "percentage")):
        with pytest.raises(AnsibleFilterError, match=says):
            hosted_manifest("apiserver", VC, dict(SETTINGS, gogc=bad))


def test_the_proxy_server_runs_beside_the_api_server_on_a_shared_socket():
    plain = hosted_manifest("apiserver", VC, SETTINGS)
    assert [c["name"] for c in plain["spec"]["template"]["spec"]["containers"]] == ["kube-apiserver"]
    proxy_image = "kubenest.local/konnectivity-server:v1"
    manifest = hosted_manifest("apiserver", VC, dict(SETTINGS, konnectivity_image=proxy_image))
    pod = manifest["spec"]["template"]["spec"]
    apiserver, proxy = pod["containers"]
    assert proxy["name"] == "konnectivity-server" and proxy["image"] == "kubenest.local/konnectivity-server:v1"
    assert "--egress-selector-config-file=/etc/kubernetes/konnectivity/egress-selector.json" in apiserver["command"]
    assert "--enable-aggregator-routing=true" in apiserver["command"]
    assert "--enable-aggregator-routing=true" not in plain["spec"]["template"]["spec"]["containers"][0]["command"]
    shared = {m["mountPath"] for m in apiserver["volumeMounts"]} & {m["mountPath"] for m in proxy["volumeMounts"]}
    assert "/run/konnectivity" in shared
    flags = dict(arg[2:].split("=", 1) for arg in proxy["command"][1:])
    assert flags["uds-name"] == "/run/konnectivity/konnectivity-server.socket"
    assert (flags["cluster-cert"], flags["kubeconfig"]) == ("/etc/kubernetes/pki/apiserver.crt",
                                                            "/etc/kubernetes/conf/konnectivity-server.conf")
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["konnectivity-egress"]["secret"]["secretName"] == "vc1-konnectivity"
    assert volumes["conf"]["secret"]["items"] == [{"key": "konnectivity-server.conf",
                                                   "path": "konnectivity-server.conf"}]
    assert not any(c.get("securityContext", {}).get("privileged") for c in pod["containers"])


@pytest.mark.parametrize("value", HOSTILE[:4])
def test_a_hostile_proxy_image_is_refused(value):
    with pytest.raises(AnsibleFilterError, match="InvalidRequest"):
        hosted_manifest("apiserver", VC, dict(SETTINGS, konnectivity_image=value))
