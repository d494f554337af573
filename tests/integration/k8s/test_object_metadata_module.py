"""kosmos.kubenest.object_metadata on a real API server: several kinds in one run, metadata only (a Secret's
data never reaches the result), names and label selectors, and a clear error for a kind the server lacks."""

from __future__ import annotations

import kubernetes
import pytest

from tests.support.playbook import run_module
from tests.support.virtualclusters import ensure_namespace

NS = "object-metadata"


@pytest.fixture(scope="module")
def core(api_client):
    ensure_namespace(api_client, NS)
    api = kubernetes.client.CoreV1Api(api_client)
    for name, labels in (("a", {"team": "x"}), ("b", {"team": "y"}), ("c", {"team": "x"})):
        api.create_namespaced_secret(NS, {"metadata": {"name": name, "labels": labels},
                                          "stringData": {"token": f"secret-value-{name}"}})
    api.create_namespaced_config_map(NS, {"metadata": {"name": "a", "labels": {"team": "x"}}, "data": {"k": "v"}})
    return api


def test_several_kinds_by_name_and_label_in_one_run_without_content(apiserver, core):
    queries = [{"api_version": "v1", "kind": "Secret", "names": ["a", "b", "missing"]},
               {"api_version": "v1", "kind": "Secret", "label_selector": "team=x"},
               {"api_version": "v1", "kind": "ConfigMap", "names": []},
               {"api_version": "apps/v1", "kind": "Deployment"}]
    rc, result, out = run_module("object_metadata", apiserver.kubeconfig, namespace=NS, queries=queries)
    assert rc == 0 and not result["changed"], result
    found = [sorted(r["metadata"]["name"] for r in q["resources"]) for q in result["results"]]
    assert found == [["a", "b"], ["a", "c"], [], []]
    assert [q["item"]["kind"] for q in result["results"]] == ["Secret", "Secret", "ConfigMap", "Deployment"]
    first = result["results"][0]["resources"][0]
    assert first["kind"] == "Secret" and first["metadata"]["labels"] == {"team": "x"} and "data" not in first
    assert "secret-value" not in out and "c2VjcmV0LXZhbHVl" not in out  # nor base64 of it


def test_a_kind_the_server_lacks_is_named(apiserver, core):
    rc, result, out = run_module("object_metadata", apiserver.kubeconfig, namespace=NS,
                                 queries=[{"api_version": "example.com/v1", "kind": "Widget"}])
    assert rc != 0 and result["msg"] == "queries: the API server has no kind Widget in example.com/v1", result


def test_an_owner_refuses_objects_of_someone_else_by_name(apiserver, core):
    owned = {"name": "owned", "labels": {"app.kubernetes.io/managed-by": "kosmos.kubenest",
                                         "kosmos.io/virtualcluster": "vc1"}}
    core.create_namespaced_config_map(NS, {"metadata": owned, "data": {"k": "v"}})
    mine = [{"api_version": "v1", "kind": "ConfigMap", "names": ["owned", "missing"]}]
    rc, result, _out = run_module("object_metadata", apiserver.kubeconfig, namespace=NS, queries=mine,
                                  owner={"name": "vc1"})
    assert rc == 0 and result["foreign"] == [], result

    # "a" carries no labels of ours; without a uid, labels decide (a run with no VirtualCluster behind it).
    theirs = [{"api_version": "v1", "kind": "ConfigMap", "names": ["owned", "a"]}]
    rc, result, _out = run_module("object_metadata", apiserver.kubeconfig, namespace=NS, queries=theirs,
                                  owner={"name": "vc1"})
    assert rc != 0 and result["foreign"] == [f"ConfigMap {NS}/a"], result
    assert result["msg"].startswith(f"[kubenest:permanent:NotOwned] ConfigMap {NS}/a already exist"), result
    # Another virtual cluster of the same name with a uid: our labels alone do not make it its own.
    rc, result, _out = run_module("object_metadata", apiserver.kubeconfig, namespace=NS, queries=mine,
                                  owner={"name": "vc1", "uid": "0b5a3c2e-0000-4000-8000-000000000001"})
    assert rc != 0 and result["foreign"] == [f"ConfigMap {NS}/owned"], result
