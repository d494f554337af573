"""The Konnectivity tunnel as the collection configures it, with real parts: a kube-apiserver with the egress
selector of plugin_utils/konnectivity.py, the proxy server with its flags beside it, and an agent with its flags
in a network namespace of the test's own, authenticated by a token of the API server's own service account. An
admission webhook is served from a second namespace that only the agent's namespace can reach (as a tenant pod
is only reachable from the tenant's nodes): the API server calls it through the tunnel, and stops reaching it
when the agent goes away."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import kubernetes
import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import konnectivity
from kubernetes.client.rest import ApiException

from sandbox.images.build_images import build_konnectivity
from tests.support.apiserver import ApiServer, write_cert_and_key
from tests.support.procs import ManagedProcess, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="network namespaces need root and iproute2")
DENIAL = "refused from inside the tenant network"
LABEL = {"kubenest-tunnel-probe": "yes"}

# An admission webhook that refuses every object it is asked about, with DENIAL as its reason.
WEBHOOK = textwrap.dedent(f"""
    import http.server, json, ssl, sys
    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body = json.dumps({{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {{
                "uid": review["request"]["uid"], "allowed": False,
                "status": {{"code": 403, "message": "{DENIAL}"}}}}}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    server = http.server.HTTPServer((sys.argv[1], 8443), Hook)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()
""")


def _ip(*args, netns=None):
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


class Networks:
    """Namespace `agent` (reached from here over a veth) and namespace `pods` (reached only from `agent`)."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.agent, self.pods = f"kn-konn-a-{tag}", f"kn-konn-p-{tag}"
        self.root_link = f"kka{tag}"
        block = random.randrange(0, 64) * 4
        self.server_ip, self.agent_ip = f"10.251.{block}.1", f"10.251.{block}.2"
        self.hop_ip, self.pod_ip = f"10.252.{block}.1", f"10.252.{block}.2"
        self.pod_net = f"10.252.{block}.0/30"

    def __enter__(self):
        for name in (self.agent, self.pods):
            subprocess.run(["ip", "netns", "add", name], check=True, timeout=60)
            _ip("link", "set", "lo", "up", netns=name)
        _ip("link", "add", self.root_link, "type", "veth", "peer", "name", "eth0", "netns", self.agent)
        _ip("addr", "add", f"{self.server_ip}/30", "dev", self.root_link)
        _ip("link", "set", self.root_link, "up")
        _ip("addr", "add", f"{self.agent_ip}/30", "dev", "eth0", netns=self.agent)
        _ip("link", "set", "eth0", "up", netns=self.agent)
        _ip("link", "add", "pods0", "netns", self.agent, "type", "veth", "peer", "name", "eth0", "netns", self.pods)
        _ip("addr", "add", f"{self.hop_ip}/30", "dev", "pods0", netns=self.agent)
        _ip("link", "set", "pods0", "up", netns=self.agent)
        _ip("addr", "add", f"{self.pod_ip}/30", "dev", "eth0", netns=self.pods)
        _ip("link", "set", "eth0", "up", netns=self.pods)
        # this side has no way to the pods, as a host has none to a tenant's pod network (without this, the
        # machine's default route would take the packets elsewhere)
        _ip("route", "add", "unreachable", self.pod_net)
        return self

    def __exit__(self, *exc):
        subprocess.run(["ip", "route", "delete", "unreachable", self.pod_net], capture_output=True, check=False,
                       timeout=60)
        subprocess.run(["ip", "link", "delete", self.root_link], capture_output=True, check=False, timeout=60)
        for name in (self.agent, self.pods):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False, timeout=60)


@pytest.fixture(scope="module")
def proxy_binaries(pinned_versions) -> dict[str, Path]:
    """The binaries of the Konnectivity images (built on first use, cached by version)."""
    version = pinned_versions["KONNECTIVITY_VERSION"]
    cache = Path(os.environ.get("KUBENEST_CACHE") or Path.home() / ".cache" / "kubenest")
    return build_konnectivity(version, cache / "konnectivity" / version)


@pytest.fixture(scope="module")
def tunnel(k8s_bin_dir, proxy_binaries):
    # a short directory: a Unix socket path has room for 107 bytes
    work = Path(tempfile.mkdtemp(prefix="kn-konn-"))
    uds = work / "konnectivity.socket"
    egress = work / "egress-selector.json"
    egress.write_text(json.dumps(konnectivity.egress_selector_config(str(uds))))
    # webhook Services resolve to their endpoints, as in a tenant without kube-proxy on the control plane
    with Networks() as net, ApiServer(extra_args=(f"--egress-selector-config-file={egress}",
                                                  "--enable-aggregator-routing=true")) as api:
        client = kubernetes.config.new_client_from_config(config_file=str(api.kubeconfig))
        processes = {}
        try:
            yield _start(work, uds, net, api, client, proxy_binaries, processes)
        finally:
            for process in processes.values():
                process.stop()
            client.close()
            shutil.rmtree(work, ignore_errors=True)


def _unused_ports(count: int) -> list[int]:
    """Loopback ports below the ephemeral range that nothing listens on."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports: list[int] = []
    while len(ports) < count:
        port = random.randrange(20000, min(low, 30000))
        with contextlib.closing(socket.socket()) as probe:
            if port not in ports and probe.connect_ex(("127.0.0.1", port)) != 0:
                ports.append(port)
    return ports


def _start(work, uds, net, api, client, binaries, processes) -> dict:
    # The proxy's own identity may review tokens and nothing else.
    rbac = kubernetes.client.RbacAuthorizationV1Api(client)
    for binding in konnectivity.server_rbac():
        rbac.create_cluster_role_binding(binding)
    server_kubeconfig = api.write_kubeconfig(work / "server.kubeconfig", pki.issue_certificate(
        api.ca, konnectivity.SERVER_USER, client=True))
    cert, key = write_cert_and_key(work, "proxy", pki.issue_certificate(
        api.ca, "konnectivity-server", ip_addresses=[net.server_ip], server=True))
    # the proxy refuses ports of the ephemeral range; its agent port is on the test's own address
    agent_port = konnectivity.AGENT_PORT
    admin_port, health_port = _unused_ports(2)
    processes["server"] = ManagedProcess("proxy-server", [str(binaries["proxy-server"]), *konnectivity.server_args(
        str(uds), str(cert), str(key), str(server_kubeconfig), agent_port=agent_port, admin_port=admin_port,
        health_port=health_port, agent_bind_address=net.server_ip)], work / "proxy-server.log").start()
    wait_until(uds.exists, 30, "the proxy socket", processes["server"])

    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_service_account(konnectivity.NAMESPACE, {"metadata": {"name": konnectivity.AGENT}})
    token = core.create_namespaced_service_account_token(konnectivity.AGENT, konnectivity.NAMESPACE, {
        "spec": {"audiences": [konnectivity.AUDIENCE], "expirationSeconds": 3600}}).status.token
    token_file = work / "agent.token"
    token_file.write_text(token)
    agent_argv = ["ip", "netns", "exec", net.agent, str(binaries["proxy-agent"]), *konnectivity.agent_args(
        net.server_ip, agent_port, str(api.ca_file), token_path=str(token_file))]

    hook_ca = pki.new_ca("hook-ca")
    hook_cert, hook_key = write_cert_and_key(work, "hook", pki.issue_certificate(
        hook_ca, "hook", dns_names=["hook.default.svc"], server=True))
    processes["webhook"] = ManagedProcess("webhook", ["ip", "netns", "exec", net.pods, sys.executable, "-c", WEBHOOK,
                                                      net.pod_ip, str(hook_cert), str(hook_key)],
                                          work / "webhook.log").start()
    core.create_namespaced_service("default", {"metadata": {"name": "hook"}, "spec": {
        "ports": [{"name": "https", "port": 443, "targetPort": 8443}]}})
    kubernetes.client.DiscoveryV1Api(client).create_namespaced_endpoint_slice("default", {
        "metadata": {"name": "hook-1", "labels": {"kubernetes.io/service-name": "hook"}}, "addressType": "IPv4",
        "endpoints": [{"addresses": [net.pod_ip], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}]})
    kubernetes.client.AdmissionregistrationV1Api(client).create_validating_webhook_configuration({
        "metadata": {"name": "tunnel-probe"},
        "webhooks": [{"name": "probe.kubenest.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "failurePolicy": "Fail", "timeoutSeconds": 5, "objectSelector": {"matchLabels": LABEL},
                      "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                 "resources": ["configmaps"]}],
                      "clientConfig": {"caBundle": base64.b64encode(pki.certificate_pem(hook_ca.cert)).decode(),
                                       "service": {"namespace": "default", "name": "hook", "path": "/validate",
                                                   "port": 443}}}]})
    return {"net": net, "api": api, "client": client, "work": work, "agent_argv": agent_argv,
            "processes": processes}


def _create_probe(client) -> str:
    """Create a labelled ConfigMap; what the API server answered (the webhook refuses every one it sees)."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    try:
        kubernetes.client.CoreV1Api(client).create_namespaced_config_map(
            "default", {"metadata": {"name": name, "labels": LABEL}}, _request_timeout=30)
    except ApiException as exc:
        return json.loads(exc.body).get("message", exc.body) if exc.body else str(exc)
    return "created"


def _until_answer(client, wanted: str, timeout: float) -> str:
    deadline, answer = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        answer = _create_probe(client)
        if wanted in answer:
            return answer
        time.sleep(1)
    return answer


def test_the_api_server_reaches_a_webhook_in_the_tenant_network_only_through_an_agent(tunnel):
    net, client, processes = tunnel["net"], tunnel["client"], tunnel["processes"]
    # no agent yet: nothing on this side can reach the pod network
    assert DENIAL not in _create_probe(client)
    with contextlib.closing(socket.socket()) as direct:  # no way from the API server's side
        direct.settimeout(3)
        assert direct.connect_ex((net.pod_ip, 8443)) != 0

    processes["agent"] = ManagedProcess("proxy-agent", tunnel["agent_argv"],
                                        tunnel["work"] / "proxy-agent.log").start()
    answer = _until_answer(client, DENIAL, 60)
    assert DENIAL in answer, f"{answer}\nagent: {processes['agent'].log_path.read_text()[-3000:]}\n" \
        f"server: {processes['server'].log_path.read_text()[-3000:]}"

    # the tunnel is the only way: without its agent the webhook is out of reach again
    processes.pop("agent").stop()
    gone = _until_answer(client, "failed calling webhook", 60)
    assert "failed calling webhook" in gone and DENIAL not in gone, gone


def test_agents_with_another_accounts_token_or_another_audience_are_turned_away(tunnel):
    """The proxy accepts only tokens of the agents' own service account made for it: a token of another account
    of the same cluster, or one of the right account for another audience, gets no tunnel."""
    work, client = tunnel["work"], tunnel["client"]
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_service_account(konnectivity.NAMESPACE, {"metadata": {"name": "intruder"}})
    tokens = {
        "other-account": core.create_namespaced_service_account_token("intruder", konnectivity.NAMESPACE, {
            "spec": {"audiences": [konnectivity.AUDIENCE]}}).status.token,
        "other-audience": core.create_namespaced_service_account_token(konnectivity.AGENT, konnectivity.NAMESPACE, {
            "spec": {"audiences": ["https://kubernetes.default.svc.cluster.local"]}}).status.token,
    }
    agents = {}
    try:
        for name, token in tokens.items():
            (work / f"{name}.token").write_text(token)
            argv = [a if not a.startswith("--service-account-token-path=") else
                    f"--service-account-token-path={work / f'{name}.token'}" for a in tunnel["agent_argv"]]
            agent_id = str(uuid.uuid4())
            agents[agent_id] = ManagedProcess(f"proxy-agent-{name}", [*argv, f"--agent-id={agent_id}"],
                                              work / f"proxy-agent-{name}.log").start()
        server_log = tunnel["processes"]["server"].log_path

        def refused_all() -> bool:
            refused = [line for line in server_log.read_text().splitlines() if "Client authentication failed" in line]
            return all(any(f'agentID="{agent_id}"' in line for line in refused) for agent_id in agents)

        wait_until(refused_all, 30, "the proxy refusing both agents")
        assert DENIAL not in _create_probe(client)
        assert not [line for line in server_log.read_text().splitlines() if "Agent connected" in line
                    and any(agent_id in line for agent_id in agents)]
    finally:
        for agent in agents.values():
            agent.stop()
