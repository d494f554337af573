"""A real API server with the kosmos.io and kopf peering CRDs, and the real operator started against it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import kubernetes
import pytest
import yaml

from tests.integration.operator.operatorproc import Kube, Operator
from tests.support import k8sbin
from tests.support.apiserver import ApiServer
from tests.support.procs import wait_until

REPO = Path(__file__).resolve().parents[3]
timings: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter):
    for name, seconds in timings.items():
        terminalreporter.write_line(f"operator: {name}: {seconds:.1f}s")


@pytest.fixture(scope="session")
def apiserver():
    try:
        for name in ("etcd", "kube-apiserver"):
            k8sbin.binary(name)
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
    with ApiServer() as api:
        yield api
    assert not api.apiserver.running() and not api.etcd.running()


@pytest.fixture(scope="session")
def api_client(apiserver):
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    yield client
    client.close()


def _established(ext: kubernetes.client.ApiextensionsV1Api, name: str) -> bool:
    conditions = ext.read_custom_resource_definition(name).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


@pytest.fixture(scope="session")
def crds(apiserver, api_client):
    """kosmos.io CRDs through the collection's own playbook, kopf's peering CRDs from deploy/operator."""
    playbook = REPO / "playbooks" / "install_crds.yml"
    with tempfile.TemporaryDirectory(prefix="kubenest-crds-") as tmp:  # Ansible's temporary files
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(playbook),
                               "-e", f"kubenest_admin_kubeconfig={apiserver.kubeconfig}"],
                              capture_output=True, text=True, timeout=300, check=False,
                              env={**os.environ, "TMPDIR": tmp})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    for doc in yaml.safe_load((REPO / "deploy/operator/peering-crds.yaml").read_text())["items"]:
        ext.create_custom_resource_definition(doc)
        wait_until(lambda name=doc["metadata"]["name"]: _established(ext, name), 30, f"{doc['metadata']['name']}")
    return True


@pytest.fixture(scope="session")
def kube(api_client, crds) -> Kube:
    return Kube(api_client)


@pytest.fixture
def workdir():
    path = Path(tempfile.mkdtemp(prefix="kubenest-operator-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def operators(apiserver, crds, workdir, request):
    """Start operators with `operators.start(name, *args)`; all are stopped and checked at the end."""
    started: list[Operator] = []

    class Starter:
        def new(self, name: str = "operator", *extra: str, **kwargs) -> Operator:
            operator = Operator(apiserver.kubeconfig, workdir, name, *extra, **kwargs)
            started.append(operator)
            return operator

        def start(self, name: str = "operator", *extra: str, **kwargs) -> Operator:
            return self.new(name, *extra, **kwargs).start()

    yield Starter()
    leftovers = {}
    for operator in started:
        operator.stop()
        leftovers[operator.process.name] = operator.reap_playbooks()
        if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
            print(f"--- {operator.process.name} log ---\n{operator.log()[-20000:]}")
    assert not any(leftovers.values()), f"ansible-playbook processes outlived their operator: {leftovers}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
