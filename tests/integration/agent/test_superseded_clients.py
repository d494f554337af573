"""A re-issued client certificate retires its predecessor on a real agent over mTLS.

The attacker here holds a copy of an old controller key that the agents' CA still vouches for: once a run with
the successor has reached the agent, the copy is refused at the handshake, open connections made with it are
closed, and the copy can neither undo that nor lock out its successor.
"""

from __future__ import annotations

import shutil
import time

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import issued_after

from kubenest_agent.config import DEFAULT_CLIENT_NAME
from tests.support.agentproc import shutdown_muxes
from tests.support.playbook import run_playbook, write_inventory, write_play

REFUSED = "superseded by a newer one"


def _pair(agent, name: str) -> dict:
    """A client pair for the controller's name from the agents' CA, issued now (certificates count whole seconds,
    so callers wait a second between pairs that must differ in age)."""
    ca = pki.CertAndKey(pki.load_certificate_pem((agent.pki / "ca.crt").read_bytes()),
                        pki.load_private_key_pem((agent.pki / "ca.key").read_bytes()))
    pair = pki.issue_certificate(ca, DEFAULT_CLIENT_NAME, client=True, validity_days=1)
    (agent.pki / f"{name}.crt").write_bytes(pki.certificate_pem(pair.cert))
    (agent.pki / f"{name}.key").write_bytes(pki.private_key_pem(pair.key))
    return {"cert_file": str(agent.pki / f"{name}.crt"), "key_file": str(agent.pki / f"{name}.key")}


@pytest.fixture
def old_and_new(fresh_agent):
    old = _pair(fresh_agent, "old")
    time.sleep(1.1)
    return old, _pair(fresh_agent, "new")


def _refused(agent, pair) -> str:
    with pytest.raises(AgentError) as caught, agent.client(**pair) as client:
        client.health()
    return str(caught.value)


def test_the_successor_retires_its_predecessor_and_open_connections_with_it(fresh_agent, old_and_new):
    old, new = old_and_new
    with fresh_agent.client(**old) as client:
        assert client.health()["ok"]  # the CA vouches for both while nothing is superseded
    copied = fresh_agent.client(**old)  # the attacker's connection, open before the successor's run
    assert copied.health()["ok"]

    with fresh_agent.client(**new) as client:
        answer = client.supersede(issued_after(old["cert_file"]))
        assert answer["changed"] is True
        with pytest.raises(AgentError):
            copied.health()  # closed by the agent when the mark moved
        assert client.health()["ok"]
        assert client.supersede(issued_after(old["cert_file"]))["changed"] is False  # idempotent

    assert REFUSED in _refused(fresh_agent, old)
    assert REFUSED in _refused(fresh_agent, {"cert_file": str(fresh_agent.pki / "client.crt"),
                                             "key_file": str(fresh_agent.pki / "client.key")})  # older still
    with fresh_agent.client(**new) as client:
        assert client.health()["ok"]
    refusals = [e for e in fresh_agent.audit_events() if e["event"] == "refused"]
    assert refusals and all(e["reason"] == "client certificate superseded by a newer one" for e in refusals)
    assert [e["reason"] for e in fresh_agent.audit_events() if e["event"] == "closed"] == [
        "client certificate superseded"]

    # The mark is kept across a restart (which checks readiness with the default pair: the successor, now).
    shutil.copy(new["cert_file"], fresh_agent.pki / "client.crt")
    shutil.copy(new["key_file"], fresh_agent.pki / "client.key")
    fresh_agent.stop()
    fresh_agent.start()
    assert REFUSED in _refused(fresh_agent, old)
    with fresh_agent.client(**new) as client:
        assert client.health()["ok"]


def test_an_old_key_cannot_lock_out_its_successor(fresh_agent, old_and_new):
    old, new = old_and_new
    with fresh_agent.client(**old) as client:
        # Asked to refuse everything up to a far future, the agent stops at the old certificate's own age.
        answer = client.supersede(int(time.time()) + 10 * 365 * 86400)
        assert answer["before"] == issued_after(old["cert_file"]) - 1
    with fresh_agent.client(**new) as client:
        assert client.health()["ok"]
        assert client.supersede(issued_after(old["cert_file"]))["changed"] is True
    assert REFUSED in _refused(fresh_agent, old)


def test_a_bad_request_changes_nothing(fresh_agent, old_and_new):
    old, new = old_and_new
    with fresh_agent.client(**new) as client:
        for before in ("soon", None, True, 1.5):
            with pytest.raises(AgentError, match="supersede needs 'before'"):
                client.supersede(before)
    with fresh_agent.client(**old) as client:
        assert client.health()["ok"]


def test_a_play_with_the_successor_retires_the_predecessor_on_the_node(fresh_agent, old_and_new, tmp_path):
    old, new = old_and_new
    control = tmp_path / "control"
    inventory = write_inventory(tmp_path / "inventory.yml", fresh_agent, kubenest_agent_cert_file=new["cert_file"],
                                kubenest_agent_key_file=new["key_file"],
                                kubenest_agent_superseded_cert_file=old["cert_file"])
    play = write_play(tmp_path / "play.yml", [{"name": "ping", "ansible.builtin.ping": {}}])
    try:
        result = run_playbook(play, inventory, control)
        assert result.rc == 0, result.stderr
    finally:
        shutdown_muxes(control)
    assert REFUSED in _refused(fresh_agent, old)
    supersedes = [e for e in fresh_agent.audit_events() if e["event"] == "supersede"]
    assert [(e["changed"], e["before"]) for e in supersedes] == [(True, issued_after(old["cert_file"]))]

    # The predecessor's own play now fails, naming why.
    inventory = write_inventory(tmp_path / "old.yml", fresh_agent, kubenest_agent_cert_file=old["cert_file"],
                                kubenest_agent_key_file=old["key_file"])
    try:
        result = run_playbook(play, inventory, control)
    finally:
        shutdown_muxes(control)
    assert result.rc != 0 and result.host_stats()["unreachable"] == 1
    assert REFUSED in result.task("ping")["msg"]


def test_a_play_does_not_supersede_with_a_certificate_of_another_name(fresh_agent, old_and_new, tmp_path):
    old, new = old_and_new
    ca = pki.CertAndKey(pki.load_certificate_pem((fresh_agent.pki / "ca.crt").read_bytes()),
                        pki.load_private_key_pem((fresh_agent.pki / "ca.key").read_bytes()))
    (tmp_path / "other.crt").write_bytes(pki.certificate_pem(pki.issue_certificate(ca, "someone-else", client=True,
                                                                                   validity_days=1).cert))
    control = tmp_path / "control"
    inventory = write_inventory(tmp_path / "inventory.yml", fresh_agent, kubenest_agent_cert_file=new["cert_file"],
                                kubenest_agent_key_file=new["key_file"],
                                kubenest_agent_superseded_cert_file=str(tmp_path / "other.crt"))
    try:
        result = run_playbook(write_play(tmp_path / "play.yml", [{"name": "ping", "ansible.builtin.ping": {}}]),
                              inventory, control)
        assert result.rc == 0, result.stderr
    finally:
        shutdown_muxes(control)
    assert not [e for e in fresh_agent.audit_events() if e["event"] == "supersede"]
    with fresh_agent.client(**old) as client:
        assert client.health()["ok"]
