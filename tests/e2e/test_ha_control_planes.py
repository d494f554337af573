"""A host with three control-plane machines loses one of them under a highly available tenant.

The host is the sandbox's bare bootstrap on machines of its own (three control-plane machines, no worker; its own
bridge, node range and pod and Service ranges, so the sandbox's default host keeps running beside it). The tenant
asks for three API servers and three etcd members: each gets a host machine of its own. Then one machine loses
its power, one that is neither the host's API server (its nodes' kubelets talk to the first machine) nor the
machine whose address the tenant's endpoint names (a NodePort endpoint names one host node; a load balancer in
front of every node is what removes that one). A client polls the tenant's API every 100 ms throughout, with a
connection per request and no retries; a write during the outage shows the etcd quorum kept. The machine comes
back, and the tenant is whole again without anything done. The figures are printed. Select with `-m long`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.parse

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from sandbox.machines import pki
from sandbox.machines.config import REPO_ROOT, from_env
from sandbox.machines.machine import Machine
from tests.support import bringup
from tests.support.nodes import host_node_ready
from tests.support.tenant_poller import TenantPoller
from tests.support.virtualclusters import (
    condition,
    create_vc,
    get_vc,
    own_operator,
    tenant_client,
    tenant_write,
    wait_for,
    wait_ready,
)

BRIDGE, CIDR, PREFIX = "knha0", "198.18.6.0/24", "ha"
# Apart from the default sandbox's ranges (198.19.0.0/16) and from a tenant's own (198.18.64.0/18 and up).
POD_CIDR, SERVICE_CIDR = "198.18.32.0/19", "198.18.16.0/20"
NS, NAME = "kubenest-e2e-ha", "steady"
UP_TIMEOUT = 2400  # a cold cache builds Kubernetes and the images first
OUTAGE_S = 90  # long enough for the host to mark the machine's node NotReady and its pods' endpoints gone

pytestmark = [
    pytest.mark.machines,
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.timeout(UP_TIMEOUT + 1800),
    pytest.mark.skipif(os.geteuid() != 0, reason="node machines need root"),
    pytest.mark.skipif(not (shutil.which("systemd-nspawn") and shutil.which("debootstrap")),
                       reason="needs systemd-nspawn (systemd-container) and debootstrap"),
]


@pytest.fixture(scope="module")
def ha_host(tmp_path_factory):
    state = tmp_path_factory.mktemp("ha") / "state"
    env = {**os.environ, "KUBENEST_SANDBOX_DIR": str(state), "KUBENEST_BRIDGE": BRIDGE, "KUBENEST_NODE_CIDR": CIDR,
           "KUBENEST_NODE_PREFIX": PREFIX, "KUBENEST_CONTROL_PLANES": "3", "KUBENEST_WORKERS": "0",
           "KUBENEST_POD_CIDR": POD_CIDR, "KUBENEST_SERVICE_CIDR": SERVICE_CIDR}
    sb = from_env(state_dir=state, bridge=BRIDGE, cidr=CIDR, prefix=PREFIX, control_planes=3, workers=0)
    try:
        with bringup.one_at_a_time("the three-control-plane host"):
            started = time.monotonic()
            for module in ("sandbox.machines", "sandbox.cluster"):
                proc = subprocess.run([sys.executable, "-m", module, "up"], cwd=REPO_ROOT, env=env,
                                      capture_output=True, text=True, timeout=UP_TIMEOUT, check=False)
                assert proc.returncode == 0, f"{module} up failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        print(f"\nthree-control-plane host up in {time.monotonic() - started:.0f}s")
        yield sb, k8s_config.new_client_from_config(str(state / "kubeconfig"))
    finally:
        for argv in (["-m", "sandbox.registry", "down"], ["-m", "sandbox.machines", "down"]):
            subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, env=env, capture_output=True, timeout=300,
                           check=False)


@pytest.fixture(scope="module")
def operator(ha_host, tmp_path_factory):
    sb, api = ha_host
    files = pki.client_files(sb)  # this host's agents, not the default sandbox's
    site = {"kubenest_agent_ca_file": files["ca"], "kubenest_agent_cert_file": files["cert"],
            "kubenest_agent_key_file": files["key"], "kubenest_agent_ca_path": str(sb.pki_dir / "ca")}
    with own_operator(sb, api, NS, tmp_path_factory.mktemp("operator"), site=site, leftovers_timeout=300) as proc:
        yield proc


def _placed(api, component: str) -> dict[str, str]:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(
        NS, label_selector=f"kosmos.io/virtualcluster={NAME},app.kubernetes.io/component={component}").items
    return {p.metadata.name: p.spec.node_name for p in pods}


def _whole(api) -> bool:
    """Three ready pods of every component, Ready, and ControlPlaneSpread True: as it was before."""
    core = k8s.CoreV1Api(api)
    pods = core.list_namespaced_pod(NS, label_selector=f"kosmos.io/virtualcluster={NAME}").items
    ready = [p for p in pods if p.metadata.deletion_timestamp is None
             and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
    vc = get_vc(api, NS, NAME)
    return (len(ready) == 12 and condition(vc, "Ready").get("status") == "True"
            and condition(vc, "ControlPlaneSpread").get("status") == "True")


def _answered_in_every_window(poller: TenantPoller, window: float) -> bool:
    """Whether some request succeeded in every `window` seconds of the poll."""
    times = [poller.started] + poller.answered_at + [poller.stopped]
    return all(later - earlier <= window for earlier, later in zip(times, times[1:], strict=False))


def test_a_tenant_with_three_api_servers_keeps_answering_while_a_host_machine_is_down(ha_host, operator):
    sb, api = ha_host
    create_vc(api, NS, NAME, {"apiServerReplicas": 3, "etcdMembers": 3})
    vc = wait_ready(api, NS, NAME, timeout=900)
    spread = condition(vc, "ControlPlaneSpread")
    assert (spread["status"], spread["reason"]) == ("True", "OnePerHostNode"), spread
    machines = sorted(n.name for n in sb.nodes)
    for component in ("apiserver", "etcd", "controller-manager", "scheduler"):
        placed = _placed(api, component)
        assert sorted(placed.values()) == machines, (component, placed)

    entry = urllib.parse.urlsplit(vc["status"]["endpoint"]).hostname
    spared = {sb.nodes[0].name} | {n.name for n in sb.nodes if n.ip == entry}
    victim = next(n for n in sb.nodes if n.name not in spared)
    tenant, kubeconfig = tenant_client(vc, api)
    tenant_core = k8s.CoreV1Api(tenant)
    tenant_core.create_namespace({"metadata": {"name": "steady"}})

    with TenantPoller(kubeconfig) as poller:
        time.sleep(5)
        Machine(sb, victim).stop(grace=0)  # the power cut: no shutdown, nothing told
        down_at = time.monotonic()
        wrote = tenant_write(tenant_core, "steady", "while-one-is-down", {"members": "2 of 3"}, 60,
                             "a write with one etcd member gone")
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
        outage = (poller.ok, poller.failed, poller.longest_gap)
        Machine(sb, victim).start()
        back_at = time.monotonic()
        wait_for(lambda: host_node_ready(api, victim.name), 300, f"{victim.name} Ready again")
        node_back = time.monotonic() - back_at
        wait_for(lambda: _whole(api), 600, f"{NAME} whole again", interval=2)
        whole = time.monotonic() - back_at

    ok, failed, gap = outage
    print(f"\n{NAME}: 3 API servers and 3 etcd members on {', '.join(machines)}; {victim.name} powered off for "
          f"{OUTAGE_S}s (endpoint at {entry}): {failed} of {ok + failed} requests failed while it was down, longest "
          f"gap {gap:.1f}s; a write succeeded {wrote:.1f}s after the power cut; node Ready {node_back:.0f}s and the "
          f"tenant whole {whole:.0f}s after the machine started; over the whole poll {poller.summary()}")
    # Answering: in every ten seconds of the outage and the return some request got its answer.
    assert _answered_in_every_window(poller, 10), poller.summary()
    assert tenant_core.read_namespaced_config_map("while-one-is-down", "steady").data == {"members": "2 of 3"}
    # Nothing was repaired by hand and nothing moved: every component is back on the machine it had.
    assert sorted(_placed(api, "etcd").values()) == machines
    assert sorted(_placed(api, "apiserver").values()) == machines
