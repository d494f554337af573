"""kubectl kubenest's pure parts: names, tables, the status page, node moves as spec edits, and where it finds
the collection's API client."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kubectl_kubenest import edits, views

REPO = Path(__file__).resolve().parents[2]

NOW = datetime.datetime(2026, 12, 3, 12, 0, 0, tzinfo=datetime.UTC)


def vc(name="vc1", namespace="t1", spec=None, status=None, rv="42"):
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv, "generation": 3,
                         "creationTimestamp": "2026-12-03T11:00:00Z"},
            "spec": spec if spec is not None else {"externalIP": "198.18.0.11"}, "status": status or {}}


def test_a_reference_is_namespace_slash_name_or_a_name_in_the_default_namespace():
    assert views.parse_ref("t1/vc1", "default") == ("t1", "vc1")
    assert views.parse_ref("vc1", "team-a") == ("team-a", "vc1")
    for bad in ("t1/", "/vc1", "a/b/c"):
        with pytest.raises(views.RefError, match="NAMESPACE/NAME"):
            views.parse_ref(bad, "default")


def test_ages_read_as_kubectl_prints_them():
    assert views.age("2026-12-03T11:59:00Z", NOW) == "60s"
    assert views.age("2026-12-03T11:00:00Z", NOW) == "60m"
    assert views.age("2026-12-03T09:00:00Z", NOW) == "3h"
    assert views.age("2026-11-30T12:00:00Z", NOW) == "3d"
    assert views.age(None, NOW) == "-" and views.age("yesterday", NOW) == "-"


def test_progress_names_the_task_and_how_far_the_run_is():
    assert views.progress_text(None) == "-"
    assert views.progress_text({"runID": "r1", "currentTask": "Step Kubelet", "tasksDone": 12, "tasksTotal": 40}) \
        == "Step Kubelet (12/40)"
    assert views.progress_text({"runID": "r1", "playbook": "virtualcluster.yml"}) == "virtualcluster.yml"
    assert views.progress_text({"runID": "r1", "summary": "40/40 done", "tasksDone": 40}) == "40/40 done"


def test_the_list_has_a_column_each_and_the_namespace_only_across_namespaces():
    ready = vc(status={"phase": "Completed", "nodesReady": "1/1",
                       "conditions": [{"type": "Ready", "status": "True"}]})
    text = views.virtualcluster_rows([ready, vc(name="a0")], NOW, all_namespaces=False)
    lines = text.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "READY", "NODES", "PROGRESS", "AGE"]
    assert lines[1].split() == ["a0", "-", "-", "-", "-", "60m"]
    assert lines[2].split() == ["vc1", "Completed", "True", "1/1", "-", "60m"]
    wide = views.virtualcluster_rows([ready], NOW, all_namespaces=True).splitlines()
    assert wide[0].split()[0] == "NAMESPACE" and wide[1].split()[:2] == ["t1", "vc1"]


def test_the_status_page_says_where_it_stands_why_and_how_to_get_the_kubeconfig():
    status = {"phase": "Updating", "endpoint": "https://198.18.0.11:31443", "kubernetesVersion": "v1.36.3",
              "nodesReady": "0/1", "observedGeneration": 2,
              "nodes": [{"name": "kn-w1", "ip": "198.18.0.12", "ready": False}],
              "conditions": [{"type": "Ready", "status": "False", "reason": "NodeStepFailed",
                              "message": "promoting kn-w1 failed at step Layout",
                              "lastTransitionTime": "2026-12-03T11:58:00Z"}],
              "kubeconfigSecretRef": {"name": "vc1-admin-kubeconfig", "key": "kubeconfig"}}
    text = views.virtualcluster_detail(vc(status=status), NOW)
    assert "Phase:       Updating" in text and "https://198.18.0.11:31443" in text
    assert "generation 3 not reconciled yet (last: 2)" in text
    assert any(line.split()[:3] == ["kn-w1", "198.18.0.12", "False"] for line in text.splitlines())
    assert any(line.split()[:4] == ["Ready", "False", "NodeStepFailed", "2m"] for line in text.splitlines())
    assert "kubectl kubenest kubeconfig t1/vc1 -o vc1.kubeconfig" in text


def test_globalnodes_list_their_state_and_holder_and_what_was_asked_of_held_ones():
    asked, failed = "kubenest.kosmos.io/clear", "kubenest.kosmos.io/clear-failed"
    nodes = [{"metadata": {"name": "kn-w2"}, "status": {"state": "free", "stateSince": "2026-12-03T11:00:00Z"}},
             {"metadata": {"name": "kn-w1"}, "status": {"state": "occupied", "virtualCluster": "t1/vc1"}},
             {"metadata": {"name": "kn-w3", "annotations": {asked: "asked"}}, "status": {"state": "held"}},
             {"metadata": {"name": "kn-w4", "annotations": {failed: "the agent did not answer"}},
              "status": {"state": "held"}}]
    lines = views.globalnode_rows(nodes, NOW, asked, failed).splitlines()
    assert lines[0].split() == ["NAME", "STATE", "VIRTUAL", "CLUSTER", "SINCE", "CLEAR"]
    assert lines[1].split() == ["kn-w1", "occupied", "t1/vc1", "-", "-"]
    assert lines[2].split() == ["kn-w2", "free", "-", "60m", "-"]
    assert lines[3].split() == ["kn-w3", "held", "-", "-", "asked"]
    assert lines[4].split()[:5] == ["kn-w4", "held", "-", "-", "failed:"]
    assert lines[4].endswith("failed: the agent did not answer")


def test_promote_adds_the_new_names_once_and_carries_the_resource_version():
    obj = vc(spec={"promoteResources": {"nodes": ["kn-w1"]}})
    patch, new = edits.promote(obj, ["kn-w1", "kn-w2", "kn-w2"])
    assert new == ["kn-w2"]
    assert patch == {"metadata": {"resourceVersion": "42"}, "spec": {"promoteResources": {"nodes": ["kn-w1", "kn-w2"]}}}
    assert edits.promote(obj, ["kn-w1"]) == (None, [])


def test_return_removes_only_names_the_spec_has_and_refuses_others():
    obj = vc(spec={"promoteResources": {"nodes": ["kn-w1", "kn-w2"]}})
    patch, gone = edits.give_back(obj, ["kn-w2"])
    assert gone == ["kn-w2"] and patch["spec"]["promoteResources"]["nodes"] == ["kn-w1"]
    with pytest.raises(edits.EditError, match="does not ask for kn-w9 \\(it asks for: kn-w1, kn-w2\\)"):
        edits.give_back(obj, ["kn-w9"])


def test_a_virtual_cluster_choosing_nodes_by_policy_is_not_edited_by_name():
    obj = vc(spec={"promotePolicies": [{"labelSelector": {"matchLabels": {"pool": "a"}}, "nodeCount": 1}]})
    for plan in (edits.promote, edits.give_back):
        with pytest.raises(edits.EditError, match="chooses its nodes by promotePolicies.*nodeCount"):
            plan(obj, ["kn-w1"])


def _locate(tmp_path, collections_path: str) -> subprocess.CompletedProcess:
    """The plugin's lookup of the collection in a Python without site-packages (no collection installed)."""
    code = ("from kubectl_kubenest import collection\n"
            "try:\n    print(collection.kube_api().__file__)\n"
            "except collection.Missing as exc:\n    print('missing:', exc)\n")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "ANSIBLE_COLLECTIONS_PATH": collections_path,
           "PYTHONPATH": str(REPO / "kubectl")}
    return subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=60,
                          check=True)


def test_the_collection_is_found_where_ansible_finds_it_or_said_missing(tmp_path):
    root = tmp_path / "collections"
    (root / "ansible_collections" / "kosmos").mkdir(parents=True)
    (root / "ansible_collections" / "kosmos" / "kubenest").symlink_to(REPO)
    found = _locate(tmp_path, f"{tmp_path / 'elsewhere'}{os.pathsep}{root}")
    assert found.stdout.strip() == str(root / "ansible_collections/kosmos/kubenest/plugins/module_utils/kube_api.py")
    missing = _locate(tmp_path, str(tmp_path / "elsewhere"))
    assert missing.stdout.startswith(f"missing: the kosmos.kubenest collection was not found (searched: "
                                     f"{tmp_path / 'elsewhere'}): install it with ansible-galaxy collection install")


def test_without_a_configured_path_ansible_s_default_paths_are_searched():
    from kubectl_kubenest.collection import search_paths

    assert search_paths({}) == [os.path.expanduser("~/.ansible/collections"), "/usr/share/ansible/collections"]
    assert search_paths({"ANSIBLE_COLLECTIONS_PATHS": "/a:/b"}) == ["/a", "/b"]
