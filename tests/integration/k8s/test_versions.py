"""Each built binary reports the pinned version from versions.env."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import k8sbin

KUBERNETES_COMMANDS = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"]


def run(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


@pytest.mark.parametrize("name", KUBERNETES_COMMANDS)
def test_kubernetes_component_version(k8s_bin_dir, pinned_versions, name):
    assert run([str(k8sbin.binary(name)), "--version"]).strip() == f"Kubernetes {pinned_versions['KUBERNETES_VERSION']}"


def test_kubeadm_version(k8s_bin_dir, pinned_versions):
    # kubeadm has a `version` subcommand instead of a --version flag.
    assert run([str(k8sbin.binary("kubeadm")), "version", "-o", "short"]).strip() == \
        pinned_versions["KUBERNETES_VERSION"]


def test_etcd_version(k8s_bin_dir, pinned_versions):
    first_line = run([str(k8sbin.binary("etcd")), "--version"]).splitlines()[0]
    assert first_line == f"etcd Version: {pinned_versions['ETCD_VERSION'].lstrip('v')}"
