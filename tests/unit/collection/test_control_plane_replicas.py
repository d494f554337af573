"""Several API servers: replicas, spreading over host nodes, leader election, the tunnel's server count and a
disruption budget per component, all built as data; one replica keeps exactly the manifests it always had."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest
from ansible_collections.kosmos.kubenest.plugins.filter.virtualcluster_problems import virtualcluster_problems
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import REPLICA_COUNTS

from tests.unit.collection.test_hosted_manifests import SETTINGS, VC

CRD = Path(__file__).resolve().parents[3] / "deploy/crds/kosmos.io_virtualclusters.yaml"
DEPLOYMENTS = ("apiserver", "controller-manager", "scheduler")
KONNECTIVITY = dict(SETTINGS, konnectivity_image="kubenest.local/konnectivity-server:v0.34.0")


def _command(manifest, container=0):
    return manifest["spec"]["template"]["spec"]["containers"][container]["command"]


@pytest.mark.parametrize("component", DEPLOYMENTS)
def test_one_replica_is_the_manifest_it_always_was(component):
    """Existing tenants do not roll when the collection learns about replicas."""
    implicit = hosted_manifest(component, VC, KONNECTIVITY)
    explicit = hosted_manifest(component, VC, dict(KONNECTIVITY, replicas=1, host_nodes=3))
    assert implicit == explicit
    assert implicit["spec"]["replicas"] == 1
    assert "strategy" not in implicit["spec"] and "affinity" not in implicit["spec"]["template"]["spec"]
    assert not any(arg.startswith("--server-count") for c in implicit["spec"]["template"]["spec"]["containers"]
                   for arg in c["command"])


SPREADS = [(2, 2, True), (3, 5, True), (2, 1, False), (3, 2, False), (2, 0, False)]


@pytest.mark.parametrize(("replicas", "host_nodes", "required"), SPREADS)
@pytest.mark.parametrize("component", DEPLOYMENTS)
def test_replicas_spread_over_host_nodes_required_only_where_there_are_enough(component, replicas, host_nodes,
                                                                              required):
    manifest = hosted_manifest(component, VC, dict(SETTINGS, replicas=replicas, host_nodes=str(host_nodes)))
    spec = manifest["spec"]
    assert spec["replicas"] == replicas
    anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]
    if required:
        [term] = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    else:
        [preferred] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
        term = preferred["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    # Only this component's pods of this virtual cluster repel each other.
    assert term["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    assert term["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == component
    # No surge pod that a node per replica would leave Pending; the other replicas serve meanwhile.
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


@pytest.mark.parametrize(("replicas", "elect"), [(1, "false"), (2, "true"), (3, "true")])
@pytest.mark.parametrize("component", ["controller-manager", "scheduler"])
def test_controllers_elect_a_leader_when_there_are_several(component, replicas, elect):
    command = _command(hosted_manifest(component, VC, dict(SETTINGS, replicas=replicas, host_nodes=3)))
    assert f"--leader-elect={elect}" in command


@pytest.mark.parametrize("replicas", [2, 3])
def test_each_tunnel_server_knows_how_many_there_are(replicas):
    """An agent told the count dials until it holds a tunnel to every API server's proxy server."""
    manifest = hosted_manifest("apiserver", VC, dict(KONNECTIVITY, replicas=replicas, host_nodes=3))
    containers = {c["name"]: c for c in manifest["spec"]["template"]["spec"]["containers"]}
    assert f"--server-count={replicas}" in containers["konnectivity-server"]["command"]


@pytest.mark.parametrize("replicas", [0, 4, -1, "2x", True, None, 1.5])
def test_a_replica_count_outside_one_to_three_is_refused_naming_it(replicas):
    with pytest.raises(AnsibleFilterError, match="API server replicas must be one of 1, 2, 3"):
        hosted_manifest("apiserver", VC, dict(SETTINGS, replicas=replicas))


@pytest.mark.parametrize("host_nodes", [-1, "many", True])
def test_a_host_node_count_that_is_no_count_is_refused(host_nodes):
    with pytest.raises(AnsibleFilterError, match="host_nodes must be a count"):
        hosted_manifest("scheduler", VC, dict(SETTINGS, replicas=2, host_nodes=host_nodes))


@pytest.mark.parametrize("component", ("etcd",) + DEPLOYMENTS)
def test_each_component_has_a_budget_of_one_pod_at_a_time(component):
    budget = hosted_manifest(component + "-budget", VC, SETTINGS)
    workload = hosted_manifest(component, VC, SETTINGS)
    assert budget["apiVersion"] == "policy/v1" and budget["kind"] == "PodDisruptionBudget"
    assert budget["metadata"]["name"] == workload["metadata"]["name"]
    assert budget["metadata"]["ownerReferences"] == VC["owner_references"]
    assert budget["spec"]["selector"] == workload["spec"]["selector"]
    assert budget["spec"]["maxUnavailable"] == 1
    # A pod that is not ready never holds up a drain.
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_a_budget_of_an_unknown_component_is_refused():
    with pytest.raises(AnsibleFilterError, match="unknown component 'kubelet-budget'"):
        hosted_manifest("kubelet-budget", VC, SETTINGS)


@pytest.mark.parametrize(("replicas", "problem"), [(2, None), (3, None), (4, "apiServerReplicas must be one of"),
                                                   (0, "apiServerReplicas must be one of"),
                                                   ("2", "apiServerReplicas must be one of")])
def test_the_spec_is_checked_before_anything_changes(replicas, problem):
    problems = virtualcluster_problems({"name": "a", "namespace": "t", "spec": {"apiServerReplicas": replicas}})
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0]


def test_the_crd_admits_the_counts_the_collection_builds():
    versions = yaml.safe_load(CRD.read_text())["spec"]["versions"]
    for version in versions:
        field = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["apiServerReplicas"]
        assert field["type"] == "integer"
        assert tuple(field["enum"]) == REPLICA_COUNTS
        # No default: existing objects read back unchanged, so an operator upgrade sees no new spec.
        assert "default" not in field


@pytest.mark.parametrize(("host_nodes", "required"), [(3, True), (4, True), (2, False), (0, False)])
def test_etcd_members_each_get_a_host_node_where_there_are_enough(host_nodes, required):
    pod = hosted_manifest("etcd", VC, dict(SETTINGS, members=3, host_nodes=host_nodes))["spec"]["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]
    assert ("requiredDuringSchedulingIgnoredDuringExecution" in anti) == required
    assert ("preferredDuringSchedulingIgnoredDuringExecution" in anti) == (not required)


def test_one_etcd_member_has_no_affinity():
    assert "affinity" not in hosted_manifest("etcd", VC, dict(SETTINGS, host_nodes=3))["spec"]["template"]["spec"]
