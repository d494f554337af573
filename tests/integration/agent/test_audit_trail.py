"""The agent's audit lines leave the node: taken by the connection helper into the controller's audit directory.

The attacker is a root process on a node given to a tenant, rewriting the agent's audit file after the fact.
"""

from __future__ import annotations

import json

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentOpError

from kubenest_agent.devpki import ensure_dev_pki
from tests.support.agentproc import AgentProcess, shutdown_muxes
from tests.support.playbook import run_playbook, write_inventory, write_play


def _kept(directory, node="node1") -> list[dict]:
    path = directory / f"{node}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_agent_answers_its_lines_after_a_cursor(fresh_agent):
    with fresh_agent.client() as client:
        client.exec(argv=["/bin/true"])
        described, lines = client.audit()
        events = [json.loads(line) for line in lines.splitlines()]
        assert described["count"] == len(events) and described["last"] == events[-1]["seq"]
        assert described["missed"] == 0 and described["restarted"] is False and described["more"] is False
        assert [e["seq"] for e in events] == list(range(events[0]["seq"], described["last"] + 1))
        assert "exec" in {e["event"] for e in events}
        # Nothing new since: nothing again, and asking is not itself a line.
        again, none = client.audit(described["boot"], described["last"])
        assert (again["count"], none, again["last"]) == (0, b"", described["last"])
        # Another start's cursor: everything kept, marked as a restart.
        other, everything = client.audit("another-start", 3)
        assert other["restarted"] is True and everything == lines
        for bad in ({"after": -1}, {"after": "1"}, {"boot": 5}):
            with pytest.raises(AgentOpError, match="bad_request"):
                client._send({"op": "audit", "id": "bad", **bad})
                client._next("bad")
    # The on-node file carries the same numbered lines.
    assert [e["seq"] for e in fresh_agent.audit_events() if e["event"] == "exec"] == [
        e["seq"] for e in events if e["event"] == "exec"]


def test_a_play_keeps_the_nodes_audit_off_the_node_once_and_says_what_it_missed(fresh_agent, tmp_path):
    control, audit_dir = tmp_path / "control", tmp_path / "audit"
    inventory = write_inventory(tmp_path / "inventory.yml", fresh_agent, kubenest_agent_audit_dir=str(audit_dir))
    play = write_play(tmp_path / "play.yml", [{"name": "marker", "ansible.builtin.command": "true",
                                               "changed_when": False}])
    try:
        assert run_playbook(play, inventory, control).rc == 0
    finally:
        shutdown_muxes(control)  # the helper takes the last lines on its way out
    first = _kept(audit_dir)
    assert first and all(e["node"] == "node1" for e in first)
    assert {"connect", "exec"} <= {e["event"] for e in first}
    assert (audit_dir / "node1.jsonl").stat().st_mode & 0o777 == 0o600

    # A root process on the node rewrites the agent's file: what the controller kept is untouched.
    fresh_agent.audit_log.write_text("")
    assert _kept(audit_dir) == first

    # The next play takes only what is new: no line twice.
    try:
        assert run_playbook(play, inventory, control).rc == 0
    finally:
        shutdown_muxes(control)
    second = _kept(audit_dir)
    seqs = [e["seq"] for e in second]
    assert second[:len(first)] == first and len(seqs) == len(set(seqs)) and len(second) > len(first)

    # The agent restarted in between (its memory, and whatever happened before it, gone): said, not hidden.
    fresh_agent.stop()
    fresh_agent.start()
    try:
        assert run_playbook(play, inventory, control).rc == 0
    finally:
        shutdown_muxes(control)
    third = _kept(audit_dir)[len(second):]
    gap = [e for e in third if e["event"] == "audit_gap"]
    assert len(gap) == 1 and gap[0]["restarted"] is True and gap[0]["boot"] != second[-1]["boot"]
    assert third[0] is not None and "exec" in {e["event"] for e in third}


def test_a_task_delegated_to_another_node_lands_in_that_nodes_record(fresh_agent, tmp_path):
    """Ansible keeps inventory_hostname the delegating host's on a delegated task: the record goes by the name the
    agent's certificate carries instead, else one node's lines would be kept (and replayed) as another's."""
    ensure_dev_pki(fresh_agent.pki, "node2", ["127.0.0.1"])
    other = AgentProcess(pki=fresh_agent.pki, state_dir=tmp_path / "state2", audit_log=tmp_path / "audit2.log",
                         node="node2").start()
    control, audit_dir = tmp_path / "control", tmp_path / "audit"
    inventory = write_inventory(tmp_path / "inventory.yml", fresh_agent, kubenest_agent_audit_dir=str(audit_dir))
    hosts = yaml.safe_load(inventory.read_text())
    hosts["all"]["hosts"]["node2"] = {"ansible_host": "127.0.0.1", "ansible_port": other.port,
                                      "kubenest_agent_audit_dir": str(audit_dir)}
    inventory.write_text(yaml.safe_dump(hosts))
    play = write_play(tmp_path / "play.yml", [
        {"name": "on node1", "ansible.builtin.command": "true", "changed_when": False},
        {"name": "on node2, for node1", "ansible.builtin.command": "true", "changed_when": False,
         "delegate_to": "node2"}], hosts="node1")
    try:
        assert run_playbook(play, inventory, control).rc == 0
    finally:
        shutdown_muxes(control)
        other.stop()
    mine, theirs = _kept(audit_dir, "node1"), _kept(audit_dir, "node2")
    assert "exec" in {e["event"] for e in mine} and "exec" in {e["event"] for e in theirs}
    assert len({e["boot"] for e in mine}) == 1 and len({e["boot"] for e in theirs}) == 1
    assert {e["boot"] for e in mine} != {e["boot"] for e in theirs}
    assert all(e["node"] == "node2" for e in theirs)
