"""Mutual TLS is mandatory: every way of not being the allowed controller is refused and logged."""

import datetime as dt
import ssl
import time

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import WebSocketTransport
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentUnreachable

from kubenest_agent import devpki


def _issue_client(agent, tmp_path, cn="kubenest-controller", **validity):
    ca_cert, ca_key = devpki.load_pair(agent.pki, "ca")
    cert, key = devpki.issue(ca_cert, ca_key, cn, server=False, **validity)
    devpki.write_pair(tmp_path, cn, cert, key)
    return {"cert_file": str(tmp_path / f"{cn}.crt"), "key_file": str(tmp_path / f"{cn}.key")}


def _refusals(agent, since):
    time.sleep(0.2)  # the audit line is written as the agent drops the connection
    return [e for e in agent.audit_events() if e["event"] == "refused" and e["ts"] >= since - 1]


def _assert_refused(agent, since, connect, message):
    with pytest.raises(AgentUnreachable, match=message):
        connect()
    assert _refusals(agent, since), "the refusal was not written to the audit log"
    with agent.client() as c:  # and the agent keeps serving everyone else
        assert c.health()["ok"]


def test_no_client_certificate(agent):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(agent.client_files["ca_file"])
    since = time.time()
    _assert_refused(agent, since, lambda: WebSocketTransport(f"wss://127.0.0.1:{agent.port}/", ctx, "127.0.0.1"),
                    "did not accept our client certificate")
    assert "TLS handshake failed" in _refusals(agent, since)[-1]["reason"]


def test_certificate_from_another_ca(agent, tmp_path):
    other = tmp_path / "other"
    devpki.ensure_dev_pki(other, "x")
    since = time.time()
    files = {"cert_file": str(other / "client.crt"), "key_file": str(other / "client.key")}
    _assert_refused(agent, since, lambda: agent.client(**files), "did not accept our client certificate")


def test_expired_certificate(agent, tmp_path):
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    files = _issue_client(agent, tmp_path, not_before=past, not_after=past + dt.timedelta(days=1))
    since = time.time()
    _assert_refused(agent, since, lambda: agent.client(**files), "did not accept our client certificate")
    assert "expired" in _refusals(agent, since)[-1]["reason"]


def test_identity_not_on_allow_list(agent, tmp_path):
    files = _issue_client(agent, tmp_path, cn="intruder")
    since = time.time()
    _assert_refused(agent, since, lambda: agent.client(**files), "HTTP 403.*'intruder' is not allowed")
    assert _refusals(agent, since)[-1]["peer"] == "intruder"


def test_agent_not_trusted_by_client(agent, tmp_path):
    other = tmp_path / "other"
    devpki.ensure_dev_pki(other, "x")
    with pytest.raises(AgentUnreachable, match="is not trusted"):
        agent.client(ca_file=str(other / "ca.crt"))


def test_server_name_must_match_certificate(agent):
    with pytest.raises(AgentUnreachable, match="is not trusted.*(mismatch|match)"):
        agent.client(server_name="not-node1")


def test_no_plaintext_mode(agent):
    since = time.time()
    with pytest.raises(AgentUnreachable):
        WebSocketTransport(f"ws://127.0.0.1:{agent.port}/", None, None, open_timeout=5)
    assert _refusals(agent, since)


def test_unreachable_port_names_the_cause(agent):
    from tests.support.agentproc import free_port

    with pytest.raises(AgentUnreachable, match="refused"):
        agent.client.__func__(type("A", (), {"client_files": agent.client_files, "port": free_port()})())


def test_the_agent_issues_no_session_tickets(agent):
    # A TLS 1.3 ticket arriving while the threaded client writes its upgrade request made OpenSSL lose the
    # request now and then (a connection that timed out with nothing received); no client resumes anyway.
    with agent.client() as c:
        assert c.health()["ok"]
        session = c.transport.ws.socket.session
        assert session is not None and not session.has_ticket
