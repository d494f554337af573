"""The collection tarball holds the collection alone (galaxy.yml build_ignore)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TOP_LEVEL = {"FILES.json", "MANIFEST.json", "README.md", "changelogs", "deploy", "docs", "meta", "playbooks",
             "plugins", "roles"}


def test_tarball_holds_only_the_collection(tmp_path):
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-galaxy"), "collection", "build",
                           "--output-path", str(tmp_path), str(REPO)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tarball,) = tmp_path.glob("kosmos-kubenest-*.tar.gz")
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert {n.split("/")[0] for n in names} == TOP_LEVEL
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or "/tests/output" in n]
    for needed in ("meta/runtime.yml", "playbooks/virtualcluster.yml", "plugins/connection/nodeagent.py",
                   "roles/node_promote/meta/argument_specs.yml", "deploy/crds"):
        assert any(n == needed or n.startswith(needed + "/") for n in names), needed
