"""The collection as users get it: the built tarball holds the collection alone, declares the collections it
uses, and, installed into a clean virtualenv with only the Python packages it declares, drives a real agent
through its connection plugin with a playbook of the installed collection (not this checkout)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.support.agentproc import AgentProcess, shutdown_muxes
from tests.support.awx import definitions
from tests.support.collection_install import build_tarball, clean_env
from tests.support.collection_install import clean_install as install_collection
from tests.support.playbook import write_inventory

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
TOP_LEVEL = {"MANIFEST.json", "FILES.json", "README.md", "CHANGELOG.rst", "LICENSE", "requirements.txt",
             "versions.env", "plugins", "roles",
             "playbooks", "meta", "docs", "changelogs", "deploy", "dashboards"}
MUST_HOLD = ("versions.env", "dashboards/kubenest.json", "docs/metrics.md", "plugins/connection/nodeagent.py",
             "plugins/plugin_utils/agent/mux.py",
             "requirements.txt",
             "meta/runtime.yml", "deploy/crds/kosmos.io_virtualclusters.yaml", "playbooks/virtualcluster.yml",
             "roles/node_promote/meta/argument_specs.yml")
FQCN = re.compile(r"\b([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*\b")


@pytest.fixture(scope="module")
def tarball(tmp_path_factory) -> Path:
    return build_tarball(tmp_path_factory.mktemp("dist"))


def test_the_tarball_holds_the_collection_alone(tarball):
    with tarfile.open(tarball) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
    names = [m.name for m in members]
    # The license at the path every source file's header names, as a link to the one file.
    assert links == {"LICENSES/GPL-3.0-or-later.txt": "../LICENSE"}
    assert {n.split("/", 1)[0] for n in names} == TOP_LEVEL
    leftovers = [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".orig", ".rej", "~", ".log"))]
    assert not leftovers
    assert not [n for n in MUST_HOLD if n not in names]
    print(f"\n{tarball.name}: {tarball.stat().st_size / 1024:.0f} KiB, {len(names)} files")


def test_the_declared_collections_are_the_ones_used():
    """Every collection named by FQCN in roles, playbooks and plugins is declared, and nothing else is."""
    available = _dev_collections()
    declared = set(yaml.safe_load((REPO / "galaxy.yml").read_text())["dependencies"])
    used = set()
    for path in [*REPO.glob("roles/**/*.yml"), *REPO.glob("playbooks/**/*.yml"), *REPO.glob("plugins/**/*.py")]:
        text = path.read_text()
        # Python names its collections by import path; `ansible.utils.x` there is ansible-core's own package
        candidates = (re.findall(r"ansible_collections\.(\w+)\.(\w+)", text) if path.suffix == ".py"
                      else FQCN.findall(text))
        used |= {f"{a}.{b}" for a, b in candidates if (a, b) != ("kosmos", "kubenest") and f"{a}.{b}" in available}
    assert used == declared


def _dev_collections() -> set[str]:
    root = next((VENV_BIN.parent / "lib").glob("python*/site-packages/ansible_collections"))
    return {f"{ns.name}.{c.name}" for ns in root.iterdir() if ns.is_dir() for c in ns.iterdir() if c.is_dir()}


@pytest.fixture(scope="module")
def clean_install(tarball, tmp_path_factory) -> dict:
    """A virtualenv with ansible-core and the collection's declared Python requirements only; the collection
    from the tarball (--no-deps) and its declared collections copied from the `ansible` package."""
    return install_collection(tarball, tmp_path_factory.mktemp("clean"))


def test_the_installed_collection_drives_a_real_agent(clean_install, tmp_path):
    agent = AgentProcess.with_fresh_pki(tmp_path / "node").start()
    control = tmp_path / "control"
    inventory = write_inventory(tmp_path / "inventory.yml", agent)
    env = {**clean_install["env"], "KUBENEST_AGENT_CONTROL_DIR": str(control),
           "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_NOCOLOR": "1"}
    try:
        proc = subprocess.run([str(clean_install["venv"] / "bin/ansible-playbook"), "-i", str(inventory),
                               "kosmos.kubenest.agent_check"], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300, check=False)
    finally:
        shutdown_muxes(control)
        agent.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    facts = tasks[0]["hosts"]["node1"]["ansible_facts"]
    assert tasks[1]["hosts"]["node1"]["msg"].startswith(f"node1: Linux {facts['ansible_kernel']}")
    assert any(e["event"] == "exec" for e in agent.audit_events())


def test_the_clean_install_sees_only_the_tarball(clean_install):
    """The run above used the installed copy: the clean venv has no agent package and no link to this
    checkout, and the only kosmos.kubenest it knows is the one installed from the tarball."""
    python = str(clean_install["venv"] / "bin/python")
    probe = subprocess.run([python, "-c", "import kubenest_agent"], capture_output=True, env=clean_install["env"],
                           check=False)
    assert probe.returncode != 0
    listed = subprocess.run([str(clean_install["venv"] / "bin/ansible-galaxy"), "collection", "list",
                             "kosmos.kubenest", "--format", "json"], capture_output=True, text=True,
                            env=clean_install["env"], check=True)
    assert list(json.loads(listed.stdout)) == [str(clean_install["collection"].parents[1])]


def test_ansible_builder_reads_the_collections_python_requirements(clean_install):
    """What an execution environment build installs for the collection: meta/execution-environment.yml."""
    colls = clean_install["collection"].parents[2]
    proc = subprocess.run([str(VENV_BIN / "ansible-builder"), "introspect", str(colls)], capture_output=True,
                          text=True, check=True, env=clean_env(PATH=os.environ["PATH"]))
    found = yaml.safe_load(proc.stdout.split("---", 1)[1])["python"]
    ours = sorted(line.split("#")[0].strip() for line in found if line.endswith("# from collection kosmos.kubenest"))
    declared = sorted(line.strip() for line in (REPO / "requirements.txt").read_text().splitlines()
                      if line.strip() and not line.startswith("#"))
    assert ours == declared


def test_the_awx_execution_environment_definition_builds_a_context(tarball, tmp_path):
    awx = tmp_path / "awx"
    shutil.copytree(REPO / "awx", awx)
    shutil.copy(tarball, awx)
    # The node agent's wheel, as awx/execution-environment.yml says to build it.
    subprocess.run([str(VENV_BIN / "python"), "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(awx), str(REPO / "agent")], check=True, timeout=300)
    agent_wheel = next(awx.glob("kubenest_agent-*.whl"))
    proc = subprocess.run([str(VENV_BIN / "ansible-builder"), "create", "-f", str(awx / "execution-environment.yml"),
                           "--context", str(tmp_path / "context")], capture_output=True, text=True, check=False,
                          env=clean_env(PATH=os.environ["PATH"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    context = tmp_path / "context"
    assert (context / "_build/collections" / tarball.name).is_file()
    containerfile = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.exists()).read_text()
    assert "collection install --no-deps -p /usr/share/ansible/collections" in containerfile
    # The install-the-agent template's default wheelhouse is made in the image.
    assert (context / "_build/agent" / agent_wheel.name).is_file()
    install = next(t for t in definitions()["kubenest_awx_job_templates"]
                   if t["playbook"] == "playbooks/install_agent.yml")
    wheelhouse = next(q["default"] for q in install["survey"] if q["variable"] == "kubenest_agent_wheelhouse")
    assert f"pip wheel -w {wheelhouse} /tmp/kubenest-agent/kubenest_agent-*.whl" in containerfile
    wanted = {c["name"] for c in yaml.safe_load((context / "_build/requirements.yml").read_text())["collections"]}
    assert wanted == set(yaml.safe_load((REPO / "galaxy.yml").read_text())["dependencies"])
