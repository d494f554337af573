"""Malformed input gets a clear protocol error; the agent keeps serving."""

import json
import struct

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.protocol import (
    MAX_FRAME,
    MAX_HEADER,
    SUBPROTOCOL,
    decode,
    encode,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import client_context
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import connect


@pytest.fixture
def raw(agent):
    files = agent.client_files
    ctx = client_context(files["ca_file"], files["cert_file"], files["key_file"])
    with connect(f"wss://127.0.0.1:{agent.port}/", ssl=ctx, subprotocols=[SUBPROTOCOL],
                 max_size=None, compression=None) as ws:
        yield ws


def _error(ws):
    header, _payload = decode(ws.recv(5))
    assert header["op"] == "error", header
    return header


@pytest.mark.parametrize(("message", "code"), [
    ("a text message", "bad_frame"),
    (b"\x01", "bad_frame"),
    (struct.pack(">I", 9) + b"not json!", "bad_frame"),
    (struct.pack(">I", MAX_HEADER + 1) + b"{}", "header_too_large"),
    (encode({"op": "launch-missiles", "id": 1}), "unknown_op"),
    (encode({"op": "exec"}), "bad_frame"),
    (encode({"op": "data", "id": "never-opened"}), "unknown_id"),
    (encode({"op": "exec", "id": 2, "argv": "not-a-list"}), "bad_request"),
    (encode({"op": "put", "id": 3, "path": "relative"}), "bad_request"),
])
def test_bad_frames_get_specific_errors_and_the_connection_survives(raw, message, code):
    raw.send(message)
    err = _error(raw)
    assert err["code"] == code and err["message"]
    raw.send(encode({"op": "health", "id": "after"}))
    assert decode(raw.recv(5))[0]["ok"] is True


def test_duplicate_id_is_refused(raw):
    raw.send(encode({"op": "exec", "id": "d", "shell": "sleep 1"}))
    raw.send(encode({"op": "exec", "id": "d", "shell": "true"}))
    err = _error(raw)
    assert err["code"] == "duplicate_id"
    assert decode(raw.recv(5))[0]["op"] == "exit"


def test_oversized_message_closes_only_that_connection(agent, raw):
    with pytest.raises(ConnectionClosedError) as closed:
        raw.send(encode({"op": "data", "id": 1}, b"x" * MAX_FRAME))
        raw.recv(5)
    # 1009 "message too big", unless the close frame was lost in the reset of a half-sent message
    assert closed.value.rcvd is None or closed.value.rcvd.code == 1009
    with agent.client() as c:
        assert c.health()["ok"]


def test_operations_multiplex_on_one_connection(raw):
    raw.send(encode({"op": "exec", "id": "slow", "shell": "sleep 0.5; echo slow"}))
    raw.send(encode({"op": "exec", "id": "fast", "shell": "echo fast"}))
    order = []
    while len(order) < 2:
        header, payload = decode(raw.recv(5))
        if header["op"] == "exit":
            order.append(header["id"])
    assert order == ["fast", "slow"]


def test_cancel_stops_a_running_command(raw):
    raw.send(encode({"op": "exec", "id": "c", "shell": "sleep 20"}))
    raw.send(encode({"op": "cancel", "id": "c"}))
    header, _payload = decode(raw.recv(10))
    assert header["op"] == "exit" and header["cancelled"] and header["signal"] == "SIGTERM"


def test_audit_log_has_who_what_status_but_no_secrets(agent, tmp_path):
    secret = "s3cr3t-value-do-not-log"
    src = tmp_path / "payload"
    src.write_text(f"file content {secret}")
    with agent.client() as c:
        c.exec(shell=f"echo {secret} > /dev/null; exit 4", env={"TOKEN": secret})
        c.put(src, str(tmp_path / "dest"))
        c.fetch(str(tmp_path / "dest"), tmp_path / "back")
    text = agent.audit_log.read_text()
    assert secret not in text
    events = [json.loads(line) for line in text.splitlines()]
    execs = [e for e in events if e["event"] == "exec" and e.get("status") == 4]
    assert execs and execs[-1]["peer"] == "kubenest-controller" and "duration_ms" in execs[-1]
    assert execs[-1]["cmd"] == "sh -c"
    puts = [e for e in events if e["event"] == "put" and e["path"] == str(tmp_path / "dest")]
    assert puts and puts[-1]["status"] == "ok" and puts[-1]["bytes"] == src.stat().st_size
    assert any(e["event"] == "fetch" and e["status"] == "ok" for e in events)
