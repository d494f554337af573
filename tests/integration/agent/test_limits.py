"""The agent under abuse: connection floods, FIFOs, symlinks, floods of output (real agent, real mTLS)."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import AgentClient
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentOpError

FLOOD_CONNECTIONS = 3000
WAVE = 300


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_flood_of_idle_connections_leaves_memory_bounded_and_the_agent_serving(fresh_agent):
    """Thousands of TCP connections that never speak TLS: refused before any TLS state, memory stays put,
    an authenticated client gets in afterwards, and the audit log gets a summary, not a line each."""
    with fresh_agent.client() as c:
        c.health()
    before = rss_kib(fresh_agent.proc.pid)
    opened = 0
    for _wave in range(FLOOD_CONNECTIONS // WAVE):
        sockets = []
        for _attempt in range(WAVE):
            s = socket.socket()
            s.settimeout(5)
            try:
                s.connect(("127.0.0.1", fresh_agent.port))
                opened += 1
            except OSError:
                pass
            sockets.append(s)
        time.sleep(0.2)
        for s in sockets:
            s.close()
    time.sleep(1)
    after = rss_kib(fresh_agent.proc.pid)
    print(f"\nagent RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB after {opened} idle connections")
    assert opened >= FLOOD_CONNECTIONS // 2
    assert after - before < 64 * 1024, f"RSS grew by {(after - before) / 1024:.0f} MiB"
    with fresh_agent.client() as c:
        assert c.health()["ok"]
    refusals = [e for e in fresh_agent.audit_events() if e.get("reason", "").startswith("too many connections")]
    assert refusals and len(refusals) < FLOOD_CONNECTIONS // 10
    assert sum(e["count"] for e in refusals) <= opened
    assert "Traceback" not in open(fresh_agent.log.name, errors="replace").read()


def test_fetching_a_fifo_is_refused_without_blocking_other_connections(agent, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    outcome = {}

    def fetch():
        with agent.client() as c:
            try:
                c.fetch(str(fifo), tmp_path / "out")
            except AgentOpError as exc:
                outcome["code"] = exc.code

    fetcher = threading.Thread(target=fetch, daemon=True)
    fetcher.start()
    with agent.client() as other:  # a second connection is served meanwhile
        assert other.health()["ok"]
    fetcher.join(10)
    assert outcome.get("code") == "not_regular"
    assert not (tmp_path / "out").exists()


def test_put_over_a_symlink_replaces_the_link_and_takes_nothing_from_its_target(agent, tmp_path):
    target = tmp_path / "target"
    target.write_text("original")
    os.chmod(target, 0o644)
    os.chown(target, 65534, 65534)
    link = tmp_path / "link"
    link.symlink_to(target)
    source = tmp_path / "source"
    source.write_text("new content")
    with agent.client() as c:
        c.put(source, str(link))
    info = os.lstat(link)
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.getuid()
    assert link.read_text() == "new content"
    assert target.read_text() == "original" and os.stat(target).st_uid == 65534


def test_the_controller_stops_commands_with_more_output_than_it_keeps(agent):
    with agent.client() as c:
        bounded = AgentClient(c.transport, max_output=1024 * 1024)
        with pytest.raises(AgentOpError) as too_much:
            bounded.exec(shell="head -c 50000000 /dev/zero")
        assert too_much.value.code == "output_too_large"
        assert bounded.exec(argv=["echo", "still usable"]).stdout == b"still usable\n"
