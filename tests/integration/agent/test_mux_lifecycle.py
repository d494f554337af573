"""The local connection helper (mux) against a real agent: a worker that reaches it while it exits never loses
its task."""

import os
import signal
import socket
import threading
import time

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import AgentClient, UnixFrameTransport
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.mux_client import connect_or_spawn, socket_path
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.protocol import MUX_GREETING, encode

from tests.support.agentproc import AgentProcess, pids_of, shutdown_muxes


@pytest.fixture
def agent(tmp_path):
    agent = AgentProcess.with_fresh_pki(tmp_path / "node").start()
    yield agent
    shutdown_muxes(tmp_path / "control")
    agent.stop()


def _spawn_args(agent, control, idle_timeout=60.0):
    files = agent.client_files
    return {"mux_dir": str(control), "uri": f"wss://127.0.0.1:{agent.port}/", "server_name": "127.0.0.1",
            "ca": files["ca_file"], "cert": files["cert_file"], "key": files["key_file"], "connect_timeout": 10,
            "idle_timeout": idle_timeout}


def _echo(sock, text):
    with AgentClient(UnixFrameTransport(sock)) as client:
        result = client.exec(["echo", text])
    assert result.code == 0
    return result.stdout.decode().strip()


def _mux_pids(control):
    return pids_of(f"agent.mux --socket {control}/")


def test_a_mux_that_closes_without_greeting_is_replaced(agent, tmp_path):
    """What a worker sees of a mux on its way out: the connection is accepted, then closed unanswered."""
    control = tmp_path / "control"
    control.mkdir(mode=0o700)
    args = _spawn_args(agent, control)
    path = socket_path(args["mux_dir"], args["uri"], args["server_name"], args["ca"], args["cert"], args["key"])
    leaving = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leaving.bind(str(path))
    leaving.listen(8)
    closed = []

    def close_each():
        while True:
            try:
                conn, _peer = leaving.accept()
            except OSError:
                return
            closed.append(conn)
            conn.close()

    threading.Thread(target=close_each, daemon=True).start()
    try:
        sock = connect_or_spawn(**args)
        assert _echo(sock, "through a new mux") == "through a new mux"
    finally:
        leaving.close()
    assert closed, "the worker never tried the mux that was leaving"
    assert len(_mux_pids(control)) == 1


def test_a_mux_told_to_leave_frees_its_path_at_once_and_greets_nobody_after(agent, tmp_path):
    control = tmp_path / "control"
    args = _spawn_args(agent, control)
    first = connect_or_spawn(**args)
    path = socket_path(args["mux_dir"], args["uri"], args["server_name"], args["ca"], args["cert"], args["key"])
    # A second worker holds its greeted connection while the first asks the mux to leave.
    second = connect_or_spawn(**args)
    UnixFrameTransport(first).send(encode({"op": "mux_shutdown", "id": 0}))
    deadline = time.monotonic() + 10
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not path.exists()
    # The next worker starts a mux of its own and is served by it.
    third = connect_or_spawn(**args)
    assert _echo(third, "new") == "new"
    second.close()
    first.close()


def test_a_worker_that_arrives_as_the_idle_period_ends_keeps_its_task(agent, tmp_path):
    """The mux is frozen past its idle deadline while a worker connects: on resuming it accepts the worker and
    decides to exit in the same turn of its loop, which a worker must survive (it gets a new mux)."""
    control = tmp_path / "control"
    args = _spawn_args(agent, control, idle_timeout=0.5)
    assert _echo(connect_or_spawn(**args), "first") == "first"
    [first_mux] = _mux_pids(control)
    os.kill(first_mux, signal.SIGSTOP)
    outcome = {}
    try:
        time.sleep(1.0)  # past the idle deadline by the time it runs again

        def worker():
            try:
                outcome["stdout"] = _echo(connect_or_spawn(**args), "second")
            except Exception as exc:  # reported below with the assertion
                outcome["error"] = exc

        thread = threading.Thread(target=worker)
        thread.start()
        time.sleep(0.3)  # the worker's connection waits in the frozen mux's backlog
    finally:
        os.kill(first_mux, signal.SIGCONT)
    thread.join(30)
    assert outcome == {"stdout": "second"}
    deadline = time.monotonic() + 10
    while first_mux in _mux_pids(control) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first_mux not in _mux_pids(control), "the frozen mux did not exit after its idle period"


def test_greeting_comes_first(agent, tmp_path):
    control = tmp_path / "control"
    args = _spawn_args(agent, control)
    connect_or_spawn(**args).close()
    path = socket_path(args["mux_dir"], args["uri"], args["server_name"], args["ca"], args["cert"], args["key"])
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(path))
    got = UnixFrameTransport(raw).recv(10)
    raw.close()
    assert got == MUX_GREETING
