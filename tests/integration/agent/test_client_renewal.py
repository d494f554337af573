"""The operator's agent client certificate re-issued before it expires, and taken by a real agent over mTLS."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import issued_after

from kubenest_agent.config import DEFAULT_CLIENT_NAME
from kubenest_operator.agent_client import CERT_VAR, KEY_VAR, SUPERSEDED_VAR, AgentClientIdentity


def _short_lived_pair(pki_dir, name="short"):
    ca = pki.CertAndKey(pki.load_certificate_pem((pki_dir / "ca.crt").read_bytes()),
                        pki.load_private_key_pem((pki_dir / "ca.key").read_bytes()))
    # 0.0005 days (43 s) of a 5.7 min lifetime: inside its last third at once.
    pair = pki.issue_certificate(ca, DEFAULT_CLIENT_NAME, client=True, validity_days=0.0005)
    (pki_dir / f"{name}.crt").write_bytes(pki.certificate_pem(pair.cert))
    (pki_dir / f"{name}.key").write_bytes(pki.private_key_pem(pair.key))
    return pair


def test_a_due_client_certificate_is_reissued_and_the_agent_accepts_the_new_one(fresh_agent, tmp_path, caplog):
    old = _short_lived_pair(fresh_agent.pki)
    time.sleep(1.1)  # certificates count whole seconds: the re-issue is to be the younger
    site = {CERT_VAR: str(fresh_agent.pki / "short.crt"), KEY_VAR: str(fresh_agent.pki / "short.key"),
            "kubenest_agent_ca_path": str(fresh_agent.pki / "ca"),
            "kubenest_agent_ca_file": str(fresh_agent.pki / "ca.crt"), "other": "kept"}
    identity = AgentClientIdentity(tmp_path / "agent-client")
    logger = logging.getLogger("test")

    chosen = identity.site_vars(site, logger)
    assert chosen[CERT_VAR] == str(tmp_path / "agent-client" / "client.crt") and chosen["other"] == "kept"
    new = pki.load_certificate_pem((tmp_path / "agent-client" / "client.crt").read_bytes())
    assert new.subject == old.cert.subject and pki.renewal_due(new) is None
    assert pki.certificate_not_after(new) > pki.certificate_not_after(old.cert)
    assert (tmp_path / "agent-client").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "agent-client" / "client.key").stat().st_mode & 0o777 == 0o600
    with fresh_agent.client(cert_file=chosen[CERT_VAR], key_file=chosen[KEY_VAR]) as client:
        assert client.health()["ok"]
    # Runs that started with the configured pair may still be going: nothing is retired yet.
    assert SUPERSEDED_VAR not in chosen

    # The next run takes the same re-issued pair; nothing new is issued while it is fresh.
    before = (tmp_path / "agent-client" / "client.crt").read_bytes()
    assert identity.site_vars(site, logger) == chosen
    assert (tmp_path / "agent-client" / "client.crt").read_bytes() == before

    # A run's timeout (an hour here) after the re-issue, runs retire the configured pair on each agent they reach
    # (the connection plugin asks before the first task; see test_superseded_clients for a play doing it).
    previous = tmp_path / "agent-client" / "previous.crt"
    os.utime(previous, (time.time() - 3601, time.time() - 3601))
    later = identity.site_vars(site, logger)
    assert later == {**chosen, SUPERSEDED_VAR: str(previous)}
    assert previous.read_bytes() == Path(site[CERT_VAR]).read_bytes()
    with fresh_agent.client(cert_file=later[CERT_VAR], key_file=later[KEY_VAR]) as client:
        assert client.supersede(issued_after(later[SUPERSEDED_VAR]))["changed"] is True
    with pytest.raises(AgentError, match="superseded"), fresh_agent.client(
            cert_file=site[CERT_VAR], key_file=site[KEY_VAR]) as client:
        client.health()

    # Without the agents' CA nothing can be issued: the configured pair is kept and the log says why.
    with caplog.at_level(logging.WARNING):
        kept = AgentClientIdentity(tmp_path / "other").site_vars(
            {k: v for k, v in site.items() if k != "kubenest_agent_ca_path"}, logger)
    assert kept[CERT_VAR] == site[CERT_VAR]
    assert "cannot re-issue it" in caplog.text and not (tmp_path / "other").exists()


def test_a_pair_in_a_directory_others_may_write_is_not_used(fresh_agent, tmp_path, caplog):
    _short_lived_pair(fresh_agent.pki)
    site = {CERT_VAR: str(fresh_agent.pki / "short.crt"), KEY_VAR: str(fresh_agent.pki / "short.key"),
            "kubenest_agent_ca_path": str(fresh_agent.pki / "ca")}
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with caplog.at_level(logging.WARNING):
        chosen = AgentClientIdentity(shared).site_vars(site, logging.getLogger("test"))
    assert chosen[CERT_VAR] == site[CERT_VAR] and not list(shared.iterdir())
    assert "is not private to the operator" in caplog.text


def test_a_second_reissue_retires_the_first(fresh_agent, tmp_path):
    _short_lived_pair(fresh_agent.pki)
    site = {CERT_VAR: str(fresh_agent.pki / "short.crt"), KEY_VAR: str(fresh_agent.pki / "short.key"),
            "kubenest_agent_ca_path": str(fresh_agent.pki / "ca")}
    directory = tmp_path / "agent-client"
    identity = AgentClientIdentity(directory, retire_after=0)
    time.sleep(1.1)
    first = identity.site_vars(site, logging.getLogger("test"))  # runs retire at once here (retire_after=0)
    assert Path(first[SUPERSEDED_VAR]).read_bytes() == Path(site[CERT_VAR]).read_bytes()
    # The re-issue comes due in its turn (here: replaced by a short-lived one, younger than the configured pair).
    time.sleep(1.1)
    due = _short_lived_pair(fresh_agent.pki, "due")
    for ext in ("crt", "key"):
        (directory / f"client.{ext}").write_bytes((fresh_agent.pki / f"due.{ext}").read_bytes())
    time.sleep(1.1)
    second = identity.site_vars(site, logging.getLogger("test"))
    # The next run re-issues again and names the re-issue it replaces, kept as previous.crt without its key.
    assert second[SUPERSEDED_VAR] == str(directory / "previous.crt")
    assert (directory / "previous.crt").read_bytes() == pki.certificate_pem(due.cert)
    assert sorted(p.name for p in directory.iterdir()) == ["client.crt", "client.key", "previous.crt"]
    with fresh_agent.client(cert_file=second[CERT_VAR], key_file=second[KEY_VAR]) as client:
        assert client.supersede(issued_after(second[SUPERSEDED_VAR]))["changed"] is True
    for retired in ("short", "due"):
        pair = {"cert_file": str(fresh_agent.pki / f"{retired}.crt"),
                "key_file": str(fresh_agent.pki / f"{retired}.key")}
        with pytest.raises(AgentError, match="superseded"), fresh_agent.client(**pair) as c:
            c.health()
