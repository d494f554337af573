"""The exec stream of module_utils/kube_api against a scripted WebSocket peer (a stand-in for the API server's
exec subresource; the real one is used by etcd_backup in tests/e2e/test_virtualclusters.py): messages split
into fragments, pings, the exit code from the Status channel, and a refusal before the upgrade."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import kube_api

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def frame(opcode, payload, fin=True):
    head = bytes([(0x80 if fin else 0) | opcode])
    if len(payload) < 126:
        return head + bytes([len(payload)]) + payload
    if len(payload) < 65536:
        return head + bytes([126]) + struct.pack("!H", len(payload)) + payload
    return head + bytes([127]) + struct.pack("!Q", len(payload)) + payload


def read_frame(reader):
    """(opcode, unmasked payload) of one frame the client sent, and whether it was masked."""
    head = reader.read(2)
    length, masked = head[1] & 0x7F, bool(head[1] & 0x80)
    mask = reader.read(4) if masked else b"\0\0\0\0"
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(reader.read(length)))
    return head[0] & 0x0F, payload, masked


class Peer:
    """Answers one connection: reads the upgrade request, then sends `script` (a list of frames) and closes."""

    def __init__(self, script, status_line="HTTP/1.1 101 Switching Protocols", body=b""):
        self.script, self.status_line, self.body = script, status_line, body
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.request, self.received = None, []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def port(self):
        return self.listener.getsockname()[1]

    def _serve(self):
        conn, _addr = self.listener.accept()
        reader = conn.makefile("rb")
        lines = []
        while (line := reader.readline()) not in (b"\r\n", b""):
            lines.append(line.decode().strip())
        self.request = lines
        headers = {k.lower(): v.strip() for k, _s, v in (line.partition(":") for line in lines[1:])}
        if self.status_line.split()[1] != "101":
            conn.sendall(f"{self.status_line}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(self.body)}\r\n\r\n".encode() + self.body)
            conn.close()
            return
        accept = base64.b64encode(hashlib.sha1(headers["sec-websocket-key"].encode() + GUID).digest()).decode()
        conn.sendall(f"{self.status_line}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     f"Sec-WebSocket-Accept: {accept}\r\n"
                     f"Sec-WebSocket-Protocol: {headers['sec-websocket-protocol']}\r\n\r\n".encode())
        for item in self.script:
            if item == "read":  # the client's answer to a ping
                self.received.append(read_frame(reader))
            elif item == "hang up":  # gone without a close frame
                conn.close()
                return
            else:
                conn.sendall(item)
        conn.settimeout(5)
        try:
            self.received.append(read_frame(reader))  # the client's close
        except (OSError, IndexError):
            pass
        conn.close()


def client(port):
    api = kube_api.KubeApi(kube_api.Connection(f"http://127.0.0.1:{port}", token="t0ken"), timeout=5)
    api.resources["v1"] = {"Pod": ("pods", True)}  # no discovery against the stand-in
    return api


def test_output_split_over_fragments_and_pings_and_the_exit_code():
    big = b"x" * 70000  # a 64-bit length
    status = json.dumps({"status": "Failure", "reason": "NonZeroExitCode", "message": "command terminated",
                         "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}).encode()
    peer = Peer([frame(0x2, b"\x01hel", fin=False), frame(0x9, b"are you there"), "read",
                 frame(0x0, b"lo ", fin=True), frame(0x2, b"\x01" + big), frame(0x2, b"\x02warn"),
                 frame(0x2, b"\x03" + status), frame(0x8, struct.pack("!H", 1000))])
    result = kube_api.exec_in_pod(client(peer.port), "ns", "etcd-0", "etcd", ["save", "--a=b c"], 10)
    peer.thread.join(5)
    assert (result.code, result.stdout, result.stderr) == (3, b"hello " + big, b"warn")
    request = peer.request[0]
    assert request.startswith("GET /api/v1/namespaces/ns/pods/etcd-0/exec?container=etcd&stdout=true&stderr=true")
    assert "command=save&command=--a%3Db+c" in request
    assert "Authorization: Bearer t0ken" in peer.request and "Sec-WebSocket-Protocol: v4.channel.k8s.io" in peer.request
    opcode, payload, masked = peer.received[0]
    assert (opcode, payload, masked) == (0xA, b"are you there", True)  # a masked pong with the ping's data
    assert peer.received[1][0] == 0x8  # and a close at the end


def test_success_is_exit_code_zero():
    peer = Peer([frame(0x2, b"\x01ok"), frame(0x2, b"\x03" + json.dumps({"status": "Success"}).encode()),
                 frame(0x8, b"")])
    result = kube_api.exec_in_pod(client(peer.port), "ns", "p", "c", ["true"], 10)
    assert (result.code, result.stdout) == (0, b"ok")


def test_a_refused_upgrade_is_an_api_error_with_the_servers_words():
    body = json.dumps({"kind": "Status", "message": 'pods "p" is forbidden: User "x" cannot create pods/exec',
                       "code": 403}).encode()
    peer = Peer([], status_line="HTTP/1.1 403 Forbidden", body=body)
    with pytest.raises(kube_api.KubeApiError, match='exec in ns/p: HTTP 403 Forbidden: pods "p" is forbidden') as err:
        kube_api.exec_in_pod(client(peer.port), "ns", "p", "c", ["true"], 10)
    assert err.value.status == 403


def test_a_stream_without_a_status_or_past_its_time_fails_clearly():
    peer = Peer([frame(0x2, b"\x01partial"), "hang up"])
    with pytest.raises(kube_api.KubeApiError, match="ended without the command's exit status"):
        kube_api.exec_in_pod(client(peer.port), "ns", "p", "c", ["true"], 10)
    slow = Peer(["read", "hang up"])  # sends nothing: the client waits for a frame that never comes
    with pytest.raises(kube_api.KubeApiError, match="did not end within 1s"):
        kube_api.exec_in_pod(client(slow.port), "ns", "p", "c", ["sleep"], 1)
