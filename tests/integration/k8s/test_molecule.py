"""The molecule scenarios under extensions/molecule (converge, idempotence, verify) against the real
kube-apiserver of this tier: `molecule test` exits non-zero when a second converge changes anything or an
assertion in verify fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
SCENARIOS = sorted(p.parent.name for p in (REPO / "extensions/molecule").glob("*/molecule.yml"))


def test_every_role_api_side_has_a_scenario():
    assert {"coredns", "cilium", "control_plane"} <= set(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(scenario, apiserver, tmp_path):
    env = {**os.environ, "K8S_AUTH_KUBECONFIG": str(apiserver.kubeconfig),
           "KUBENEST_TEST_SERVICE_CIDR": apiserver.service_cidr, "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
           "MOLECULE_EPHEMERAL_DIRECTORY": str(tmp_path / "molecule"), "ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1"}
    proc = subprocess.run([str(VENV_BIN / "molecule"), "test", "-s", scenario], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    for step in ("converge", "idempotence", "verify"):
        assert f"[{scenario} > {step}] Executed: Successful" in output, output[-3000:]
    # molecule must not install a copy of the collection that would shadow the checkout afterwards
    assert not (Path.home() / ".ansible/collections/ansible_collections/kosmos/kubenest").exists()
