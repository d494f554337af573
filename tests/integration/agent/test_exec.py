"""exec over real mutual TLS: streaming, exit status, signals, timeouts."""

import concurrent.futures

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentOpError


def test_argv_env_cwd_and_stdin(agent, tmp_path):
    with agent.client() as c:
        r = c.exec(argv=["/bin/sh", "-c", 'printf "%s|%s|" "$GREETING" "$PWD"; cat'],
                   env={"GREETING": "grüße"}, cwd=str(tmp_path), stdin="ünïcode stdin".encode())
    assert r.code == 0 and r.signal is None and not r.timed_out
    assert r.stdout.decode() == f"grüße|{tmp_path}|ünïcode stdin"


def test_exit_code_and_stderr_are_explicit(agent):
    with agent.client() as c:
        r = c.exec(shell="echo out; echo err >&2; exit 3")
    assert (r.code, r.stdout, r.stderr) == (3, b"out\n", b"err\n")


def test_signal_is_reported(agent):
    with agent.client() as c:
        r = c.exec(shell="kill -TERM $$")
    assert r.signal == "SIGTERM" and r.code == 128 + 15


def test_timeout_kills_the_process_group(agent):
    with agent.client() as c:
        r = c.exec(shell="sleep 31 & sleep 31", timeout=1)
        assert r.timed_out and r.signal == "SIGKILL"
        assert r.duration_ms < 10_000
        # the background child was in the same group and is gone too
        left = c.exec(shell="pgrep -f '^sleep 31$' || true")
    assert left.stdout == b""


def test_stdout_and_stderr_stream_concurrently_without_line_limit(agent):
    # 8 MiB on each stream, interleaved, and a 3 MiB line without newline: a reader that drains
    # stdout before stderr would deadlock, a line-based reader would truncate.
    script = ("import sys\n"
              "for i in range(64):\n"
              "    sys.stdout.write('o' * 131072); sys.stdout.flush()\n"
              "    sys.stderr.write('e' * 131072); sys.stderr.flush()\n"
              "sys.stdout.write('L' * (3 << 20))\n")
    with agent.client() as c:
        r = c.exec(argv=["python3", "-c", script], timeout=60)
    assert r.code == 0
    assert len(r.stderr) == 64 * 131072
    assert len(r.stdout) == 64 * 131072 + (3 << 20)
    assert r.stdout.endswith(b"L" * (3 << 20))


def test_large_stdin_while_output_flows(agent):
    data = bytes(range(256)) * (6 * 4096)  # 6 MiB
    with agent.client() as c:
        r = c.exec(shell="tee /dev/stderr | sha256sum", stdin=data, timeout=60)
    import hashlib
    assert r.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
    assert r.stderr == data


def test_missing_program_gives_127_and_a_message(agent):
    with agent.client() as c:
        r = c.exec(argv=["/nonexistent/prog"])
    assert r.code == 127 and b"/nonexistent/prog" in r.stderr


def test_bad_request_is_refused_with_reason(agent):
    with agent.client() as c:
        try:
            c.exec()
        except AgentOpError as exc:
            assert exc.code == "bad_request" and "argv" in exc.message
        else:
            raise AssertionError("exec without argv or shell was accepted")
        assert c.health()["ok"]  # the connection survives


def test_many_concurrent_clients(agent):
    # 24 TLS handshakes at once on a loaded 2-core CI machine: correctness is tested here, speed in make bench.
    def run(i):
        with agent.client(open_timeout=60) as c:
            return c.exec(shell=f"sleep 0.2; echo {i}").stdout

    with concurrent.futures.ThreadPoolExecutor(max_workers=24) as pool:
        outputs = list(pool.map(run, range(48)))
    assert outputs == [f"{i}\n".encode() for i in range(48)]
