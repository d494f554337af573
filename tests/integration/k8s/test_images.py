"""The locally built OCI archives: valid for skopeo, reproducible, importable into and runnable by containerd."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import shutil
import subprocess
import sys
import tarfile
import time

import pytest

from tests.support import k8sbin

pytestmark = pytest.mark.slow
IMAGES = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "pause", "coredns"]
NAMESPACE = "kubenest-images-test"


def load_builder():
    spec = importlib.util.spec_from_file_location("build_images", k8sbin.REPO_ROOT / "sandbox/images/build_images.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def layer_members(archive) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(archive) as outer:
        index = json.load(outer.extractfile("index.json"))
        manifest_digest = index["manifests"][0]["digest"].split(":")[1]
        manifest = json.load(outer.extractfile(f"blobs/sha256/{manifest_digest}"))
        layer_digest = manifest["layers"][0]["digest"].split(":")[1]
        layer = outer.extractfile(f"blobs/sha256/{layer_digest}").read()
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:gz") as inner:
        return {m.name: m for m in inner.getmembers()}


@pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo not installed")
@pytest.mark.parametrize("name", IMAGES)
def test_skopeo_reads_archive(oci_images, name):
    entry = oci_images[name]
    source = f"oci-archive:{entry['path']}:{entry['ref']}"
    config = json.loads(subprocess.run(["skopeo", "inspect", "--config", source], capture_output=True, text=True,
                                       timeout=120, check=True).stdout)
    assert (config["architecture"], config["os"]) == ("amd64", "linux")
    assert config["config"]["Entrypoint"] == [f"/usr/local/bin/{name}"]
    assert config["config"]["User"] == "0:0"
    # What a user inspecting the image reads: which program, which version, built from what.
    labels = config["config"]["Labels"]
    assert labels["org.opencontainers.image.title"] == name
    assert labels["org.opencontainers.image.version"] == entry["ref"].rsplit(":", 1)[1]
    source = labels["org.opencontainers.image.source"]
    expected = {"etcd": "go.etcd.io/etcd/server/v3 ", "coredns": "github.com/coredns/coredns ",
                "pause": "kosmos.kubenest sandbox/images/pause"}.get(name, "k8s.io/kubernetes ")
    assert source.startswith(expected), source
    assert len(config["rootfs"]["diff_ids"]) == 1


@pytest.mark.parametrize("name", IMAGES)
def test_layer_holds_binary_and_minimal_userland(oci_images, name):
    members = layer_members(oci_images[name]["path"])
    binary = members[f"usr/local/bin/{name}"]
    assert binary.isfile() and binary.mode == 0o755
    assert {"etc/passwd", "etc/group"} <= members.keys()
    assert members["tmp"].isdir() and members["tmp"].mode == 0o1777
    assert {m.mtime for m in members.values()} == {0}


def test_archives_are_reproducible(tmp_path, oci_images):
    builder = load_builder()
    pause_binary = oci_images["pause"]["path"].parent / "pause-bin" / "pause"
    spec = builder.ImageSpec("pause", k8sbin.versions()["PAUSE_VERSION"], pause_binary)
    digests = []
    for attempt in ("first", "second"):
        (tmp_path / attempt).mkdir()
        archive = tmp_path / attempt / "pause.oci.tar"
        builder.write_archive(spec, archive)
        digests.append(hashlib.sha256(archive.read_bytes()).hexdigest())
        time.sleep(1.1)  # a timestamp leaking into the archive would now differ
    assert digests[0] == digests[1]
    assert digests[0] == hashlib.sha256(oci_images["pause"]["path"].read_bytes()).hexdigest()


def test_containerd_imports_and_runs_images(containerd, oci_images, pinned_versions):
    for name in ("etcd", "kube-apiserver", "pause", "coredns"):
        containerd.import_image(oci_images[name]["path"], namespace=NAMESPACE)
    refs = containerd.ctr("images", "ls", "-q", namespace=NAMESPACE).stdout.split()
    assert {oci_images[n]["ref"] for n in ("etcd", "kube-apiserver", "pause", "coredns")} <= set(refs)

    # ctr replaces the whole command line when given one; the pause test below relies on the Entrypoint instead.
    etcd = containerd.run(oci_images["etcd"]["ref"], "etcd-version", "/usr/local/bin/etcd", "--version",
                          namespace=NAMESPACE)
    assert etcd.returncode == 0, etcd.stderr
    assert f"etcd Version: {pinned_versions['ETCD_VERSION'].lstrip('v')}" in etcd.stdout

    apiserver = containerd.run(oci_images["kube-apiserver"]["ref"], "apiserver-version",
                               "/usr/local/bin/kube-apiserver", "--version", namespace=NAMESPACE)
    assert apiserver.returncode == 0, apiserver.stderr
    assert apiserver.stdout.strip() == f"Kubernetes {pinned_versions['KUBERNETES_VERSION']}"

    coredns = containerd.run(oci_images["coredns"]["ref"], "coredns-plugins", "/usr/local/bin/coredns", "-plugins",
                             namespace=NAMESPACE)
    assert coredns.returncode == 0, coredns.stderr
    assert {"kubernetes", "forward", "template", "ready"} <= set(coredns.stdout.split())
    version = containerd.run(oci_images["coredns"]["ref"], "coredns-version", "/usr/local/bin/coredns", "-version",
                             namespace=NAMESPACE)
    assert f"CoreDNS-{pinned_versions['COREDNS_VERSION'].lstrip('v')}" in version.stdout


def test_pause_container_exits_cleanly_on_sigterm(containerd, oci_images):
    containerd.import_image(oci_images["pause"]["path"], namespace=NAMESPACE)
    containerd.track_namespace(NAMESPACE)
    # No command: the image's Entrypoint starts pause.
    argv = containerd.ctr_argv("run", "--rm", oci_images["pause"]["ref"], "pause-sigterm", namespace=NAMESPACE)
    foreground = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while "RUNNING" not in containerd.ctr("tasks", "ls", namespace=NAMESPACE).stdout:
            assert time.monotonic() < deadline, "pause container did not start"
            assert foreground.poll() is None, foreground.stdout.read()
            time.sleep(0.2)
        containerd.ctr("tasks", "kill", "--signal", "SIGTERM", "pause-sigterm", namespace=NAMESPACE)
        assert foreground.wait(30) == 0
        assert "pause: terminated" in foreground.stdout.read()
    finally:
        if foreground.poll() is None:
            foreground.kill()
            foreground.wait(10)
