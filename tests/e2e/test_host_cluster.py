"""The sandbox host cluster, bootstrapped from bare machines by playbooks/bootstrap.yml through the agent."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import connect_direct
from cryptography import x509
from cryptography.x509.oid import NameOID
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from sandbox.cluster import pod_routes
from sandbox.cluster.layout import cidrs
from tests.e2e.conftest import run_python as _run
from tests.support.collection_install import build_tarball, clean_install
from tests.support.http import get_text
from tests.support.k8sbin import versions
from tests.support.molecule import molecule_test
from tests.support.nodes import on_node
from tests.support.playbook import run_playbook, write_play

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="node machines need root")
NAMESPACE = "kubenest-e2e"
HOST_PORT = 18080  # the echo pods' hostPort
ROLE = "kosmos.kubenest.node_promote"


@pytest.fixture(scope="module")
def cluster(host_cluster):
    sb, api = host_cluster
    pod_routes.refresh(sb, cidrs()[0])  # nodes that came back from a virtual cluster may have new pod subnets
    yield sb, api
    if _ns_exists(api):
        k8s.CoreV1Api(api).delete_namespace(NAMESPACE)


def _ns_exists(api) -> bool:
    try:
        k8s.CoreV1Api(api).read_namespace(NAMESPACE)
        return True
    except ApiException:
        return False


def test_every_machine_is_a_ready_node(cluster):
    sb, api = cluster
    nodes = {n.metadata.name: n for n in k8s.CoreV1Api(api).list_node().items}
    assert sorted(nodes) == sorted(n.name for n in sb.nodes)
    # The kubelets talk to the containerd built from versions.env (sandbox/runtime), not to Debian's 1.6.
    runtime = "containerd://" + versions()["CONTAINERD_VERSION"].removeprefix("v")
    for name, node in nodes.items():
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True", f"{name} is not Ready: {ready}"
        assert node.status.node_info.container_runtime_version == runtime, name
    control_plane = [n.name for n in sb.nodes if n.role == "control_plane"]
    for name in control_plane:
        assert "node-role.kubernetes.io/control-plane" in nodes[name].metadata.labels
        assert any(t.key == "node-role.kubernetes.io/control-plane" for t in nodes[name].spec.taints or [])


def test_kubectl_get_nodes_with_the_sandbox_kubeconfig(cluster):
    sb, _api = cluster
    out = subprocess.run(["kubectl", "--kubeconfig", str(sb.state_dir / "kubeconfig"), "get", "nodes", "--no-headers"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert len(out.splitlines()) == len(sb.nodes)
    assert all(line.split()[1] == "Ready" for line in out.splitlines())


def test_join_window_is_closed(cluster):
    _sb, api = cluster
    secrets = k8s.CoreV1Api(api).list_namespaced_secret("kube-system").items
    assert not [s.metadata.name for s in secrets if s.type == "bootstrap.kubernetes.io/token"]


def _field_env(name: str, path: str):
    source = k8s.V1EnvVarSource(field_ref=k8s.V1ObjectFieldSelector(field_path=path))
    return k8s.V1EnvVar(name=name, value_from=source)


def _echo_workload(api) -> tuple[list, int]:
    """Two echo pods on two workers behind a NodePort Service (created by the first test that asks)."""
    core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
    if not _ns_exists(api):
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
    if not apps.list_namespaced_deployment(NAMESPACE, field_selector="metadata.name=echo").items:
        _create_echo(core, apps)
    service = core.read_namespaced_service("echo", NAMESPACE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(NAMESPACE, label_selector="app=echo").items
        running = [p for p in pods if p.status.phase == "Running" and p.status.pod_ip
                   and all(c.ready for c in p.status.container_statuses or [])]
        if len(running) == 2:
            return running, service.spec.ports[0].node_port
        time.sleep(2)
    events = core.list_namespaced_event(NAMESPACE).items
    raise AssertionError("echo pods did not run: " + "; ".join(f"{e.reason}: {e.message}" for e in events[-10:]))


def _create_echo(core, apps) -> None:
    labels = {"app": "echo"}
    env = [_field_env("POD_IP", "status.podIP"), _field_env("NODE_NAME", "spec.nodeName")]
    spread = k8s.V1Affinity(pod_anti_affinity=k8s.V1PodAntiAffinity(
        required_during_scheduling_ignored_during_execution=[k8s.V1PodAffinityTerm(
            label_selector=k8s.V1LabelSelector(match_labels=labels), topology_key="kubernetes.io/hostname")]))
    deployment = k8s.V1Deployment(
        metadata=k8s.V1ObjectMeta(name="echo"),
        spec=k8s.V1DeploymentSpec(replicas=2, selector=k8s.V1LabelSelector(match_labels=labels),
                                  template=k8s.V1PodTemplateSpec(
                                      metadata=k8s.V1ObjectMeta(labels=labels),
                                      spec=k8s.V1PodSpec(affinity=spread, containers=[k8s.V1Container(
                                          name="echo", image="kubenest.local/echo:1.0", image_pull_policy="Never",
                                          env=env, ports=[k8s.V1ContainerPort(container_port=8080,
                                                                              host_port=HOST_PORT)])]))))
    apps.create_namespaced_deployment(NAMESPACE, deployment)
    core.create_namespaced_service(NAMESPACE, k8s.V1Service(
        metadata=k8s.V1ObjectMeta(name="echo"),
        spec=k8s.V1ServiceSpec(type="NodePort", selector=labels,
                               ports=[k8s.V1ServicePort(port=80, target_port=8080)])))


def _get(url: str) -> str:
    return get_text(url)


def test_pods_on_two_workers_reach_each_other_and_a_node_port_answers(cluster):
    sb, api = cluster
    pods, node_port = _echo_workload(api)
    a, b = pods
    workers = {n.name for n in sb.nodes if n.role == "workers"}
    assert a.spec.node_name != b.spec.node_name
    assert {a.spec.node_name, b.spec.node_name} <= workers
    # pod A fetches pod B across nodes; the host reaches pod A through the node network
    answer = _get(f"http://{a.status.pod_ip}:8080/fetch?url=http://{b.status.pod_ip}:8080/")
    assert f"host={b.metadata.name}" in answer and f"node={b.spec.node_name}" in answer
    for node in sb.nodes:
        assert "host=echo-" in _get(f"http://{node.ip}:{node_port}/")
    # Pods get the MTU of the machines' interface (kubenest_node_mtu), not Cilium's 65520 fallback for a node
    # without a default route, which connections leaving the node cannot keep.
    assert set(on_node(sb, a.spec.node_name, "cat /sys/class/net/lxc*/mtu").split()) == {"1500"}


def test_a_host_port_answers_on_the_nodes_address_and_on_its_loopback(cluster):
    sb, api = cluster
    pods, _node_port = _echo_workload(api)
    ips = {n.name: n.ip for n in sb.nodes}
    fetch_loopback = ("python3 -c 'import urllib.request as u; "
                      f"print(u.urlopen(\"http://127.0.0.1:{HOST_PORT}/\", timeout=10).read().decode())'")
    for pod in pods:
        assert f"host={pod.metadata.name}" in _get(f"http://{ips[pod.spec.node_name]}:{HOST_PORT}/")
        # From the node itself to 127.0.0.1, as a hostNetwork pod would: the mapping must route loopback too.
        assert f"host={pod.metadata.name}" in on_node(sb, pod.spec.node_name, fetch_loopback)


def _pull_pod(core, name: str, image: str) -> None:
    core.create_namespaced_pod(NAMESPACE, k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V1PodSpec(restart_policy="Never", termination_grace_period_seconds=0, containers=[k8s.V1Container(
            name="c", image=image, image_pull_policy="Always")])))


def _waiting_or_running(core, name: str, timeout: float = 120) -> k8s.V1ContainerStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = core.read_namespaced_pod(name, NAMESPACE).status.container_statuses or []
        if statuses and (statuses[0].state.running or (statuses[0].state.waiting and statuses[0].state.waiting.reason
                                                       in ("ErrImagePull", "ImagePullBackOff"))):
            return statuses[0]
        time.sleep(1)
    raise AssertionError(f"pod {name}: neither running nor failing to pull after {timeout} s")


def test_images_are_pulled_from_the_sandbox_registry_and_a_missing_one_is_named(cluster):
    sb, api = cluster
    core = k8s.CoreV1Api(api)
    _echo_workload(api)  # the namespace
    log = sb.state_dir / "registry" / "registry.log"
    seen = log.read_text(errors="replace").count("/v2/echo/manifests/1.0")
    # Policy Always: the node resolves kubenest.local/echo:1.0 through hosts.toml even though it holds the image.
    _pull_pod(core, "pull-always", "kubenest.local/echo:1.0")
    _pull_pod(core, "pull-missing", "kubenest.local/echo:no-such-tag")
    try:
        assert _waiting_or_running(core, "pull-always").state.running
        assert log.read_text(errors="replace").count("/v2/echo/manifests/1.0") > seen
        missing = _waiting_or_running(core, "pull-missing").state.waiting
        assert missing.reason in ("ErrImagePull", "ImagePullBackOff")
        events = " ".join(e.message or "" for e in core.list_namespaced_event(
            NAMESPACE, field_selector="involvedObject.name=pull-missing").items)
        # The registry answered "not found": the name resolved to it (not "no such host" for kubenest.local).
        assert "kubenest.local/echo:no-such-tag" in events and "not found" in events, events
    finally:
        for name in ("pull-always", "pull-missing"):
            core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)


def _resolve(pod, name: str) -> tuple[int, str]:
    """Look `name` up from inside `pod` (the echo image's /resolve): HTTP status and answer."""
    query = urllib.parse.urlencode({"name": name})
    try:
        with urllib.request.urlopen(f"http://{pod.status.pod_ip}:8080/resolve?{query}", timeout=30) as resp:
            return resp.status, resp.read().decode().strip()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()


def _dns_replicas(api, timeout: float = 120) -> list:
    """The DNS pods once the Deployment is rolled out (a converge of an older cluster may be rolling it)."""
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while True:
        deployment = apps.read_namespaced_deployment("coredns", "kube-system")
        pods = [p for p in core.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-dns").items
                if not p.metadata.deletion_timestamp and p.status.phase == "Running"]
        status, want = deployment.status, deployment.spec.replicas
        if (status.observed_generation == deployment.metadata.generation and status.updated_replicas == want
                and status.ready_replicas == want and len(pods) == want):
            return pods
        assert time.monotonic() < deadline, f"DNS not rolled out: {status}"
        time.sleep(2)


def test_cluster_dns_answers_for_services_and_refuses_other_names_at_once(cluster):
    sb, api = cluster
    core = k8s.CoreV1Api(api)
    dns = core.read_namespaced_service("kube-dns", "kube-system")
    group_vars = yaml.safe_load((sb.state_dir / "group_vars" / "all.yml").read_text())
    service_net = ipaddress.ip_network(group_vars["kubenest_service_cidr"])
    assert dns.spec.cluster_ip == str(service_net.network_address + 10)  # what every kubelet is told
    replicas = _dns_replicas(api)
    assert len({p.spec.node_name for p in replicas}) == len(replicas) == 2, "two DNS replicas on two nodes"

    pods, _node_port = _echo_workload(api)
    a, b = pods
    kubernetes_ip = core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    for name in ("kubernetes.default.svc.cluster.local", "kubernetes.default", "kubernetes.default.svc"):
        assert _resolve(a, name) == (200, kubernetes_ip), name
    echo_ip = core.read_namespaced_service("echo", NAMESPACE).spec.cluster_ip
    assert _resolve(a, f"echo.{NAMESPACE}.svc.cluster.local") == (200, echo_ip)
    # by Service name, from a pod on one worker to the pods behind it (one of them on the other worker)
    # (a pod network just started may take some seconds to carry a new remote endpoint: fetches until both answered)
    seen, deadline = set(), time.monotonic() + 90
    while f"host={b.metadata.name}" not in seen and time.monotonic() < deadline:
        seen |= {_get(f"http://{a.status.pod_ip}:8080/fetch?url=http://echo/").split()[0] for _attempt in range(8)}
    assert f"host={b.metadata.name}" in seen and seen <= {f"host={a.metadata.name}", f"host={b.metadata.name}"}
    # a name outside the cluster: a clean NXDOMAIN (404 from the resolver), not a timeout (502)
    status, answer = _resolve(b, "kubenest-e2e.example.com")
    assert status == 404 and "no such host" in answer, (status, answer)


def test_node_credentials_are_system_node_and_cannot_read_secrets(cluster):
    sb, api = cluster
    worker = next(n for n in sb.nodes if n.role == "workers")
    pki = sb.state_dir / "pki"
    with tempfile.TemporaryDirectory() as tmp:
        pem = Path(tmp) / "kubelet.pem"
        with connect_direct(worker.ip, 7443, ca_file=str(pki / "ca.crt"), cert_file=str(pki / "client.crt"),
                            key_file=str(pki / "client.key"), server_name=worker.ip) as agent:
            agent.fetch("/var/lib/kubelet/pki/kubelet-client-current.pem", pem)
        cert = x509.load_pem_x509_certificate(pem.read_bytes())
        subject = {a.oid: a.value for a in cert.subject}
        assert subject[NameOID.COMMON_NAME] == f"system:node:{worker.name}"
        assert subject[NameOID.ORGANIZATION_NAME] == "system:nodes"
        cfg = k8s.Configuration()
        cfg.host = api.configuration.host
        cfg.ssl_ca_cert = api.configuration.ssl_ca_cert
        cfg.cert_file = cfg.key_file = str(pem)
        node_api = k8s.CoreV1Api(k8s.ApiClient(cfg))
        assert node_api.read_node(worker.name).metadata.name == worker.name
        with pytest.raises(ApiException) as denied:
            node_api.list_secret_for_all_namespaces()
        assert denied.value.status == 403


def test_second_bootstrap_run_changes_nothing(cluster):
    proc = _run("-m", "sandbox.cluster", "up", env={"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"})
    result = json.loads(proc.stdout[proc.stdout.index("{"):proc.stdout.rindex("}") + 1])
    changed = {host: s["changed"] for host, s in result["stats"].items() if s["changed"]}
    tasks = sorted({(t["task"]["name"], host) for play in result["plays"] for t in play["tasks"]
                    for host, r in t["hosts"].items() if r.get("changed")})
    assert not changed, f"second run changed: {changed} in {tasks}"


def test_molecule_etcd_scenario_on_a_worker(cluster, tmp_path):
    """extensions/molecule/etcd: the etcd role's systemd entry point on a machine, through the agent; its cleanup
    leaves the worker as it was."""
    sb, _api = cluster
    worker = [n for n in sb.nodes if n.role == "workers"][-1]
    group_vars = yaml.safe_load((sb.state_dir / "group_vars" / "all.yml").read_text())
    pki = sb.state_dir / "pki"
    molecule_test("etcd", tmp_path, {
        "KUBENEST_MOLECULE_NODE": worker.name, "KUBENEST_MOLECULE_NODE_IP": worker.ip,
        "KUBENEST_MOLECULE_K8S_BIN": group_vars["kubenest_bin_dir"], "KUBENEST_AGENT_CA_FILE": str(pki / "ca.crt"),
        "KUBENEST_AGENT_CERT_FILE": str(pki / "client.crt"), "KUBENEST_AGENT_KEY_FILE": str(pki / "client.key")})
    left = on_node(sb, worker.name, "ls -d /etc/etcd /var/lib/etcd /usr/local/bin/etcd "
                   "/etc/systemd/system/etcd.service 2>/dev/null; systemctl is-active etcd || true")
    assert left.split() == ["inactive"], left


def test_the_collection_installed_from_its_tarball_drives_every_machine(cluster, tmp_path):
    """A clean virtualenv with only the built tarball and the Python packages it declares: its agent_check
    playbook reaches every sandbox machine through the agent connection (no checkout on the path)."""
    sb, _api = cluster
    dist = tmp_path / "dist"
    dist.mkdir()
    install = clean_install(build_tarball(dist), tmp_path)
    env = {**install["env"], "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_NOCOLOR": "1",
           "KUBENEST_AGENT_CONTROL_DIR": str(tmp_path / "control")}
    proc = subprocess.run([str(install["venv"] / "bin/ansible-playbook"), "-i", str(sb.inventory_path),
                           "kosmos.kubenest.agent_check"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)["plays"][0]["tasks"][1]["hosts"]
    assert sorted(report) == sorted(n.name for n in sb.nodes)
    assert all(r["msg"].startswith(f"{name}: Linux ") for name, r in report.items()), report
    listed = subprocess.run([str(install["venv"] / "bin/ansible-galaxy"), "collection", "list", "kosmos.kubenest",
                             "--format", "json"], capture_output=True, text=True, env=install["env"], check=True)
    assert list(json.loads(listed.stdout)) == [str(install["collection"].parents[1])]


def test_every_machine_has_a_layout_node_promotion_handles(cluster, tmp_path):
    """The check node promotion makes before it touches a node (roles/node_promote/tasks/layout.yml) passes on
    every machine the collection bootstrapped, and reads the layout the kubelet role wrote. A node a virtual
    cluster holds now (its host configuration recorded) is not checked again, as in a resumed promotion."""
    sb, _api = cluster
    play = write_play(tmp_path / "layout.yml", [
        {"name": "layout", "ansible.builtin.include_role": {"name": "kosmos.kubenest.node_promote",
                                                            "tasks_from": "layout.yml", "rolespec_validate": False}}])
    # Only the layout: after make up, the control-plane machine holds the sample's etcd volume and the operator's
    # image volume, which the host-data check refuses as it should (tests/integration/k8s/test_host_data_refused.py).
    result = run_playbook(play, sb.inventory_path, tmp_path / "control", "-e",
                          f"kubenest_host_kubeconfig={sb.state_dir / 'kubeconfig'}", "-e",
                          "node_promote_host_data_check=false")
    assert result.rc == 0, result.stderr[-3000:]
    checked = []
    for node in sb.nodes:
        found = result.task(f"{ROLE} : Read how the node runs its kubelet and kube-proxy", node.name)
        if found.get("skipped"):
            continue
        checked.append(node.role)
        assert found["problems"] == [], (node.name, found["problems"])
        kubelet = found["layout"]["kubelet"]
        assert kubelet["fragment"] == "/etc/systemd/system/kubelet.service" and kubelet["drop_ins"] == []
        assert kubelet["program"] == "/usr/local/bin/kubelet"
        assert kubelet["flags"]["kubeconfig"] == "/etc/kubernetes/kubelet.conf"
        assert found["layout"]["kube_proxy"]["flags"] == {"config": "/etc/kubernetes/kube-proxy-config.yaml"}
    assert "control_plane" in checked and "workers" in checked, checked
