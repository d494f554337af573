"""The kosmos.io CRDs on a real API server: the seed and proposal forms pass, bad specs are refused at admission."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException

from tests.support import k8sbin

CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"
GROUP, VERSION = "kosmos.io", "v1alpha1"

SEED = """
apiVersion: kosmos.io/v1alpha1
kind: VirtualCluster
metadata: {namespace: test-521-8, name: test-521-8}
spec:
  externalIP: "192.168.0.1"
  promotePolicies:
    - labelSelector: {matchLabels: {kubernetes.io/hostname: kc-aaaaa-s-x6fn2}}
      nodeCount: 1
"""


@pytest.fixture(scope="module")
def kosmos(api_client, apiserver):
    playbook = CRDS.parents[1] / "playbooks" / "install_crds.yml"
    for _attempt in ("install", "converge"):
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(playbook),
                               "-e", f"kubenest_admin_kubeconfig={apiserver.kubeconfig}"],
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "changed=0" in proc.stdout  # the second run finds everything in place
    core = kubernetes.client.CoreV1Api(api_client)
    for ns in ("test-521-8", "vc-tests"):
        try:
            core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=ns)))
        except ApiException as exc:
            if exc.status != 409:
                raise
    return kubernetes.client.CustomObjectsApi(api_client)


def _create(api, body, strict=True):
    ns = body["metadata"]["namespace"]
    return api.create_namespaced_custom_object(GROUP, VERSION, ns, "virtualclusters", body,
                                               field_validation="Strict" if strict else None)


def _vc(name, spec):
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "VirtualCluster",
            "metadata": {"namespace": "vc-tests", "name": name}, "spec": spec}


def test_seed_example_is_accepted_verbatim_and_defaulted(kosmos):
    created = _create(kosmos, yaml.safe_load(SEED))
    assert created["spec"]["externalIP"] == "192.168.0.1"
    # no default in the schema: the version comes from versions.env through the playbook, once, then sticks
    assert "kubernetesVersion" not in created["spec"]
    assert created["spec"]["imageRepository"] == "kubenest.local"
    assert created["spec"]["etcdMembers"] == 1
    assert created["spec"]["apiServerServiceType"] == "NodePort"


def test_the_api_server_service_type_is_fixed_once_set(kosmos):
    created = _create(kosmos, _vc("balanced", {"apiServerServiceType": "LoadBalancer"}))
    created["spec"]["apiServerServiceType"] = "NodePort"
    with pytest.raises(ApiException) as refused:
        kosmos.replace_namespaced_custom_object(GROUP, VERSION, "vc-tests", "virtualclusters", "balanced", created)
    assert "apiServerServiceType cannot change once set" in refused.value.body


def test_proposal_form_with_node_names_is_accepted(kosmos):
    created = _create(kosmos, _vc("by-name", {"promoteResources": {"nodes": ["node1", "node2"]}}))
    assert created["spec"]["promoteResources"]["nodes"] == ["node1", "node2"]


def test_proposal_form_with_resources_is_accepted_verbatim(kosmos):
    spec = {"promoteResources": {"nodes": ["node1", "node2"], "resources": {"cpu": 10, "memory": "100Gi"}}}
    created = _create(kosmos, _vc("with-resources", spec))
    assert created["spec"]["promoteResources"] == spec["promoteResources"]


@pytest.mark.parametrize(("name", "spec", "field"), [
    ("neg-count", {"promotePolicies": [{"labelSelector": {}, "nodeCount": -1}]}, "spec.promotePolicies[0].nodeCount"),
    ("zero-count", {"promotePolicies": [{"labelSelector": {}, "nodeCount": 0}]}, "spec.promotePolicies[0].nodeCount"),
    ("bad-ip", {"externalIP": "300.1.1.1"}, "spec.externalIP"),
    ("loopback-ip", {"externalIP": "127.0.0.1"}, "spec.externalIP"),
    ("unspecified-ip", {"externalIP": "0.0.0.0"}, "spec.externalIP"),
    ("link-local-ip", {"externalIP": "169.254.10.1"}, "spec.externalIP"),
    ("bad-label-key", {"promotePolicies": [{"labelSelector": {"matchLabels": {"bad key!": "x"}}, "nodeCount": 1}]},
     "spec.promotePolicies[0].labelSelector.matchLabels"),
    ("bad-operator", {"promotePolicies": [{"labelSelector": {"matchExpressions": [
        {"key": "a", "operator": "Near"}]}, "nodeCount": 1}]},
     "spec.promotePolicies[0].labelSelector.matchExpressions[0].operator"),
    ("in-without-values", {"promotePolicies": [{"labelSelector": {"matchExpressions": [
        {"key": "a", "operator": "In"}]}, "nodeCount": 1}]},
     "spec.promotePolicies[0].labelSelector.matchExpressions[0]"),
    ("bad-node-name", {"promoteResources": {"nodes": ["Not_A_Node"]}}, "spec.promoteResources.nodes[0]"),
    ("both-forms", {"promotePolicies": [{"labelSelector": {}, "nodeCount": 1}],
                    "promoteResources": {"nodes": ["n1"]}}, "spec"),
    ("bad-version", {"kubernetesVersion": "latest"}, "spec.kubernetesVersion"),
    ("two-members", {"etcdMembers": 2}, "spec.etcdMembers"),
    ("cluster-ip", {"apiServerServiceType": "ClusterIP"}, "spec.apiServerServiceType"),
    ("unknown-field", {"nodeCont": 3}, "spec.nodeCont"),
])
def test_bad_specs_are_refused_naming_the_field(kosmos, name, spec, field):
    with pytest.raises(ApiException) as refused:
        _create(kosmos, _vc(name, spec))
    assert refused.value.status in (400, 422)
    assert field in refused.value.body, refused.value.body


def test_control_plane_extra_args_are_admitted_and_refused_naming_the_kind_of_flag(kosmos):
    spec = {"controlPlane": {"apiServer": {"extraArgs": {"default-not-ready-toleration-seconds": "120",
                                                         "enable-admission-plugins": "AlwaysPullImages"}},
                             "scheduler": {"extraArgs": {"v": "2"}}}}
    assert _create(kosmos, _vc("extra-args", spec))["spec"]["controlPlane"] == spec["controlPlane"]
    refusals = [
        ("apiServer", {"etcd-servers": "https://other:2379"}, "may not hold a flag the collection sets"),
        ("apiServer", {"authorization-mode": "AlwaysAllow"}, "may not hold a flag the collection sets"),
        ("controllerManager", {"cloud-config": "x"}, "takes a file, a directory or a config file"),
        ("controllerManager", {"log-file": "x"}, "takes a file, a directory or a config file"),
        ("scheduler", {"tls-min-version": "VersionTLS13"}, "flags of the etcd-, tls-, service-account-"),
        ("apiServer", {"master": "https://host:6443"}, "the host's addresses, ports or cloud"),
        ("apiServer", {"oidc-issuer-url": "/etc/passwd"}, "values may not be paths"),
        ("scheduler", {"--v": "2"}, "flag names without the leading"),
    ]
    for component, args, message in refusals:
        with pytest.raises(ApiException) as refused:
            _create(kosmos, _vc("refused-args", {"controlPlane": {component: {"extraArgs": args}}}))
        assert refused.value.status == 422, refused.value.body
        assert f"spec.controlPlane.{component}.extraArgs" in refused.value.body, refused.value.body
        assert message in refused.value.body, (args, refused.value.body)


def test_authentication_and_audit_are_admitted_and_bad_ones_refused_naming_the_field(kosmos):
    ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    jwt = {"issuer": {"url": "https://issuer.example", "audiences": ["tenant"], "certificateAuthority": ca},
           "claimMappings": {"username": {"claim": "sub", "prefix": "oidc:"}}}
    api_server = {"authentication": {"jwt": [jwt]}, "audit": {
        "policy": {"rules": [{"level": "Metadata", "resources": [{"group": "", "resources": ["secrets"]}]}]},
        "log": {"maxSizeMB": 20, "maxBackups": 1}}}
    created = _create(kosmos, _vc("authn-audit", {"controlPlane": {"apiServer": api_server}}))
    assert created["spec"]["controlPlane"]["apiServer"] == api_server
    issuer = jwt["issuer"]
    refusals = [
        ({"authentication": {"jwt": [jwt]}, "extraArgs": {"oidc-client-id": "x"}}, "spec.controlPlane.apiServer",
         "authentication replaces the oidc- flags"),
        ({"authentication": {"jwt": [dict(jwt, issuer=dict(issuer, url="http://issuer.example"))]}},
         "spec.controlPlane.apiServer.authentication.jwt[0].issuer.url", "should match '^https://'"),
        ({"authentication": {"jwt": [dict(jwt, issuer=dict(issuer, certificateAuthority="/etc/ca.pem"))]}},
         "spec.controlPlane.apiServer.authentication.jwt[0].issuer.certificateAuthority", "not a path"),
        ({"audit": {"policy": {"rules": [{"level": "Everything"}]}}},
         "spec.controlPlane.apiServer.audit.policy.rules[0].level", "Unsupported value"),
        ({"audit": {"policy": {"rules": []}}}, "spec.controlPlane.apiServer.audit.policy.rules", "at least 1"),
        ({"audit": {"policy": {"rules": [{"level": "None"}]}, "log": {"maxSizeMB": 0}}},
         "spec.controlPlane.apiServer.audit.log.maxSizeMB", "should be greater than or equal to 1"),
        ({"extraArgs": {"audit-log-maxsize": "5"}}, "spec.controlPlane.apiServer.extraArgs", "audit-"),
    ]
    for given, field, message in refusals:
        with pytest.raises(ApiException) as refused:
            _create(kosmos, _vc("refused-authn", {"controlPlane": {"apiServer": given}}))
        assert refused.value.status == 422, refused.value.body
        assert field in refused.value.body and message in refused.value.body, (given, refused.value.body)


def test_status_is_a_subresource_and_printer_columns_exist(kosmos, api_client, apiserver):
    created = _create(kosmos, _vc("status-check", {}))
    body = {"status": {"phase": "Preparing", "observedGeneration": 1,
                       "progress": {"tasksDone": 12, "tasksTotal": 40, "summary": "12/40 Step Kubelet"}}}
    kosmos.patch_namespaced_custom_object(GROUP, VERSION, "vc-tests", "virtualclusters", "status-check",
                                          {"status": {"phase": "Completed"}})  # main resource ignores status
    got = kosmos.get_namespaced_custom_object(GROUP, VERSION, "vc-tests", "virtualclusters", "status-check")
    assert "status" not in got
    kosmos.patch_namespaced_custom_object_status(GROUP, VERSION, "vc-tests", "virtualclusters", "status-check", body)
    got = kosmos.get_namespaced_custom_object(GROUP, VERSION, "vc-tests", "virtualclusters", "status-check")
    assert got["status"]["phase"] == "Preparing" and created["metadata"]["name"] == "status-check"
    crd = kubernetes.client.ApiextensionsV1Api(api_client).read_custom_resource_definition("virtualclusters.kosmos.io")
    columns = [c.name for c in crd.spec.versions[0].additional_printer_columns]
    assert columns == ["Phase", "Ready", "Endpoint", "Version", "Nodes", "Progress", "Age"]
    listed = subprocess.run([str(k8sbin.binary("kubectl")), "--kubeconfig", str(apiserver.kubeconfig), "-n",
                             "vc-tests", "get", "vc", "status-check"], capture_output=True, text=True, timeout=60,
                            check=True).stdout.splitlines()
    assert listed[0].split()[:7] == ["NAME", "PHASE", "READY", "ENDPOINT", "VERSION", "NODES", "PROGRESS"]
    assert "  12/40 Step Kubelet  " in listed[1]
    assert crd.spec.names.short_names == ["vc"]


def _set_version(api, name, version):
    api.patch_namespaced_custom_object(GROUP, VERSION, "vc-tests", "virtualclusters", name,
                                       {"spec": {"kubernetesVersion": version}})


def _refused(api, name, version) -> str:
    with pytest.raises(ApiException) as refused:
        _set_version(api, name, version)
    assert refused.value.status == 422, refused.value.body
    return refused.value.body


def test_a_tenant_moves_one_minor_up_at_a_time_from_the_version_it_runs(kosmos):
    """Upgrades follow the version-skew policy: one minor up from what runs (status), never an older minor, patch
    releases within a minor either way; before a first run, from the version asked before."""
    _create(kosmos, _vc("upgrades", {"kubernetesVersion": "v1.36.3"}))
    # No run yet: the version asked before is the base.
    assert "v1.38.0 after v1.36.3 (asked before)" in _refused(kosmos, "upgrades", "v1.38.0")
    _set_version(kosmos, "upgrades", "v1.36.1")  # a patch release back within the minor
    kosmos.patch_namespaced_custom_object_status(GROUP, VERSION, "vc-tests", "virtualclusters", "upgrades",
                                                 {"status": {"kubernetesVersion": "v1.36.1"}})
    body = _refused(kosmos, "upgrades", "v1.35.9")
    assert "kubernetesVersion v1.35.9 after v1.36.1 (running)" in body and "never to an older minor" in body
    assert "spec.kubernetesVersion" in body  # the field is named
    assert "one minor version up at a time" in _refused(kosmos, "upgrades", "v1.38.0")
    _set_version(kosmos, "upgrades", "v1.37.0")  # one minor up from what runs
    # Asked for 1.37 while 1.36 still runs: going on to 1.38 skips 1.37 all the same; going back to 1.36 is fine.
    assert "after v1.36.1 (running)" in _refused(kosmos, "upgrades", "v1.38.0")
    _set_version(kosmos, "upgrades", "v1.36.3")
    got = kosmos.get_namespaced_custom_object(GROUP, VERSION, "vc-tests", "virtualclusters", "upgrades")
    assert got["spec"]["kubernetesVersion"] == "v1.36.3"
    # The run's status update is no spec change: it goes through whatever the spec asks.
    kosmos.patch_namespaced_custom_object_status(GROUP, VERSION, "vc-tests", "virtualclusters", "upgrades",
                                                 {"status": {"kubernetesVersion": "v1.36.3", "phase": "Completed"}})


def test_globalnode_is_cluster_scoped_with_states(kosmos):
    node = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode", "metadata": {"name": "kn-w1"},
            "spec": {"nodeIP": "198.18.0.12", "labels": {"kubernetes.io/hostname": "kn-w1"}}}
    kosmos.create_cluster_custom_object(GROUP, VERSION, "globalnodes", node)
    with pytest.raises(ApiException) as refused:
        kosmos.patch_cluster_custom_object_status(GROUP, VERSION, "globalnodes", "kn-w1",
                                                  {"status": {"state": "stolen"}})
    assert "status.state" in refused.value.body


# Template syntax and YAML-breaking text: every string field of both CRDs refuses them at admission.
HOSTILE = ["{{ lookup('pipe', 'id -un') }}", "{% if 1 %}x{% endif %}", "a\nhostPID: true", "a: b", "'quoted'",
           "\"dq\"", "{a: 1}", "&anchor x", "*anchor", "x # c", "a b", "kubenest.local\n  hostNetwork: true"]


def _selector_spec(**selector):
    return {"promotePolicies": [{"labelSelector": selector, "nodeCount": 1}]}


VC_STRING_FIELDS = {
    "spec.imageRepository": lambda v: {"imageRepository": v},
    "spec.kubernetesVersion": lambda v: {"kubernetesVersion": v},
    "spec.externalIP": lambda v: {"externalIP": v},
    "spec.kubeconfig": lambda v: {"kubeconfig": v},
    "spec.promotePolicies[0].labelSelector.matchLabels": lambda v: _selector_spec(matchLabels={v: "x"}),
    "spec.promotePolicies[0].labelSelector.matchLabels.k": lambda v: _selector_spec(matchLabels={"k": v}),
    "spec.promotePolicies[0].labelSelector.matchExpressions[0].key":
        lambda v: _selector_spec(matchExpressions=[{"key": v, "operator": "Exists"}]),
    "spec.promotePolicies[0].labelSelector.matchExpressions[0].values[0]":
        lambda v: _selector_spec(matchExpressions=[{"key": "k", "operator": "In", "values": [v]}]),
    "spec.promoteResources.nodes[0]": lambda v: {"promoteResources": {"nodes": [v]}},
    "spec.promoteResources.resources": lambda v: {"promoteResources": {"resources": {v: 1}}},
    "spec.promoteResources.resources.cpu": lambda v: {"promoteResources": {"resources": {"cpu": v}}},
}


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("field", sorted(VC_STRING_FIELDS))
def test_hostile_strings_in_virtualcluster_fields_are_refused(kosmos, field, value):
    with pytest.raises(ApiException) as refused:
        _create(kosmos, _vc("hostile", VC_STRING_FIELDS[field](value)))
    assert refused.value.status == 422
    assert field in refused.value.body, refused.value.body


@pytest.mark.parametrize("name", ["1st", "0-vc", "a" * 41, "vc_1"])
def test_virtualcluster_names_must_fit_derived_service_names(kosmos, name):
    with pytest.raises(ApiException) as refused:
        _create(kosmos, _vc(name, {}))
    assert refused.value.status == 422 and "metadata.name" in refused.value.body


def test_registries_with_ports_and_paths_are_accepted(kosmos):
    for index, repository in enumerate(["registry.example.com:5000/kube/images", "localhost:5000", "k8s.gcr.io"]):
        created = _create(kosmos, _vc(f"registry-{index}", {"imageRepository": repository}))
        assert created["spec"]["imageRepository"] == repository


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("field", ["spec.labels", "spec.labels.k", "spec.nodeIP", "status.virtualCluster"])
def test_hostile_strings_in_globalnode_fields_are_refused(kosmos, field, value):
    name = "hostile-gn"
    spec = {"nodeIP": "198.18.0.99", "labels": {"k": "v"}}
    if field == "spec.labels":
        spec["labels"] = {value: "v"}
    elif field == "spec.labels.k":
        spec["labels"] = {"k": value}
    elif field == "spec.nodeIP":
        spec["nodeIP"] = value
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode", "metadata": {"name": name}, "spec": spec}
    if field != "status.virtualCluster":
        with pytest.raises(ApiException) as refused:
            kosmos.create_cluster_custom_object(GROUP, VERSION, "globalnodes", body)
    else:
        kosmos.create_cluster_custom_object(GROUP, VERSION, "globalnodes", body)
        try:
            with pytest.raises(ApiException) as refused:
                kosmos.patch_cluster_custom_object_status(GROUP, VERSION, "globalnodes", name,
                                                          {"status": {"state": "reserved", "virtualCluster": value}})
        finally:
            kosmos.delete_cluster_custom_object(GROUP, VERSION, "globalnodes", name)
    assert refused.value.status == 422
    assert field in refused.value.body, refused.value.body


def test_a_ca_rotation_with_a_new_id_waits_for_the_one_under_way(kosmos):
    """spec.caRotation: a new id only once the rotation under way has completed; a completed one stays so."""
    _create(kosmos, _vc("rotates", {"caRotation": {"id": "r1"}}))

    def ask(rotation):
        kosmos.patch_namespaced_custom_object(GROUP, VERSION, "vc-tests", "virtualclusters", "rotates",
                                              {"spec": {"caRotation": rotation}})

    for refused_rotation in ({"id": "r2"}, {"id": "bad id"}):
        with pytest.raises(ApiException) as refused:
            ask(refused_rotation)
        assert refused.value.status == 422, refused.value.body
    ask({"id": "r1", "complete": True})
    with pytest.raises(ApiException) as refused:
        ask({"id": "r1", "complete": False})
    assert "a completed CA rotation cannot be taken back" in refused.value.body
    kosmos.patch_namespaced_custom_object_status(GROUP, VERSION, "vc-tests", "virtualclusters", "rotates", {
        "status": {"caRotation": {"id": "r1", "step": "finish", "phase": "Completed"}}})
    ask({"id": "r2"})  # the last one completed: a new one may start
