"""Connections in their TLS handshake are bounded in total and per address; refusals are summarised."""

from __future__ import annotations

import logging

from kubenest_agent import admission
from kubenest_agent.admission import HandshakeGate


def test_caps_per_address_and_in_total():
    gate = HandshakeGate(max_pending=3, per_address=2)
    assert gate.admit("a") and gate.admit("a")
    assert not gate.admit("a")  # third from one address
    assert gate.admit("b")
    assert not gate.admit("c")  # total reached
    gate.done("a")
    assert gate.admit("c")
    for address in ("a", "b", "c"):
        gate.done(address)
    assert gate.pending == 0 and gate._by_address == {}


def test_refusals_are_audited_once_per_interval_with_a_count(caplog, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(admission.time, "monotonic", lambda: clock[0])
    gate = HandshakeGate(max_pending=0, per_address=0)
    with caplog.at_level(logging.INFO, logger="kubenest_agent.audit"):
        for _attempt in range(50):
            assert not gate.admit("10.0.0.9")
        clock[0] += 1.5
        assert not gate.admit("10.0.0.9")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert '"count":1' in lines[0] and '"count":50' in lines[1]


def test_discarded_connections_trigger_a_collection(monkeypatch):
    collections = []
    monkeypatch.setattr(admission.gc, "collect", lambda: collections.append(1))
    gate = HandshakeGate()
    for _refused in range(admission.GC_EVERY * 3 - 1):
        gate.discarded()
    assert len(collections) == 2
