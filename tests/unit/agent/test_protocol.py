import json
import struct

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.protocol import (
    MAX_HEADER,
    ProtocolError,
    decode,
    encode,
)


def test_roundtrip_keeps_header_and_payload():
    header = {"op": "data", "id": 7, "path": "/tmp/ü-名前"}
    frame = encode(header, b"\x00\xffpayload")
    got, payload = decode(frame)
    assert got == header
    assert bytes(payload) == b"\x00\xffpayload"


def test_non_utf8_file_names_survive_as_surrogates():
    name = b"/tmp/\xff\xfe".decode(errors="surrogateescape")
    got, _payload = decode(encode({"op": "fetch", "id": 1, "path": name}))
    assert got["path"].encode(errors="surrogateescape") == b"/tmp/\xff\xfe"


@pytest.mark.parametrize(("frame", "code"), [
    ("text", "bad_frame"),
    (b"\x00\x00", "bad_frame"),
    (struct.pack(">I", 50) + b"{}", "bad_frame"),
    (struct.pack(">I", 3) + b"{x}", "bad_frame"),
    (struct.pack(">I", 2) + b"[]", "bad_frame"),
    (struct.pack(">I", 2) + b"{}", "bad_frame"),
    (struct.pack(">I", MAX_HEADER + 1) + b"{}", "header_too_large"),
    (struct.pack(">I", 4) + b"\xff\xfe{}", "bad_frame"),
])
def test_malformed_frames_raise_specific_errors(frame, code):
    with pytest.raises(ProtocolError) as err:
        decode(frame)
    assert err.value.code == code
    assert err.value.message


def test_encode_refuses_oversized_header():
    with pytest.raises(ProtocolError) as err:
        encode({"op": "exec", "id": 1, "shell": "x" * (MAX_HEADER + 10)})
    assert err.value.code == "header_too_large"


def test_header_is_compact_json():
    frame = encode({"op": "health", "id": 1})
    (size,) = struct.unpack(">I", frame[:4])
    assert json.loads(frame[4:4 + size]) == {"op": "health", "id": 1}
    assert b" " not in frame
