"""The nodes a promotion or return run adds to its inventory are pinned to the agent certificates their
GlobalNodes record, through the real agent over mutual TLS: an agent presenting a certificate the agents' CA signed
but the GlobalNode no longer lists (the copy a tenant's root kept of a re-keyed node's key) is refused."""

from __future__ import annotations

import hashlib

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from sandbox.machines.config import REPO_ROOT
from tests.support.agentproc import AgentProcess, shutdown_muxes
from tests.support.playbook import run_playbook

INVENTORY_TASKS = REPO_ROOT / "roles/node_promote/tasks/inventory.yml"


@pytest.fixture
def node(tmp_path):
    agent = AgentProcess.with_fresh_pki(tmp_path / "node").start()
    files = agent.client_files
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"kubenest_agent_ca_file": files["ca_file"], "kubenest_agent_cert_file": files["cert_file"],
                 "kubenest_agent_key_file": files["key_file"], "ansible_port": agent.port,
                 "ansible_python_interpreter": "/usr/bin/python3"},
        "hosts": {"localhost": {"ansible_connection": "local"}}}}))
    served = x509.load_pem_x509_certificate((agent.pki / "node1.crt").read_bytes()).public_bytes(Encoding.DER)
    yield inventory, hashlib.sha256(served).hexdigest()
    shutdown_muxes(tmp_path / "control")
    agent.stop()


def _run(tmp_path, inventory, pins: list[str], group: str):
    joining, leaving = (["node1"], []) if group == "kubenest_promote" else ([], ["node1"])
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([
        {"name": "controller", "hosts": "localhost", "gather_facts": False, "tasks": [
            {"name": "add", "ansible.builtin.include_tasks": str(INVENTORY_TASKS),
             "vars": {"node_promote_joining": joining, "node_promote_leaving": leaving,
                      "node_promote_nodes": {"node1": {"nodeIP": "127.0.0.1", "agentCertificates": pins}}}}]},
        {"name": "node", "hosts": group, "gather_facts": False, "tasks": [
            {"name": "t", "ansible.builtin.ping": {}}]},
    ]))
    return run_playbook(play, inventory, tmp_path / "control")


@pytest.mark.parametrize("group", ["kubenest_promote", "kubenest_return"])
def test_an_agent_the_globalnode_no_longer_lists_is_refused(node, tmp_path, group):
    inventory, served = node
    result = _run(tmp_path, inventory, ["00" * 32], group)
    assert result.host_stats()["unreachable"] == 1
    assert "not the one recorded for it" in result.task("t")["msg"]


@pytest.mark.parametrize("pins", [["recorded"], ["other", "recorded"], []], ids=["recorded", "switching", "none"])
def test_the_recorded_agent_or_any_the_ca_signed_when_none_is_recorded_is_reached(node, tmp_path, pins):
    inventory, served = node
    pins = [served if pin == "recorded" else "11" * 32 for pin in pins]
    result = _run(tmp_path, inventory, pins, "kubenest_promote")
    assert result.rc == 0, result.stderr
    assert result.task("t")["ping"] == "pong"
