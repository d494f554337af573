"""Fixtures backed by real Kubernetes components built from the pinned versions (`make k8s`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import kubernetes
import pytest

from tests.support import k8sbin
from tests.support.apiserver import ApiServer
from tests.support.virtualclusters import install_crds

startup_seconds: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter):
    for name, seconds in startup_seconds.items():
        terminalreporter.write_line(f"{name} fixture startup: {seconds:.1f}s")


@pytest.fixture(scope="session")
def pinned_versions() -> dict[str, str]:
    return k8sbin.versions()


@pytest.fixture(scope="session")
def k8s_bin_dir():
    try:
        for name in ("etcd", "kube-apiserver"):
            k8sbin.binary(name)
    except FileNotFoundError as e:
        pytest.fail(str(e))
    return k8sbin.bin_dir()


@pytest.fixture(scope="session")
def apiserver(k8s_bin_dir):
    with ApiServer() as api:
        startup_seconds["etcd + kube-apiserver"] = api.startup_seconds
        yield api
    assert not api.apiserver.running() and not api.etcd.running()
    assert not api.workdir.exists()


@pytest.fixture(scope="session")
def api_client(apiserver):
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    yield client
    client.close()


@pytest.fixture(scope="session")
def oci_images(k8s_bin_dir) -> dict[str, dict]:
    """The OCI archives from sandbox/images/build_images.py (built on first use, cached afterwards)."""
    result = subprocess.run([sys.executable, str(k8sbin.REPO_ROOT / "sandbox/images/build_images.py")],
                            capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr
    images_dir = Path(result.stdout.strip().splitlines()[-1])
    catalog = json.loads((images_dir / "images.json").read_text())
    for entry in catalog.values():
        entry["path"] = images_dir / entry["archive"]
    return catalog


@pytest.fixture(scope="session")
def kosmos_crds(apiserver) -> None:
    """The kosmos.io CRDs, installed once through the collection's own playbook."""
    install_crds(apiserver.kubeconfig)
