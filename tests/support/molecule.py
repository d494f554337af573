"""`molecule test` of one scenario under extensions/molecule, checked step by step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SCENARIOS_DIR = REPO / "extensions/molecule"
VENV_BIN = Path(sys.executable).parent
# Scenarios that need the sandbox's machines and host cluster: the e2e tier runs them, the others run against the
# integration tier's API server.
SANDBOX_SCENARIOS = frozenset({"etcd", "node_promote"})


def scenarios() -> list[str]:
    return sorted(p.parent.name for p in SCENARIOS_DIR.glob("*/molecule.yml"))


def steps(scenario: str) -> list[str]:
    """The scenario's own test sequence, else the shared one."""
    for path in (SCENARIOS_DIR / scenario / "molecule.yml", SCENARIOS_DIR / "config.yml"):
        sequence = ((yaml.safe_load(path.read_text()) or {}).get("scenario") or {}).get("test_sequence")
        if sequence:
            return sequence
    raise AssertionError(f"no test_sequence for {scenario}")


def molecule_test(scenario: str, workdir: Path, env: dict[str, str], timeout: int = 600) -> str:
    """Run it; fail with the output unless every step of its sequence ran and succeeded. Returns the output."""
    env = {**os.environ, **env, "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
           "MOLECULE_EPHEMERAL_DIRECTORY": str(workdir / "molecule"), "ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1"}
    proc = subprocess.run([str(VENV_BIN / "molecule"), "test", "-s", scenario], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-8000:]
    for step in steps(scenario):
        assert f"[{scenario} > {step}] Executed: Successful" in output, output[-3000:]
    # molecule must not install a copy of the collection that would shadow the checkout afterwards
    assert not (Path.home() / ".ansible/collections/ansible_collections/kosmos/kubenest").exists()
    return output
