"""A re-issued agent certificate: taken up on SIGHUP without dropping connections, and with the new certificate
pinned the old one is refused, while the CA alone would still accept it."""

import signal
import time

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentUnreachable
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import fingerprint, normalize_pins
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from kubenest_agent import devpki
from tests.support.agentproc import shutdown_muxes
from tests.support.playbook import run_playbook, write_inventory, write_play


def _served(agent) -> str:
    return fingerprint(x509.load_pem_x509_certificate((agent.pki / "node1.crt").read_bytes())
                       .public_bytes(Encoding.DER))


def _reissue(agent) -> None:
    ca_cert, ca_key = devpki.load_pair(agent.pki, "ca")
    cert, key = devpki.issue(ca_cert, ca_key, "node1", server=True, dns=["node1"], ips=["127.0.0.1"])
    devpki.write_pair(agent.pki, "node1", cert, key)


def _reload(agent, ok: bool) -> None:
    since = time.time()
    agent.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        events = [e for e in agent.audit_events() if e["event"] == "reload" and e["ts"] >= since - 1]
        if events:
            assert events[-1]["ok"] is ok, events[-1]
            return
        time.sleep(0.05)
    raise AssertionError("the agent did not record the reload")


def test_sighup_takes_up_the_new_certificate_and_the_pin_refuses_the_old(fresh_agent):
    old = _served(fresh_agent)
    with fresh_agent.client(pin=[old]) as before:
        _reissue(fresh_agent)
        new = _served(fresh_agent)
        assert new != old
        _reload(fresh_agent, ok=True)
        assert before.health()["ok"]  # a connection opened before the reload goes on
    with fresh_agent.client(pin=[f"sha256:{new.upper()}"]) as after:
        assert after.health()["ok"]
    with pytest.raises(AgentUnreachable, match="not the one recorded for it"):
        fresh_agent.client(pin=[old])
    with fresh_agent.client(pin=[old, new]) as during:  # both pinned while a rotation is under way
        assert during.health()["ok"]


def test_a_pair_that_does_not_load_keeps_the_old_certificate(fresh_agent):
    old = _served(fresh_agent)
    (fresh_agent.pki / "node1.key").write_text("not a key\n")
    _reload(fresh_agent, ok=False)
    with fresh_agent.client(pin=[old]) as c:
        assert c.health()["ok"]


def test_pins_are_checked_for_their_form():
    assert normalize_pins("sha256:" + ":".join(["AB"] * 32) + ", ") == ("ab" * 32,)
    with pytest.raises(ValueError, match="not a SHA-256 certificate fingerprint"):
        normalize_pins(["abc"])


def test_the_connection_plugin_refuses_an_agent_that_is_not_the_pinned_one(fresh_agent, tmp_path):
    control = tmp_path / "control"
    play = write_play(tmp_path / "play.yml", [{"name": "t", "ansible.builtin.ping": {}}])
    try:
        right = write_inventory(tmp_path / "right.yml", fresh_agent, kubenest_agent_cert_sha256=[_served(fresh_agent)])
        assert run_playbook(play, right, control).rc == 0
        wrong = write_inventory(tmp_path / "wrong.yml", fresh_agent, kubenest_agent_cert_sha256=["00" * 32])
        result = run_playbook(play, wrong, control)
        assert result.host_stats()["unreachable"] == 1
        assert "not the one recorded for it" in result.task("t")["msg"]
        bad = write_inventory(tmp_path / "bad.yml", fresh_agent, kubenest_agent_cert_sha256=["xyz"])
        result = run_playbook(play, bad, control)
        assert result.host_stats()["failures"] + result.host_stats()["unreachable"] == 1
        assert "not a SHA-256 certificate fingerprint" in result.task("t")["msg"]
    finally:
        shutdown_muxes(control)
