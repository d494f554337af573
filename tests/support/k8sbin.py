"""Where the locally built Kubernetes binaries and OCI images live (see sandbox/k8s and sandbox/images)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def versions() -> dict[str, str]:
    pins = {}
    for line in (REPO_ROOT / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            pins[key.strip()] = value.strip()
    return pins


def pause_image() -> str:
    return f"kubenest.local/pause:{versions()['PAUSE_VERSION']}"


def cache_dir() -> Path:
    return Path(os.environ.get("KUBENEST_CACHE") or Path.home() / ".cache" / "kubenest")


def bin_dir() -> Path:
    """Same layout as sandbox/k8s/build.sh."""
    pins = versions()
    return cache_dir() / "k8s" / f"{pins['KUBERNETES_VERSION']}-etcd-{pins['ETCD_VERSION']}" / "bin"


def binary(name: str) -> Path:
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} is missing; build the pinned binaries with `make k8s`")
    return path
