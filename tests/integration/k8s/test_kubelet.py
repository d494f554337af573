"""Does kubelet (the pinned version) run on this cgroup v1 host?

Since Kubernetes 1.35 the kubelet refuses cgroup v1 unless its configuration sets `failCgroupV1: false`.
These tests pin both halves down: the refusal without it, and a working standalone kubelet with it, running a
static pod whose sandbox is the locally built pause image served by a private containerd.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support import k8sbin
from tests.support.hostfs import cgroup_v1_hierarchies, host_uses_cgroup_v1
from tests.support.kubelet import CRI_NAMESPACE, FIXED_HOST_PATHS, StandaloneKubelet

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not host_uses_cgroup_v1(), reason="answers the cgroup v1 question; this host runs v2"),
    pytest.mark.skipif(Path("/var/lib/kubelet/device-plugins/kubelet.sock").exists(),
                       reason="a kubelet already runs on this host"),
]
PAUSE_IMAGE = k8sbin.pause_image()
REFUSAL = "kubelet is configured to not run on a host using cgroup v1"


@pytest.fixture(scope="module")
def cri_runtime(containerd, oci_images):
    assert oci_images["pause"]["ref"] == PAUSE_IMAGE == containerd.sandbox_image
    containerd.import_image(oci_images["pause"]["path"], namespace=CRI_NAMESPACE)
    return containerd


def static_pause_pod() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "static-pause", "namespace": "default"},
        "spec": {
            # Host network: no CNI network is configured, and none is needed to answer the question.
            "hostNetwork": True,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}],
        },
    }


def pod_running(kubelet: StandaloneKubelet, name: str) -> dict | None:
    for pod in kubelet.pods():
        statuses = pod.get("status", {}).get("containerStatuses") or []
        if (pod["metadata"]["name"] == name and pod["status"].get("phase") == "Running"
                and statuses and all("running" in s.get("state", {}) for s in statuses)):
            return pod
    return None


def cri_containers(runtime) -> list[dict]:
    ids = runtime.ctr("containers", "ls", "-q", namespace=CRI_NAMESPACE).stdout.split()
    return [json.loads(runtime.ctr("containers", "info", cid, namespace=CRI_NAMESPACE).stdout) for cid in ids]


def test_kubelet_refuses_cgroup_v1_by_default(cri_runtime):
    kubelet = StandaloneKubelet(cri_runtime, fail_cgroup_v1=True)
    try:
        kubelet.start()
        exit_status = kubelet.process.proc.wait(60)
        log = kubelet.log_text()
    finally:
        kubelet.stop()
    assert exit_status != 0
    assert REFUSAL in log


def test_kubelet_runs_a_static_pod_on_cgroup_v1(cri_runtime):
    absent_host_paths = [p for p in FIXED_HOST_PATHS if not Path(p).exists()]
    with StandaloneKubelet(cri_runtime) as kubelet:
        assert kubelet.healthz() == (200, "ok")
        pod_name = kubelet.add_static_pod(static_pause_pod())
        deadline = time.monotonic() + 90
        while (pod := pod_running(kubelet, pod_name)) is None:
            assert kubelet.process.running(), kubelet.log_text()[-3000:]
            assert time.monotonic() < deadline, f"static pod not running; kubelet saw {kubelet.pods()}"
            time.sleep(0.5)

        # The sandbox is the pinned pause image, running, with the pod's cgroup under the kubelet's v1 QoS tree.
        containers = cri_containers(cri_runtime)
        sandboxes = [c for c in containers if c["Labels"].get("io.cri-containerd.kind") == "sandbox"]
        assert [c["Image"] for c in sandboxes] == [PAUSE_IMAGE]
        assert sandboxes[0]["Labels"]["io.kubernetes.pod.name"] == pod_name
        tasks = cri_runtime.ctr("tasks", "ls", namespace=CRI_NAMESPACE).stdout
        assert all(c["ID"] in tasks for c in containers) and tasks.count("RUNNING") == len(containers) == 2
        memory = next(h for h in cgroup_v1_hierarchies() if (h / "memory.limit_in_bytes").exists())
        qos_tree = memory / kubelet.cgroup_root.strip("/") / "kubepods" / "besteffort"
        assert (qos_tree / f"pod{pod['metadata']['uid']}").is_dir()
        assert "cgroup v1 detected" in kubelet.log_text()
        cgroup_root, workdir = kubelet.cgroup_root, kubelet.workdir

    assert not kubelet.process.running()
    assert cri_runtime.ctr("containers", "ls", "-q", namespace=CRI_NAMESPACE).stdout.split() == []
    assert not workdir.exists()
    assert not any((h / cgroup_root.strip("/")).exists() for h in cgroup_v1_hierarchies())
    assert [p for p in absent_host_paths if Path(p).exists()] == []
