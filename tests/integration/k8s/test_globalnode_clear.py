"""playbooks/globalnode_clear.yml against a real API server: which held nodes it asks for, and how its wait ends.

No operator runs here: a stand-in, used only by this module, answers each request as the operator's clears.py
does after its run (the node freed and the annotation removed, or the node left held with the reason in
kubenest.kosmos.io/clear-failed). tests/e2e/test_awx.py asks the real operator the same way, through the AWX job
template."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import kubernetes
import pytest

from tests.support.virtualclusters import install_crds

GROUP, VERSION = "kosmos.io", "v1alpha1"
REPO = Path(__file__).resolve().parents[3]
CLEAR, FAILED = "kubenest.kosmos.io/clear", "kubenest.kosmos.io/clear-failed"
# GlobalNodes are cluster-scoped and the API server is shared with the other files of a worker: named for this one.
HELD, BROKEN, FREE = "gc-held", "gc-broken", "gc-free"


class ClearStandIn:
    """Answers every request to clear one of this module's GlobalNodes: BROKEN fails, the others are freed."""

    def __init__(self, custom):
        self.custom, self.stop, self.answered = custom, threading.Event(), []
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(0.2):
            for node in self.custom.list_cluster_custom_object(GROUP, VERSION, "globalnodes")["items"]:
                name = node["metadata"]["name"]
                if name not in (HELD, BROKEN) or CLEAR not in (node["metadata"].get("annotations") or {}):
                    continue
                if name == HELD:
                    self.custom.patch_cluster_custom_object_status(
                        GROUP, VERSION, "globalnodes", name, {"status": {"state": "free", "virtualCluster": None}},
                        _content_type="application/merge-patch+json")
                failure = "task 'Wipe the node' failed on gc-broken: disk busy" if name == BROKEN else None
                self.custom.patch_cluster_custom_object(GROUP, VERSION, "globalnodes", name, {
                    "metadata": {"annotations": {CLEAR: None, FAILED: failure}}})
                self.answered.append(name)

    def __enter__(self) -> ClearStandIn:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


@pytest.fixture
def world(apiserver, api_client):
    install_crds(apiserver.kubeconfig)
    custom = kubernetes.client.CustomObjectsApi(api_client)
    for name, status in ((HELD, {"state": "held", "virtualCluster": "t/gone"}),
                         (BROKEN, {"state": "held", "virtualCluster": "t/gone"}), (FREE, {"state": "free"})):
        custom.create_cluster_custom_object(GROUP, VERSION, "globalnodes", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode", "metadata": {"name": name},
            "spec": {"nodeIP": "198.18.0.12"}})
        custom.patch_cluster_custom_object_status(GROUP, VERSION, "globalnodes", name, {"status": status},
                                                  _content_type="application/merge-patch+json")
    try:
        with ClearStandIn(custom) as stand_in:
            yield apiserver, custom, stand_in
    finally:
        for name in (HELD, BROKEN, FREE):
            custom.delete_cluster_custom_object(GROUP, VERSION, "globalnodes", name)


def _play(apiserver, names: str, *extra: str) -> subprocess.CompletedProcess:
    args = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,",
            str(REPO / "playbooks" / "globalnode_clear.yml"), "-e", f"ansible_python_interpreter={sys.executable}",
            "-e", json.dumps({"kubenest_clear_names": names}), "-e", "kubenest_clear_wait_timeout=60", *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "K8S_AUTH_KUBECONFIG": str(apiserver.kubeconfig), "ANSIBLE_NOCOLOR": "1"})


def _node(custom, name: str) -> dict:
    return custom.get_cluster_custom_object(GROUP, VERSION, "globalnodes", name)


def test_a_node_that_is_not_held_is_refused_by_name_and_nothing_is_asked(world):
    apiserver, custom, stand_in = world
    proc = _play(apiserver, f"{HELD}, {FREE},gc-none")
    assert proc.returncode != 0, proc.stdout
    assert f"only held nodes are cleared, and nothing was asked: {FREE} is free, not held; no GlobalNode gc-none" \
        in proc.stdout, proc.stdout[-3000:]
    assert stand_in.answered == [] and _node(custom, HELD)["status"]["state"] == "held"
    assert not _node(custom, HELD)["metadata"].get("annotations")


def test_check_mode_says_what_it_would_ask_and_asks_nothing(world):
    apiserver, custom, stand_in = world
    proc = _play(apiserver, HELD, "--check")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "changed=1" in proc.stdout and stand_in.answered == []
    assert not _node(custom, HELD)["metadata"].get("annotations")


def test_the_wait_prints_each_state_and_ends_when_the_node_is_free(world):
    apiserver, custom, stand_in = world
    proc = _play(apiserver, HELD)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"{HELD}: held, clearing" in proc.stdout and f"{HELD}: free" in proc.stdout
    assert f"{HELD} cleared and back in the pool" in proc.stdout
    assert stand_in.answered == [HELD] and _node(custom, HELD)["status"]["state"] == "free"


def test_a_clear_that_failed_fails_the_play_with_the_operators_reason(world):
    apiserver, custom, stand_in = world
    proc = _play(apiserver, f"{HELD},{BROKEN}")
    assert proc.returncode != 0
    assert f"{BROKEN}: task 'Wipe the node' failed on gc-broken: disk busy" in proc.stdout, proc.stdout[-3000:]
    assert sorted(stand_in.answered) == [BROKEN, HELD]
    assert _node(custom, BROKEN)["status"]["state"] == "held" and _node(custom, HELD)["status"]["state"] == "free"
