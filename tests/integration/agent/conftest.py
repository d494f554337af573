import pytest

from tests.support.agentproc import AgentProcess


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    proc = AgentProcess.with_fresh_pki(tmp_path_factory.mktemp("agent")).start()
    yield proc
    proc.stop()


@pytest.fixture
def fresh_agent(tmp_path):
    """An agent this test may kill or restart."""
    proc = AgentProcess.with_fresh_pki(tmp_path).start()
    yield proc
    proc.stop()
