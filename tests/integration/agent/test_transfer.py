"""put and fetch: chunked, verified, atomic."""

import hashlib
import os
import stat

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentOpError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.protocol import CHUNK_SIZE, decode, encode


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_put_then_fetch_roundtrip_with_unicode_names(agent, tmp_path):
    src = tmp_path / "src-ü.bin"
    src.write_bytes(os.urandom(3 * CHUNK_SIZE + 12345))
    dest = tmp_path / "remote" / "ziel-名前.bin"
    dest.parent.mkdir()
    back = tmp_path / "back-é.bin"
    with agent.client() as c:
        result = c.put(src, str(dest), mode=0o640)
        assert result["sha256"] == _sha(src) and result["size"] == src.stat().st_size
        fetched = c.fetch(str(dest), back)
    assert _sha(dest) == _sha(src) == _sha(back) == fetched["sha256"]
    assert stat.S_IMODE(dest.stat().st_mode) == 0o640
    assert not list(dest.parent.glob("*.kubenest-part"))


def test_put_keeps_existing_mode_and_defaults_new_files_private(agent, tmp_path):
    src = tmp_path / "src"
    src.write_text("x")
    existing = tmp_path / "existing"
    existing.write_text("old")
    existing.chmod(0o755)
    with agent.client() as c:
        c.put(src, str(existing))
        c.put(src, str(tmp_path / "new"))
    assert stat.S_IMODE(existing.stat().st_mode) == 0o755 and existing.read_text() == "x"
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o600


def test_put_owner_and_group_by_name(agent, tmp_path):
    src = tmp_path / "src"
    src.write_text("x")
    with agent.client() as c:
        c.put(src, str(tmp_path / "owned"), owner="nobody", group="nogroup")
        with pytest.raises(AgentOpError) as err:
            c.put(src, str(tmp_path / "bad-owner"), owner="no-such-user-xyz")
    assert (tmp_path / "owned").stat().st_uid == 65534
    assert err.value.code == "bad_request" and "no-such-user-xyz" in err.value.message
    assert not (tmp_path / "bad-owner").exists()


def test_put_into_missing_directory_fails_cleanly(agent, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"x" * (2 * CHUNK_SIZE))
    with agent.client() as c:
        with pytest.raises(AgentOpError) as err:
            c.put(src, str(tmp_path / "missing" / "f"))
        assert c.health()["ok"]
    assert err.value.code == "not_found" and "missing" in err.value.message


def test_checksum_mismatch_leaves_nothing(agent, tmp_path):
    dest = tmp_path / "dest"
    with agent.client() as c:
        ws = c.transport
        ws.send(encode({"op": "put", "id": "x", "path": str(dest)}))
        assert decode(ws.recv(5))[0]["op"] == "ready"
        ws.send(encode({"op": "data", "id": "x"}, b"hello"))
        ws.send(encode({"op": "end", "id": "x", "size": 5, "sha256": hashlib.sha256(b"other").hexdigest()}))
        header, _payload = decode(ws.recv(5))
    assert header["op"] == "error" and header["code"] == "checksum_mismatch"
    assert not dest.exists() and not list(tmp_path.glob("*kubenest-part"))


def test_fetch_errors_are_specific(agent, tmp_path):
    with agent.client() as c:
        with pytest.raises(AgentOpError) as missing:
            c.fetch(str(tmp_path / "nope"), tmp_path / "out")
        with pytest.raises(AgentOpError) as directory:
            c.fetch(str(tmp_path), tmp_path / "out")
        with pytest.raises(AgentOpError) as relative:
            c.fetch("relative/path", tmp_path / "out")
    assert missing.value.code == "not_found"
    assert directory.value.code == "is_directory"
    assert relative.value.code == "bad_request"
    assert not (tmp_path / "out").exists()


def test_killed_agent_mid_upload_leaves_no_partial_file(fresh_agent, tmp_path):
    dest = tmp_path / "dest.bin"
    with fresh_agent.client() as c:
        ws = c.transport
        ws.send(encode({"op": "put", "id": "raw", "path": str(dest)}))
        assert decode(ws.recv(5))[0]["op"] == "ready"
        for _i in range(4):
            ws.send(encode({"op": "data", "id": "raw"}, b"z" * CHUNK_SIZE))
        c.health()  # all four chunks were processed
        assert list(tmp_path.glob(".dest.bin.*.kubenest-part"))
        fresh_agent.kill()
    assert not dest.exists()
    fresh_agent.start()  # a restarted agent removes what the killed one left behind
    assert not list(tmp_path.glob(".dest.bin.*.kubenest-part"))
    assert not dest.exists()


def test_client_disconnect_mid_upload_discards_temp_file(agent, tmp_path):
    dest = tmp_path / "dest.bin"
    with agent.client() as c:
        c.transport.send(encode({"op": "put", "id": "raw", "path": str(dest)}))
        decode(c.transport.recv(5))
        c.transport.send(encode({"op": "data", "id": "raw"}, b"z" * 1000))
        c.health()
    with agent.client() as c:
        c.health()
    assert not dest.exists() and not list(tmp_path.glob("*kubenest-part"))
