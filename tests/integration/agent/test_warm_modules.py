"""The warm module runner: real modules through ansible-playbook, plus its fallbacks and limits."""

import pytest

from tests.support.agentproc import AgentProcess, shutdown_muxes
from tests.support.playbook import run_playbook, write_inventory, write_play


@pytest.fixture
def env(tmp_path):
    agent = AgentProcess.with_fresh_pki(tmp_path / "node").start()
    control = tmp_path / "control"
    yield agent, control
    shutdown_muxes(control)
    agent.stop()


def _runners(agent):
    return [e.get("runner") for e in agent.audit_events() if e["event"] == "exec" and e.get("cmd") == "python3"]


def test_modules_run_warm_and_behave_like_fresh_interpreters(env, tmp_path):
    agent, control = env
    inventory = write_inventory(tmp_path / "inv.yml", agent)
    tasks = [
        {"name": "ping", "ansible.builtin.ping": {}},
        {"name": "copy", "ansible.builtin.copy": {"content": "a\n", "dest": f"{tmp_path}/f", "mode": "0600"}},
        {"name": "stat", "ansible.builtin.stat": {"path": f"{tmp_path}/f"}, "register": "st"},
        {"name": "failing module", "ansible.builtin.command": "false", "ignore_errors": True},
        {"name": "module error", "ansible.builtin.file": {"path": f"{tmp_path}/missing/x", "state": "file"},
         "ignore_errors": True},
        {"name": "env", "ansible.builtin.command": "printenv KUBENEST_T", "environment": {"KUBENEST_T": "wärm"},
         "changed_when": False},
    ]
    result = run_playbook(write_play(tmp_path / "play.yml", tasks), inventory, control)
    assert result.rc == 0, result.stderr
    assert result.task("ping")["ping"] == "pong"
    assert result.task("stat")["stat"]["mode"] == "0600"
    assert result.task("failing module")["rc"] == 1 and result.task("failing module")["failed"]
    assert "missing" in result.task("module error")["msg"]
    assert result.task("env")["stdout"] == "wärm"
    runners = _runners(agent)
    assert runners and set(runners) == {"warm"}


def test_warm_runner_off_uses_fresh_interpreters(env, tmp_path):
    agent, control = env
    inventory = write_inventory(tmp_path / "inv.yml", agent, kubenest_agent_warm_modules=False)
    result = run_playbook(write_play(tmp_path / "play.yml", [{"name": "ping", "ansible.builtin.ping": {}}]),
                          inventory, control)
    assert result.rc == 0
    assert not [e for e in agent.audit_events() if e.get("runner")]


def test_timeout_kills_a_warm_module_and_its_children(env, tmp_path):
    agent, control = env
    inventory = write_inventory(tmp_path / "inv.yml", agent, kubenest_agent_command_timeout=2)
    tasks = [{"name": "slow", "ansible.builtin.command": "sleep 37"}]
    result = run_playbook(write_play(tmp_path / "play.yml", tasks), inventory, control)
    assert result.host_stats()["failures"] == 1
    assert "timeout" in result.task("slow")["module_stderr"]
    with agent.client() as c:
        assert c.exec(shell="pgrep -f '^sleep 37$' || true").stdout == b""


def test_non_module_python_payload_runs_cold(env):
    agent, _control = env
    with agent.client() as c:
        r = c.exec(argv=["/usr/bin/python3"], stdin=b"import sys\nprint('plain', sys.argv)\nsys.exit(5)\n",
                   runner="python", env={"LANG": "C.UTF-8"})
    assert (r.code, r.stdout) == (5, b"plain ['']\n")
    assert _runners(agent) == ["cold"]


def test_runner_request_is_validated(env):
    agent, _control = env
    from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentOpError

    with agent.client() as c, pytest.raises(AgentOpError, match="absolute interpreter"):
        c.exec(argv=["python3"], stdin=b"", runner="python")
