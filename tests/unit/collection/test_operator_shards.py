"""The operator split into shards by namespace: the Deployments, peerings and budgets the install applies, the
layout's checks, and the collection's namespace matcher held to kopf's (which the operator itself uses)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.operator_shard_gaps import operator_shard_gaps
from ansible_collections.kosmos.kubenest.plugins.filter.operator_shards import operator_shards
from ansible_collections.kosmos.kubenest.plugins.module_utils.operator_shards import pattern_matches
from kopf._cogs.structs.references import match_namespace

REPO = Path(__file__).resolve().parents[3]
DEPLOYMENT = yaml.safe_load((REPO / "deploy/operator/deployment.yaml").read_text())
BUDGET = yaml.safe_load((REPO / "deploy/operator/pdb.yaml").read_text())
SHARDS = [{"name": "team-a", "namespaces": ["team-a-*"]}, {"name": "rest", "namespaces": ["!team-a-*"]}]

NAMESPACES = ["default", "kube-system", "team-a", "team-a-dev", "team-a-pr-1", "team-b", "myapp-pr-123", "x"]
PATTERNS = ["*", "team-a-*", "!team-a-*", "team-?", "team-a-*, !*-pr-*", "!*-pr-*, *pr-123",
            "myapp-*, !*-pr-*, *pr-123", "default", "!default", "team-*,!team-a*,team-a-dev", "[a-k]*", " team-b , x "]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_collections_matcher_is_kopfs(pattern):
    assert [ns for ns in NAMESPACES if pattern_matches(ns, pattern)] == [
        ns for ns in NAMESPACES if match_namespace(ns, pattern)]


def args(deployment: dict) -> list[str]:
    return next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "operator")["args"]


def test_each_shard_is_a_deployment_of_its_own_with_its_namespaces_and_peering():
    found = operator_shards(DEPLOYMENT, SHARDS, budget=BUDGET)
    first, second = found["deployments"]
    assert [d["metadata"]["name"] for d in found["deployments"]] == [
        "kubenest-operator-team-a", "kubenest-operator-rest"]
    kept = [arg for arg in args(DEPLOYMENT) if not arg.startswith(("--all-namespaces", "--peering"))]
    assert args(first) == [*kept, "--namespace=team-a-*", "--peering=kubenest-team-a"]
    assert args(second) == [*kept, "--namespace=!team-a-*", "--peering=kubenest-rest", "--no-cluster-scoped"]
    assert [p["metadata"]["name"] for p in found["peerings"]] == ["kubenest-team-a", "kubenest-rest"]
    assert DEPLOYMENT["metadata"]["name"] == "kubenest-operator" and "--all-namespaces" in args(DEPLOYMENT)


def test_shards_never_select_each_others_pods():
    found = operator_shards(DEPLOYMENT, SHARDS, budget=BUDGET)
    for deployment, budget in zip(found["deployments"], found["budgets"], strict=True):
        shard = deployment["metadata"]["labels"]["kubenest.kosmos.io/shard"]
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"] == {
            "app.kubernetes.io/name": "kubenest-operator", "kubenest.kosmos.io/shard": shard}
        assert pod_labels["kubenest.kosmos.io/shard"] == shard
        term = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
        assert term["labelSelector"]["matchLabels"]["kubenest.kosmos.io/shard"] == shard
        assert budget["metadata"]["name"] == f"kubenest-operator-{shard}"
        assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(("shards", "message"), [
    ([], "no shards given"),
    ("team-a", "a list of {name, namespaces}"),
    ([{"name": "Team_A", "namespaces": ["a"]}], "name 'Team_A' is not a DNS label"),
    ([{"name": "a", "namespaces": []}], "shard 'a': namespaces is a list of kopf namespace patterns"),
    ([{"name": "a", "namespaces": ["!"]}], "shard 'a': namespaces"),
    ([{"name": "a", "namespaces": ["x"]}, {"name": "a", "namespaces": ["y"]}], "name 'a' is given twice"),
    ([{"name": "a", "namespaces": ["x"], "replicas": 3}], "a mapping with name and namespaces only"),
])
def test_a_bad_layout_is_refused_saying_what_is_wrong(shards, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("{", r"\{").replace("}", r"\}")):
        operator_shards(DEPLOYMENT, shards)


def test_namespaces_served_twice_or_not_at_all_are_named():
    overlapping = [{"name": "a", "namespaces": ["team-*"]}, {"name": "b", "namespaces": ["team-a-*", "lab"]}]
    assert operator_shard_gaps(overlapping, ["team-a-dev", "team-b", "lab", "other", "team-b"]) == [
        "namespace other is served by no shard", "namespace team-a-dev is served by shards a, b"]
    assert operator_shard_gaps(SHARDS, ["team-a-dev", "team-b", "default"]) == []
