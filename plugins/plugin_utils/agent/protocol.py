"""Wire format shared by the agent, the controller-side mux and clients.

Every websocket message is one binary frame: a 4-byte big-endian header length, a JSON
header (an object with at least ``op``), then raw payload bytes. See PROTOCOL.md.
"""

from __future__ import annotations

import json
import struct

PROTOCOL_VERSION = 1
SUBPROTOCOL = f"kubenest-agent.v{PROTOCOL_VERSION}"

MAX_HEADER = 64 * 1024
CHUNK_SIZE = 1024 * 1024
MAX_FRAME = 4 + MAX_HEADER + CHUNK_SIZE

# Client -> agent operations that open a new stream.
OPEN_OPS = frozenset({"exec", "put", "fetch", "health", "supersede", "audit"})
# Client -> agent frames that continue an open stream.
STREAM_OPS = frozenset({"stdin", "data", "end", "cancel"})

# Agent -> client frames after which an operation id is finished.
TERMINAL_REPLIES = frozenset({"exit", "result", "end", "error"})

_LEN = struct.Struct(">I")


class ProtocolError(Exception):
    """A frame or request that breaks the protocol; ``code`` is machine readable."""

    def __init__(self, code: str, message: str, op_id=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.op_id = op_id


def encode(header: dict, payload: bytes | memoryview = b"") -> bytes:
    raw = json.dumps(header, separators=(",", ":")).encode()
    if len(raw) > MAX_HEADER:
        raise ProtocolError("header_too_large", f"header of {len(raw)} bytes exceeds {MAX_HEADER}")
    return b"".join((_LEN.pack(len(raw)), raw, payload))


def decode(frame) -> tuple[dict, memoryview]:
    """Split a frame into (header, payload); raise ProtocolError on anything malformed."""
    if isinstance(frame, str):
        raise ProtocolError("bad_frame", "text messages are not part of the protocol; send binary frames")
    view = memoryview(frame)
    if len(view) < _LEN.size:
        raise ProtocolError("bad_frame", f"frame of {len(view)} bytes is shorter than its length prefix")
    (size,) = _LEN.unpack_from(view)
    if size > MAX_HEADER:
        raise ProtocolError("header_too_large", f"header of {size} bytes exceeds {MAX_HEADER}")
    if _LEN.size + size > len(view):
        raise ProtocolError("bad_frame", f"header length {size} runs past the end of a {len(view)}-byte frame")
    try:
        header = json.loads(bytes(view[_LEN.size:_LEN.size + size]))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError("bad_frame", f"header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("bad_frame", "header must be a JSON object")
    op = header.get("op")
    if not isinstance(op, str) or not op:
        raise ProtocolError("bad_frame", "header has no 'op' string", header.get("id"))
    return header, view[_LEN.size + size:]


# The mux's first frame to each local worker: only a greeted worker sends anything (see mux.py).
MUX_GREETING = encode({"op": "mux_ready", "id": None})


def error_header(code: str, message: str, op_id=None) -> dict:
    return {"op": "error", "id": op_id, "code": code, "message": message}
