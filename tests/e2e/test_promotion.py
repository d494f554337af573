"""Node promotion and return end to end: host workers join virtual clusters and come back, driven by the operator."""

from __future__ import annotations

import base64
import ipaddress
import json
import time
import urllib.error
import urllib.request

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream

from sandbox.cluster import pod_routes
from sandbox.cluster.layout import cidrs
from sandbox.machines.config import HOST_NODE_IMAGES
from sandbox.machines.machine import Machine
from sandbox.machines.pki import client_files
from tests.support import rotation
from tests.support.http import get_text
from tests.support.k8sbin import versions
from tests.support.molecule import molecule_test
from tests.support.nodes import (
    CREDENTIAL_FILES,
    PlainPlaybook,
    agent_cert_sha256,
    agent_refuses_pin,
    assert_back_in_host_clean,
    echo_on_node,
    globalnode,
    globalnode_free,
    host_node,
    host_node_ready,
    images_dir,
    kubelet_cert_issuer,
    on_node,
    tenant_api,
    tenant_traces,
)
from tests.support.virtualclusters import (
    OperatorProcess,
    condition,
    create_vc,
    delete_vc,
    ensure_namespace,
    get_vc,
    labelled_objects,
    own_operator,
    tenant_client,
    wait_for,
    wait_ready,
)

NS = "kubenest-e2e-promote"
OPERATOR: dict[str, OperatorProcess] = {}  # the module's operator, for tests that stop and restart it


@pytest.fixture(scope="module")
def promoting(host_cluster, tmp_path_factory):
    sb, api = host_cluster
    with own_operator(sb, api, NS, tmp_path_factory.mktemp("operator"), "--node-wait-interval", "5",
                      "--resync-interval", "10", "--backoff-base", "20", leftovers_timeout=600) as proc:
        OPERATOR["proc"] = proc
        yield sb, api


def _get(url: str) -> str:
    return get_text(url)


def _webhook_from_a_tenant_pod(tenant, node: str) -> str:
    """A validating webhook served by an echo pod on `node` (TLS from a CA of the test's own); returns what the
    tenant's API server answered to a ConfigMap the webhook is asked about."""
    ca = pki.new_ca("kubenest-e2e-hook-ca")
    leaf = pki.issue_certificate(ca, "hook", dns_names=["hook.default.svc"], server=True)
    core, apps = k8s.CoreV1Api(tenant), k8s.AppsV1Api(tenant)
    pem = {"tls.crt": pki.certificate_pem(leaf.cert), "tls.key": pki.private_key_pem(leaf.key)}
    core.create_namespaced_secret("default", {"metadata": {"name": "hook-tls"}, "type": "kubernetes.io/tls",
                                              "data": {k: base64.b64encode(v).decode() for k, v in pem.items()}})
    labels = {"app": "hook"}
    apps.create_namespaced_deployment("default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hook"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "echo", "image": "kubenest.local/echo:1.0", "args": [":8443"],
                            "env": [{"name": "ECHO_TLS_CERT", "value": "/tls/tls.crt"},
                                    {"name": "ECHO_TLS_KEY", "value": "/tls/tls.key"}],
                            "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}]}],
            "volumes": [{"name": "tls", "secret": {"secretName": "hook-tls"}}]}}}})
    core.create_namespaced_service("default", {"metadata": {"name": "hook"}, "spec": {
        "selector": labels, "ports": [{"port": 443, "targetPort": 8443}]}})
    wait_for(lambda: (apps.read_namespaced_deployment("hook", "default").status.available_replicas or 0) >= 1,
             180, "the webhook's Deployment available")
    probe = {"kubenest-e2e-webhook": "yes"}
    k8s.AdmissionregistrationV1Api(tenant).create_validating_webhook_configuration({
        "metadata": {"name": "kubenest-e2e-hook"},
        "webhooks": [{"name": "hook.kubenest.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "failurePolicy": "Fail", "timeoutSeconds": 10, "objectSelector": {"matchLabels": probe},
                      "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                 "resources": ["configmaps"]}],
                      "clientConfig": {"caBundle": base64.b64encode(pki.certificate_pem(ca.cert)).decode(),
                                       "service": {"namespace": "default", "name": "hook", "path": "/validate"}}}]})
    answers = []

    def refused() -> bool:
        try:
            core.create_namespaced_config_map("default", {"metadata": {"generateName": "probe-", "labels": probe}})
            answers.append("created")
        except ApiException as exc:
            answers.append(exc.body or str(exc))
        return "refused by hook-" in answers[-1]

    try:
        wait_for(refused, 120, "the tenant's API server calling the webhook")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it answered: {answers[-1:]}") from None
    finally:
        k8s.AdmissionregistrationV1Api(tenant).delete_validating_webhook_configuration("kubenest-e2e-hook")
    return json.loads(answers[-1])["message"]


def test_seed_cr_promotes_a_worker_that_serves_the_tenant(promoting):
    sb, api = promoting
    cp = next(n for n in sb.nodes if n.role == "control_plane")
    started = time.monotonic()
    create_vc(api, NS, "seed", {"externalIP": cp.ip, "promotePolicies": [
        {"labelSelector": {"matchLabels": {"kubernetes.io/hostname": "kn-w1"}}, "nodeCount": 1}]})
    vc = wait_ready(api, NS, "seed", timeout=900)
    print(f"\nseed Ready with its node in {time.monotonic() - started:.0f}s")
    status = vc["status"]
    assert status["phase"] == "Completed" and status["nodesReady"] == "1/1"
    assert status["nodes"] == [{"name": "kn-w1", "ip": "198.18.0.12", "ready": True}]
    assert condition(vc, "NodesReady")["status"] == "True"

    tenant, _cfg = tenant_client(vc, api)
    nodes = k8s.CoreV1Api(tenant).list_node().items
    assert [n.metadata.name for n in nodes] == ["kn-w1"]
    assert nodes[0].metadata.labels["kosmos.io/globalnode"] == "kn-w1"
    assert not host_node_ready(api, "kn-w1") and "kn-w1" not in {
        n.metadata.name for n in k8s.CoreV1Api(api).list_node().items}
    gn = globalnode(api, "kn-w1")
    assert gn["status"]["state"] == "occupied" and gn["status"]["virtualCluster"] == f"{NS}/seed"

    port = echo_on_node(tenant, "web", "kn-w1")
    assert "host=web-" in _get(f"http://198.18.0.12:{port}/")  # NodePort from the host machine
    cluster_ip = k8s.CoreV1Api(tenant).read_namespaced_service("web", "default").spec.cluster_ip
    assert "host=web-" in _get(f"http://198.18.0.12:{port}/fetch?url=http://{cluster_ip}/")  # from a tenant pod

    # Pods get the MTU of the node's interface (kubenest_node_mtu: the sandbox's machines have no default route to
    # detect it from), not Cilium's 65520 fallback, with which their first connections off the node stall.
    assert set(on_node(sb, "kn-w1", "cat /sys/class/net/lxc*/mtu").split()) == {"1500"}

    # The tenant's DNS, through the `kubernetes` Service at the tenant's endpoint (never its host pod IP).
    addons = condition(vc, "AddonsReady")
    assert addons["status"] == "True", addons
    tenant_core = k8s.CoreV1Api(tenant)
    assert tenant_core.read_namespaced_service("kube-dns", "kube-system").spec.cluster_ip == "198.18.128.10"
    endpoint = tenant_core.read_namespaced_endpoints("kubernetes", "default").subsets[0]
    assert [a.ip for a in endpoint.addresses] == [cp.ip]
    kubernetes_ip = tenant_core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    assert _get(f"http://198.18.0.12:{port}/resolve?name=kubernetes.default").strip() == kubernetes_ip
    assert "host=web-" in _get(f"http://198.18.0.12:{port}/fetch?url=http://web.default.svc.cluster.local/")
    with pytest.raises(urllib.error.HTTPError) as outside:
        urllib.request.urlopen(f"http://198.18.0.12:{port}/resolve?name=kubenest-e2e.example.com", timeout=30)
    assert outside.value.code == 404  # NXDOMAIN at once: the sandbox gives its DNS no upstream

    # kubectl logs and exec: the tenant's apiserver reaches the promoted node's kubelet and checks its serving
    # certificate against the tenant's CA.
    dns_pod = tenant_core.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-dns").items[0]
    assert dns_pod.spec.node_name == "kn-w1"
    assert "CoreDNS-" in tenant_core.read_namespaced_pod_log(dns_pod.metadata.name, "kube-system")
    # Every read Cilium's agent makes is allowed: a refused one only shows as errors repeating in its log.
    [agent] = tenant_core.list_namespaced_pod("kube-system", label_selector="k8s-app=cilium").items
    agent_log = tenant_core.read_namespaced_pod_log(agent.metadata.name, "kube-system", container="cilium-agent")
    assert "is forbidden" not in agent_log, [line for line in agent_log.splitlines() if "is forbidden" in line][:3]
    version = stream(tenant_core.connect_get_namespaced_pod_exec, dns_pod.metadata.name, "kube-system",
                     command=["/usr/local/bin/coredns", "-version"], stdout=True, stderr=True, stdin=False, tty=False)
    assert version.startswith("CoreDNS-"), version

    # Those went through the Konnectivity tunnel; so does an admission webhook served from a tenant pod, which
    # only the tenant's nodes can reach.
    refused = _webhook_from_a_tenant_pod(tenant, "kn-w1")
    assert refused.startswith("admission webhook") and "refused by hook-" in refused, refused
    agents = k8s.AppsV1Api(tenant).read_namespaced_daemon_set("konnectivity-agent", "kube-system").status
    assert agents.number_ready == 1, agents

    # No host credential on the promoted node: its kubelet's certificate comes from the tenant's CA.
    present = on_node(sb, "kn-w1", "ls " + " ".join(CREDENTIAL_FILES) + " 2>/dev/null")
    assert "/etc/kubernetes/kube-proxy.conf" not in present
    assert f"kubenest-vc-ca-{NS}-seed" in kubelet_cert_issuer(sb, "kn-w1")
    _ipv6_kept_out(sb, "kn-w1", cp.name)

    # What the run did on the node is on record off the node: the agent's audit lines, taken by the run's
    # connection helper (on connecting, and when it idles out after the run), are in the operator's log.
    proc, deadline = OPERATOR["proc"], time.monotonic() + 150
    while not [e for e in _agent_audit(proc) if e["node"] == "kn-w1" and e["event"] == "exec"]:
        assert time.monotonic() < deadline, "no agent audit line of kn-w1 in the operator's log"
        time.sleep(5)
    seqs = [(e["boot"], e["seq"]) for e in _agent_audit(proc) if e["node"] == "kn-w1" and "seq" in e]
    assert len(seqs) == len(set(seqs))  # each line once


def _agent_audit(proc) -> list[dict]:
    log = (proc.log_dir / f"operator-{proc.starts}.log").read_text(errors="replace")
    return [json.loads(line[line.index("{"):]) for line in log.splitlines() if "kubenest.agent-audit" in line]


def _wait_vc(api, name, check, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        vc = get_vc(api, NS, name)
        if vc and check(vc):
            return vc
        time.sleep(2)
    raise AssertionError(f"{what} within {timeout}s; status: {(vc or {}).get('status')}")


def test_a_promoted_node_going_not_ready_is_followed_by_the_status(promoting):
    """Without any run: the daemon's look at the tenant's Nodes moves the status both ways."""
    sb, api = promoting
    get_vc(api, NS, "seed") or wait_ready(api, NS, "seed", timeout=900)
    on_node(sb, "kn-w1", "systemctl stop kubelet")
    try:
        vc = _wait_vc(api, "seed", lambda vc: condition(vc, "NodesReady").get("status") == "False", 240,
                      "NodesReady=False after the kubelet stopped")
        assert condition(vc, "NodesReady")["reason"] == "NodeNotReady"
        assert condition(vc, "Ready")["status"] == "False"
        assert vc["status"]["phase"] == "Initialized" and vc["status"]["nodesReady"] == "0/1"
        assert vc["status"]["nodes"] == [{"name": "kn-w1", "ip": "198.18.0.12", "ready": False}]
    finally:
        on_node(sb, "kn-w1", "systemctl start kubelet")
    vc = _wait_vc(api, "seed", lambda vc: condition(vc, "Ready").get("status") == "True", 240,
                  "Ready=True after the kubelet came back")
    assert vc["status"]["phase"] == "Completed" and vc["status"]["nodesReady"] == "1/1"


def _tenant_answers(tenant) -> bool:
    try:
        k8s.VersionApi(tenant).get_code(_request_timeout=3)
    except Exception:
        return False
    return True


def test_delete_with_a_broken_tenant_apiserver_returns_the_node_clean(promoting):
    """The tenant's API server is down (its Deployment scaled to 0) when the VirtualCluster is deleted: the return
    cannot drain or forget the node in the tenant, and still brings it back clean."""
    sb, api = promoting
    vc = get_vc(api, NS, "seed") or wait_ready(api, NS, "seed", timeout=900)
    tenant, _cfg = tenant_client(vc, api)
    cluster_ip = k8s.CoreV1Api(tenant).read_namespaced_service("web", "default").spec.cluster_ip
    k8s.AppsV1Api(api).patch_namespaced_deployment_scale("seed-apiserver", NS, {"spec": {"replicas": 0}})
    wait_for(lambda: not _tenant_answers(tenant), 120, "the tenant's API server down")
    seconds = delete_vc(api, NS, "seed", timeout=600)
    print(f"\nseed deleted with its API server down, node returned, in {seconds:.0f}s")
    assert host_node_ready(api, "kn-w1")
    gn = globalnode(api, "kn-w1")
    assert gn["status"]["state"] == "free" and not gn["status"].get("virtualCluster")
    assert "kubenest-vc-ca" not in kubelet_cert_issuer(sb, "kn-w1")
    leftovers = on_node(sb, "kn-w1", "ls /etc/cni/net.d; iptables-save | grep -c -- '" + cluster_ip + "' || true;"
                        " ctr -n k8s.io containers ls -q | wc -l")
    assert "10-kubenest-tenant.conflist" not in leftovers
    assert leftovers.split()[-2] == "0", f"tenant service rules left: {leftovers}"
    # No drain could run: the pod's CNI masquerade rule (a quoted comment) is removed by the reset itself.
    assert tenant_traces(sb, api, "kn-w1") == []


@rotation.turn("two-clusters-race-for-one-node")
def test_two_virtual_clusters_race_for_one_node(promoting):
    _sb, api = promoting
    selector = {"matchLabels": {"kubernetes.io/hostname": "kn-w2"}}
    for name in ("left", "right"):
        create_vc(api, NS, name, {"promotePolicies": [{"labelSelector": selector, "nodeCount": 1}]})

    def settled():
        vcs = {name: get_vc(api, NS, name) for name in ("left", "right")}
        ready = [n for n, vc in vcs.items() if condition(vc, "Ready").get("status") == "True"]
        waiting = [n for n, vc in vcs.items() if condition(vc, "NodesReady").get("reason") == "WaitingForNodes"]
        return (ready, waiting, vcs) if len(ready) == 1 and len(waiting) == 1 else None

    ready, waiting, vcs = wait_for(settled, 900, "one of two racing virtual clusters to win kn-w2")
    loser = vcs[waiting[0]]
    assert loser["status"]["phase"] == "Pending" and condition(loser, "Ready")["status"] == "False"
    assert "0 of 1 nodes available" in condition(loser, "NodesReady")["message"]
    assert globalnode(api, "kn-w2")["status"]["virtualCluster"] == f"{NS}/{ready[0]}"

    delete_vc(api, NS, ready[0], timeout=600)
    vc = wait_ready(api, NS, waiting[0], timeout=600)  # picks the node up once it is free
    assert vc["status"]["nodes"][0]["name"] == "kn-w2"
    delete_vc(api, NS, waiting[0], timeout=600)
    assert globalnode(api, "kn-w2")["status"]["state"] == "free" and host_node_ready(api, "kn-w2")


def _set_fault(sb, step: str | None) -> None:
    """The operator reads its site variables at every run: a fault there hits the next run only."""
    path = sb.state_dir / "operator-vars.yml"
    data = yaml.safe_load(path.read_text())
    data.pop("node_promote_fault_step", None)
    if step:
        data["node_promote_fault_step"] = step
    path.write_text(yaml.safe_dump(data))


def test_a_failed_promotion_step_shows_in_the_status_and_is_retried(promoting):
    """Through a VirtualCluster: the failed step in the Ready condition, the node back in the host, clean,
    while the retry waits; the retry (with backoff) promotes the node once the fault is gone."""
    sb, api = promoting
    _set_fault(sb, "Kubelet")
    try:
        create_vc(api, NS, "orphan", {"promoteResources": {"nodes": ["kn-w1"]}})

        def failed():
            vc = get_vc(api, NS, "orphan") or {}
            retrying = "retrying in" in (vc.get("status") or {}).get("message", "")
            return vc if condition(vc, "Ready").get("reason") == "NodeStepFailed" and retrying else None

        vc = wait_for(failed, 900, "Ready reason NodeStepFailed and a retry planned")
        message = condition(vc, "Ready")["message"]
        assert "failed at step Kubelet and was rolled back" in message, message
        assert vc["status"]["reason"] == "RunFailed" and vc["status"]["phase"] != "Completed"
        assert_back_in_host_clean(sb, api, "kn-w1", tenant_api(api, NS, "orphan"))
    finally:
        _set_fault(sb, None)
    vc = wait_ready(api, NS, "orphan", timeout=900)
    assert vc["status"]["nodes"] == [{"name": "kn-w1", "ip": "198.18.0.12", "ready": True}]


def test_nodes_of_a_force_deleted_virtual_cluster_come_back(promoting):
    """A VirtualCluster removed without its finalizer while no operator ran: the next operator returns its node.
    Its first return run fails at a step; the node stays held, and the next resync finishes the return."""
    sb, api = promoting
    if get_vc(api, NS, "orphan") is None:
        create_vc(api, NS, "orphan", {"promoteResources": {"nodes": ["kn-w1"]}})
    wait_ready(api, NS, "orphan", timeout=900)
    custom = k8s.CustomObjectsApi(api)
    OPERATOR["proc"].stop()
    _set_fault(sb, "HostKubelet")
    try:
        custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", "orphan",
                                              {"metadata": {"finalizers": None}})
        custom.delete_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", "orphan")
        wait_for(lambda: get_vc(api, NS, "orphan") is None, 60, "the VirtualCluster gone")
        assert globalnode(api, "kn-w1")["status"]["state"] == "occupied"
        OPERATOR["proc"].start()
        log = OPERATOR["proc"].log_dir / f"operator-{OPERATOR['proc'].starts}.log"
        wait_for(lambda: "returning kn-w1 failed at step HostKubelet" in log.read_text(errors="replace"), 600,
                 "the first return run failing at HostKubelet")
        status = globalnode(api, "kn-w1")["status"]
        assert status["state"] == "returning" and status["virtualCluster"] == f"{NS}/orphan", status
    finally:
        _set_fault(sb, None)
        if OPERATOR["proc"].proc.poll() is not None:
            OPERATOR["proc"].start()
    started = time.monotonic()
    wait_for(lambda: globalnode_free(api, "kn-w1") and host_node_ready(api, "kn-w1"), 600,
             "kn-w1 free and Ready in the host")
    print(f"\nnode of the vanished virtual cluster back {time.monotonic() - started:.0f}s after the failed return")
    assert_back_in_host_clean(sb, api, "kn-w1")


def _budgeted_pair_on(api, nodes: tuple[str, str], spare: str) -> None:
    """A host Deployment with one replica on each of `nodes` (required anti-affinity, made while `spare` is
    cordoned) and a budget of one unavailable pod: draining both nodes at once must wait for the first
    replacement, which only `spare` can take."""
    core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
    labels = {"app": "budgeted"}
    for node in (*nodes, spare):  # a node an earlier test returned may still be joining the host again
        wait_for(lambda node=node: host_node_ready(api, node), 300, f"{node} Ready in the host")
    core.patch_node(spare, {"spec": {"unschedulable": True}})
    try:
        apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}}
        echo = {"name": "echo", "image": "kubenest.local/echo:1.0",
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}}
        apps.create_namespaced_deployment(NS, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "budgeted"},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels}, "spec": {"affinity": apart, "containers": [echo]}}}})
        k8s.PolicyV1Api(api).create_namespaced_pod_disruption_budget(NS, {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "budgeted"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}})

        def placed():
            pods = core.list_namespaced_pod(NS, label_selector="app=budgeted").items
            ready = [p for p in pods
                     if p.status.phase == "Running" and all(c.ready for c in p.status.container_statuses or [])]
            return sorted(p.spec.node_name for p in ready) == sorted(nodes) or None
        wait_for(placed, 180, f"one budgeted replica on each of {', '.join(nodes)}")
    finally:
        core.patch_node(spare, {"spec": {"unschedulable": False}})


@pytest.fixture
def budgeted_pair(promoting):
    _sb, api = promoting
    try:
        _budgeted_pair_on(api, ("kn-w2", "kn-w3"), spare="kn-w1")
        yield
    finally:  # a budget left behind would hold up every later drain
        for delete in (k8s.AppsV1Api(api).delete_namespaced_deployment,
                       k8s.PolicyV1Api(api).delete_namespaced_pod_disruption_budget):
            try:
                delete("budgeted", NS)
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.mark.usefixtures("budgeted_pair")
@rotation.turn("plain-playbook-with-the-globalnodes-inventory")
def test_plain_playbook_with_the_globalnodes_inventory_promotes_named_nodes(promoting, tmp_path):
    """The proposal form (promoteResources.nodes) through ansible-playbook alone, nodes listed by the plugin.
    Both nodes hold a replica of a budgeted host Deployment, so their concurrent drains must wait for each
    other's replacement (the budget refuses the second eviction until the first replacement is ready). Both are
    held when the virtual cluster goes, one for the platform team, one because its agent was stopped; neither gets
    anything of the host's until node_clear.yml rejoins them."""
    sb, api = promoting
    ensure_namespace(api, "kubenest-e2e-playbook")
    playbook = PlainPlaybook(sb, "kubenest-e2e-playbook", "named", tmp_path)
    spec = {"promoteResources": {"nodes": ["kn-w2", "kn-w3"]}}
    try:  # a failed create is removed too: its nodes must not stay out of the pool for the next tests
        playbook.ok("present", spec)
        tenant = playbook.tenant(api)
        ready = {n.metadata.name for n in k8s.CoreV1Api(tenant).list_node().items
                 if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)}
        assert ready == {"kn-w2", "kn-w3"}
        for name, ip in (("kn-w2", "198.18.0.13"), ("kn-w3", "198.18.0.14")):
            assert globalnode(api, name)["status"]["virtualCluster"] == "kubenest-e2e-playbook/named"
            port = echo_on_node(tenant, f"on-{name}", name)
            assert f"host=on-{name}-" in _get(f"http://{ip}:{port}/")  # each node's NodePort, its local pod
    finally:
        # kn-w3's agent stopped, as a tenant's root could: the deletion holds it unreached and goes on.
        unreached = Machine(sb, next(n for n in sb.nodes if n.name == "kn-w3"))
        unreached.nsenter(["systemctl", "stop", "kubenest-agent"])
        try:
            playbook.ok("absent", spec, node_promote_hold_returned=True, kubenest_return_reach_timeout=5)
        finally:
            unreached.nsenter(["systemctl", "start", "kubenest-agent"])
            unreached.wait_agent(client_files(sb), time.monotonic() + 60)
    for name, reason in (("kn-w2", "HeldForClearance"), ("kn-w3", "AgentUnreachable")):  # out of the pool
        status = globalnode(api, name)["status"]
        assert status["state"] == "held" and status["virtualCluster"] == "kubenest-e2e-playbook/named", status
        claimed = next(c for c in status["conditions"] if c["type"] == "Claimed")
        assert claimed["reason"] == reason, claimed
        assert host_node(api, name) is None  # no Node, so no kubelet credential of the host was approved
    # Held for the platform team: wiped, nothing of the host's given back.
    assert "not rejoined" in next(c for c in globalnode(api, "kn-w2")["status"]["conditions"]
                                  if c["type"] == "Claimed")["message"]
    files = on_node(sb, "kn-w2", "ls /var/lib/kubelet/pki /etc/kubernetes 2>/dev/null; systemctl is-active kubelet")
    assert ".pem" not in files and ".conf" not in files and files.strip().endswith("inactive"), files
    # Clearing rejoins both, the unreached one wiped first as a return does.
    playbook.clear("kn-w2", "kn-w3")
    for name in ("kn-w2", "kn-w3"):
        assert_back_in_host_clean(sb, api, name)
        assert globalnode(api, name)["status"]["agent"]["certificateSHA256"] == [agent_cert_sha256(sb, name)]


# The role's molecule scenario repeats a promotion the tests above show: make test-long runs it, make test on its
# turn (tests/support/rotation.py), beside the etcd and control-plane scenarios.
@rotation.turn("molecule-node-promote")
def test_molecule_node_promote_scenario(promoting, tmp_path):
    """extensions/molecule/node_promote: a named worker promoted into a virtual cluster by the role, a second
    converge that changes nothing, verified from both sides; its cleanup deletes the virtual cluster, and the
    node is back in the host clean."""
    sb, api = promoting
    node = wait_for(lambda: next((n.name for n in sb.nodes if n.role == "workers" and globalnode_free(api, n.name)
                                  and host_node_ready(api, n.name)), None), 300, "a free worker")
    pki = sb.state_dir / "pki"
    molecule_test("node_promote", tmp_path, timeout=1200, env={
        "KUBENEST_MOLECULE_NODE": node, "KUBENEST_MOLECULE_HOST_KUBECONFIG": str(sb.state_dir / "kubeconfig"),
        "KUBENEST_MOLECULE_IMAGES_DIR": str(images_dir(sb)), "KUBENEST_MOLECULE_AGENT_CA_PATH": str(pki / "ca"),
        "KUBENEST_MOLECULE_HOST_IMAGES": json.dumps(HOST_NODE_IMAGES),
        "KUBENEST_AGENT_CA_FILE": str(pki / "ca.crt"), "KUBENEST_AGENT_CERT_FILE": str(pki / "client.crt"),
        "KUBENEST_AGENT_KEY_FILE": str(pki / "client.key")})
    assert_back_in_host_clean(sb, api, node)
    assert tenant_traces(sb, api, node) == []


CALICO_ARCHIVES = ("calico-node", "calico-cni", "calico-kube-controllers")


def test_calico_pod_network_on_a_promoted_node(promoting):
    """podNetwork calico on a promoted node, with Calico's published images imported from the catalog: the node
    turns Ready under calico-node, pods get addresses from the pool, and the return leaves no Calico trace."""
    sb, api = promoting
    catalog = images_dir(sb)
    missing = [name for name in CALICO_ARCHIVES if not (catalog / f"{name}.oci.tar").exists()]
    if missing:
        pytest.skip(f"Calico's published images are not in the image catalog {catalog} (missing "
                    f"{', '.join(missing)}): this machine cannot pull from quay.io, and Calico cannot be built "
                    "from its Go module here")
    node = wait_for(lambda: next((n.name for n in sb.nodes if n.role == "workers" and globalnode_free(api, n.name)
                                  and host_node_ready(api, n.name)), None), 300, "a free worker")
    create_vc(api, NS, "calico", {"podNetwork": "calico", "promoteResources": {"nodes": [node]}})
    try:
        vc = wait_ready(api, NS, "calico", timeout=900)
        assert vc["status"]["nodesReady"] == "1/1" and condition(vc, "AddonsReady")["status"] == "True"
        tenant, _cfg = tenant_client(vc, api)
        daemonset = k8s.AppsV1Api(tenant).read_namespaced_daemon_set("calico-node", "kube-system")
        assert daemonset.status.number_ready == 1
        port = echo_on_node(tenant, "web", node)
        ip = next(n.ip for n in sb.nodes if n.name == node)
        assert "host=web-" in _get(f"http://{ip}:{port}/")
    finally:
        delete_vc(api, NS, "calico")
    assert_back_in_host_clean(sb, api, node)
    assert tenant_traces(sb, api, node) == []


def _nodes_ready(vc) -> str:
    return ((vc or {}).get("status") or {}).get("nodesReady", "")


def _host_pod(api, node: str) -> str:
    """An echo pod of the host cluster on `node`; its IP once it runs."""
    core = k8s.CoreV1Api(api)
    core.create_namespaced_pod(NS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"back-on-{node}"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                 "containers": [{"name": "echo", "image": "kubenest.local/echo:1.0"}]}})

    def running():
        pod = core.read_namespaced_pod(f"back-on-{node}", NS)
        ready = pod.status.phase == "Running" and all(c.ready for c in pod.status.container_statuses or [])
        return pod.status.pod_ip if ready and pod.status.pod_ip else None
    return wait_for(running, 180, f"a host pod on {node}")


def _tenant_echo(tenant, node: str) -> None:
    """A pod with a NodePort Service on `node`, in a namespace whose name the node must forget on return."""
    core = k8s.CoreV1Api(tenant)
    try:
        core.create_namespace({"metadata": {"name": "scale-apps"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    apps, labels = k8s.AppsV1Api(tenant), {"app": f"on-{node}"}
    apps.create_namespaced_deployment("scale-apps", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"on-{node}"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "echo", "image": "kubenest.local/echo:1.0"}]}}}})
    core.create_namespaced_service("scale-apps", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": f"on-{node}"},
        "spec": {"type": "NodePort", "selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}})
    wait_for(lambda: (apps.read_namespaced_deployment(f"on-{node}", "scale-apps").status.available_replicas
                      or 0) >= 1, 180, f"a tenant pod on {node}")


def _from_pod(tenant, namespace: str, app: str, *args: str) -> tuple[int, str]:
    """`echo ARGS` run inside the tenant pod labelled app=`app` (kubectl exec): exit code and output."""
    core = k8s.CoreV1Api(tenant)
    pod = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items[0].metadata.name
    resp = stream(core.connect_get_namespaced_pod_exec, pod, namespace, command=["/usr/local/bin/echo", *args],
                  stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False)
    resp.run_forever(timeout=60)
    out = resp.read_stdout() + resp.read_stderr()
    return resp.returncode, out


def _policy(tenant, namespace: str, name: str, spec: dict) -> None:
    k8s.NetworkingV1Api(tenant).create_namespaced_network_policy(namespace, {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name}, "spec": spec})


def _fetch_until(tenant, app: str, url: str, succeeds: bool) -> tuple[int, str]:
    """`echo fetch URL` from the pod app=`app` until it succeeds (or fails, with `succeeds` False)."""
    def verdict():
        got = _from_pod(tenant, "scale-apps", app, "fetch", url)
        return got if (got[0] == 0) == succeeds else None
    return wait_for(verdict, 60, f"fetch of {url} from {app} to {'succeed' if succeeds else 'fail'}")


def _tenant_network_checks(tenant, pool: list[str]) -> None:
    """Two promoted nodes: pods reach each other across nodes by address and by Service name, the tenant's DNS
    answers, and NetworkPolicy is enforced (default deny, then an allow rule opens exactly one direction)."""
    a, b = (f"on-{name}" for name in pool)
    core = k8s.CoreV1Api(tenant)
    pods = {p.metadata.labels["app"]: p for p in core.list_namespaced_pod("scale-apps").items}
    assert pods[a].spec.node_name != pods[b].spec.node_name
    b_ip = pods[b].status.pod_ip
    assert ipaddress.ip_address(b_ip) in ipaddress.ip_network("198.18.64.0/18")  # the tenant's pod range
    rc, out = _from_pod(tenant, "scale-apps", a, "fetch", f"http://{b_ip}:8080/")
    assert rc == 0 and f"host={b}-" in out, out
    rc, out = _from_pod(tenant, "scale-apps", a, "fetch", f"http://{b}.scale-apps.svc.cluster.local/")
    assert rc == 0 and f"host={b}-" in out, out
    kubernetes_ip = core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    assert _from_pod(tenant, "scale-apps", b, "resolve", "kubernetes.default.svc.cluster.local") \
        == (0, kubernetes_ip + "\n")
    rc, out = _from_pod(tenant, "scale-apps", b, "resolve", "kubenest-e2e.example.com")
    assert rc == 2, out  # NXDOMAIN: the sandbox gives the tenant's DNS no upstream

    # A policy takes a moment to reach every node's datapath: each verdict is awaited, then checked.
    _policy(tenant, "scale-apps", "default-deny", {"podSelector": {}, "policyTypes": ["Ingress"]})
    rc, out = _fetch_until(tenant, a, f"http://{b_ip}:8080/", succeeds=False)
    assert rc == 1 and "Timeout" in out, out
    _policy(tenant, "scale-apps", f"{a}-to-{b}", {
        "podSelector": {"matchLabels": {"app": b}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": a}}}], "ports": [{"port": 8080}]}]})
    _rc, out = _fetch_until(tenant, a, f"http://{b_ip}:8080/", succeeds=True)
    assert f"host={b}-" in out
    rc, out = _fetch_until(tenant, b, f"http://{pods[a].status.pod_ip}:8080/", succeeds=False)
    assert rc == 1 and "Timeout" in out, out  # the other direction stays closed
    networking = k8s.NetworkingV1Api(tenant)
    for name in ("default-deny", f"{a}-to-{b}"):
        networking.delete_namespaced_network_policy(name, "scale-apps")


@rotation.turn("node-count-up-and-down")
def test_node_count_up_and_down_then_delete_leaves_nothing_of_the_tenant(promoting):
    """nodeCount 1 -> 2 -> 1 -> delete: the surplus goes back, every node ends free, Ready in the host and
    without tenant files, containers or kube-proxy rules. While it holds two nodes, a second tenant with a node of
    its own is kept apart from it on the host's node network."""
    sb, api = promoting
    pool = ["kn-w2", "kn-w3"]
    custom = k8s.CustomObjectsApi(api)

    def scale(count: int) -> dict:
        custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", "scale", {
            "spec": {"promotePolicies": [{"labelSelector": {"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": pool}]}, "nodeCount": count}]}})
        return _wait_vc(api, "scale", lambda vc: _nodes_ready(vc) == f"{count}/{count}"
                        and condition(vc, "Ready").get("status") == "True", 900, f"{count} nodes Ready")

    before = {name: agent_cert_sha256(sb, name) for name in pool}
    create_vc(api, NS, "scale", {"promotePolicies": [{"labelSelector": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": pool}]}, "nodeCount": 1}]})
    vc = _wait_vc(api, "scale", lambda vc: condition(vc, "Ready").get("status") == "True", 900, "1 node Ready")
    first = [n["name"] for n in vc["status"]["nodes"]]
    assert len(first) == 1 and first[0] in pool
    tenant = tenant_api(api, NS, "scale")

    vc = scale(2)
    held = sorted(n["name"] for n in vc["status"]["nodes"])
    assert held == pool and all(n["ready"] for n in vc["status"]["nodes"])
    assert {n.metadata.name for n in k8s.CoreV1Api(tenant).list_node().items} == set(pool)
    for name in pool:
        assert globalnode(api, name)["status"]["virtualCluster"] == f"{NS}/scale" and not host_node(api, name)
        _tenant_echo(tenant, name)
    _tenant_network_checks(tenant, pool)

    # A second tenant with one node of its own (created after the first settled: runs that move nodes at the same
    # moment may apply views read a moment apart, docs/node-promotion.md): the host keeps the two apart.
    create_vc(api, NS, "iso", {"promoteResources": {"nodes": ["kn-w1"]}})
    try:
        _tenant_nodes_kept_apart(sb, api, vc, pool[0], wait_ready(api, NS, "iso", timeout=900), "kn-w1")
    finally:
        delete_vc(api, NS, "iso", timeout=600)
    assert_back_in_host_clean(sb, api, "kn-w1")

    vc = scale(1)
    kept = [n["name"] for n in vc["status"]["nodes"]]
    returned = [name for name in pool if name not in kept]
    assert len(kept) == 1 and len(returned) == 1
    assert_back_in_host_clean(sb, api, returned[0], tenant)
    assert tenant_traces(sb, api, returned[0], "scale-apps") == []
    # A new agent identity: the GlobalNode accepts only the certificate the agent presents now, not the old one.
    now = agent_cert_sha256(sb, returned[0])
    assert now != before[returned[0]]
    assert globalnode(api, returned[0])["status"]["agent"]["certificateSHA256"] == [now]
    assert "not the one recorded for it" in agent_refuses_pin(sb, returned[0], before[returned[0]])
    assert {n.metadata.name for n in k8s.CoreV1Api(tenant).list_node().items} == set(kept)

    delete_vc(api, NS, "scale", timeout=600)
    ip = {n.name: n.ip for n in sb.nodes}
    cp = next(n.name for n in sb.nodes if n.role == "control_plane")
    for name in ("kn-w1", *pool):
        assert_back_in_host_clean(sb, api, name)
        assert tenant_traces(sb, api, name, "scale-apps") == []
        assert _node_connects(sb, name, ip[cp], 6443)  # the host's again
    # Every node's filter forgets the tenants once no node is theirs.
    for name in (cp, "kn-w1", *pool):
        assert not [rule for rule in _isolation_chain(sb, name) if any(ip[n] in rule for n in ("kn-w1", *pool))], name
    # Back in the host, the returned nodes serve host pods again: each has a pod subnet of the host's range from
    # the host's controller-manager, and a pod on each resolves names through the host's DNS and reaches a host
    # Service by name.
    core = k8s.CoreV1Api(api)
    for name in pool:
        assert ipaddress.ip_network(core.read_node(name).spec.pod_cidr).subnet_of(ipaddress.ip_network(cidrs()[0]))
    pod_routes.refresh(sb, cidrs()[0])  # the sandbox host's routes to pods follow the nodes' new subnets
    kubernetes_ip = core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    dns_ip = core.read_namespaced_service("kube-dns", "kube-system").spec.cluster_ip
    for name in pool:
        pod_ip = _host_pod(api, name)
        assert _get(f"http://{pod_ip}:8080/resolve?name=kubernetes.default").strip() == kubernetes_ip
        assert _get(f"http://{pod_ip}:8080/resolve?name=kube-dns.kube-system.svc.cluster.local").strip() == dns_ip
        core.delete_namespaced_pod(f"back-on-{name}", NS, grace_period_seconds=0)


def test_a_version_without_images_is_refused_naming_the_available_ones(promoting):
    """Refused before anything is written: no pod waits for an image that does not exist."""
    _sb, api = promoting
    create_vc(api, NS, "old", {"kubernetesVersion": "v1.35.9"})

    def refused():
        ready = condition(get_vc(api, NS, "old"), "Ready")
        return ready if ready.get("reason") == "UnsupportedVersion" else None

    ready = wait_for(refused, 300, "old to be refused with UnsupportedVersion")
    assert ready["status"] == "False"
    assert "v1.35.9" in ready["message"] and f"available: {versions()['KUBERNETES_VERSION']}" in ready["message"]
    assert all(names == [] for names in labelled_objects(api, NS, "old").values())
    delete_vc(api, NS, "old")


def _node_connects(sb, node: str, address: str, port: int) -> bool:
    """Whether root on `node` opens a TCP connection to address:port (what a tenant's admin could try)."""
    probe = f"import socket; socket.create_connection(({address!r}, {port}), 3).close()"
    return on_node(sb, node, f"python3 -c \"{probe}\" 2>/dev/null && echo open || echo closed").strip() == "open"


def _ipv6_kept_out(sb, tenant_node: str, host_node: str) -> None:
    """Root on a tenant's node turns IPv6 on and gives itself a link-local address, which no IPv4 rule names, to
    reach a host node whose IPv6 is on (as on most machines; the sandbox's have it off) and where something
    listens on every IPv6 address. The host node's IPv6 chain keeps it out."""
    port = 18443
    listener = (f"import socket; s = socket.socket(socket.AF_INET6); s.bind(('::', {port})); s.listen(4); "
                "s.settimeout(60); [s.accept()[0].close() for _ in range(4)]")
    turn_on = "sysctl -qw net.ipv6.conf.host0.disable_ipv6=0 && ip -6 addr replace {} dev host0 nodad"
    try:
        on_node(sb, host_node, turn_on.format("fe80::1:11/64"))
        on_node(sb, tenant_node, turn_on.format("fe80::1:12/64"))
        on_node(sb, host_node, f"setsid -f timeout 90 python3 -c \"{listener}\" >/dev/null 2>&1; sleep 1")
        chain = on_node(sb, host_node, "ip6tables -t mangle -S KUBENEST-ISOLATION; ip6tables -t mangle -S PREROUTING")
        assert "-A KUBENEST-ISOLATION -j DROP" in chain, chain
        assert "-A PREROUTING -i host0 -j KUBENEST-ISOLATION" in chain, chain
        assert _node_connects(sb, host_node, "fe80::1:11%host0", port)  # it listens (the node's own traffic)
        assert not _node_connects(sb, tenant_node, "fe80::1:11%host0", port), f"root on {tenant_node} reached " \
            f"{host_node} over IPv6"
    finally:
        for node, address in ((host_node, "fe80::1:11/64"), (tenant_node, "fe80::1:12/64")):
            on_node(sb, node, f"ip -6 addr del {address} dev host0; sysctl -qw net.ipv6.conf.host0.disable_ipv6=1; "
                    "true")


def _isolation_chain(sb, node: str) -> list[str]:
    return [line for line in on_node(sb, node, "iptables -t mangle -S KUBENEST-ISOLATION 2>/dev/null").splitlines()
            if line.startswith("-A")]


def _tenant_nodes_kept_apart(sb, api, vc_a: dict, node_a: str, vc_b: dict, node_b: str) -> None:
    """Two tenants with a node each. Root on a tenant node, and a tenant pod, reach that tenant's API server
    NodePort on the host and nothing else there: not the host's API server, not the other tenant's API server,
    not the host's kubelets, pods or etcd. The two tenants' nodes do not reach each other, VXLAN included."""
    ip = {n.name: n.ip for n in sb.nodes}
    cp = next(n.name for n in sb.nodes if n.role == "control_plane")
    # A kubelet the host still has: a worker's, or the control-plane node's when every worker is a tenant's.
    host_kubelet = next((n.name for n in sb.nodes if n.role == "workers" and host_node(api, n.name)), cp)
    port_a, port_b = (int(vc["status"]["endpoint"].rsplit(":", 1)[1]) for vc in (vc_a, vc_b))
    core = k8s.CoreV1Api(api)
    dns_pod = next(p.status.pod_ip for p in core.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-dns")
                   .items if p.status.phase == "Running" and p.status.pod_ip)
    etcd_a = core.list_namespaced_pod(NS, label_selector="app.kubernetes.io/component=etcd,"
                                      f"kosmos.io/virtualcluster={vc_a['metadata']['name']}").items[0].status.pod_ip

    assert _node_connects(sb, node_a, ip[cp], port_a)  # its own API server, the way its kubelet goes
    closed = {"the host's API server": (ip[cp], 6443), "the other tenant's API server": (ip[cp], port_b),
              "a host kubelet": (ip[host_kubelet], 10250), "the host's DNS pod": (dns_pod, 53),
              "its own etcd": (etcd_a, 2379), "the other tenant's node": (ip[node_b], 10250)}
    reached = [what for what, (address, port) in closed.items() if _node_connects(sb, node_a, address, port)]
    assert reached == [], f"root on {node_a} reached {reached}"
    assert not _node_connects(sb, node_b, ip[node_a], 10250)
    _ipv6_kept_out(sb, node_a, host_kubelet)

    # VXLAN: datagrams from the other tenant's node to this one's tunnel port meet the DROP rule.
    def drops() -> int:
        listed = on_node(sb, node_a, "iptables -t mangle -L KUBENEST-ISOLATION -v -n -x")
        return sum(int(line.split()[0]) for line in listed.splitlines()
                   if " DROP " in f" {line} " and ip[node_b] in line.split())
    before = drops()
    on_node(sb, node_b, "python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            f"[s.sendto(b'x' * 64, ('{ip[node_a]}', 8472)) for _ in range(5)]\"")
    assert drops() >= before + 5

    # A tenant pod leaves its node with the node's address: the same holds for it (the host's API server, the
    # other tenant's, a host pod, its own etcd, the other tenant's node).
    tenant_a, _cfg = tenant_client(vc_a, api)
    echo_on_node(tenant_a, "probe", node_a)
    _rc, out = _from_pod(tenant_a, "default", "probe", "fetch", f"http://{ip[cp]}:{port_a}/")
    assert "HTTPS server" in out, out  # TLS asked for plain HTTP: its own API server answered
    for address, port in ((ip[cp], 6443), (ip[cp], port_b), (dns_pod, 8181), (etcd_a, 2379),
                          (ip[node_b], 10250)):
        rc, out = _from_pod(tenant_a, "default", "probe", "fetch", f"http://{address}:{port}/")
        # Dropped on the way (a timeout) or never routed there (host pods): no answer either way.
        assert rc == 1 and ("Timeout" in out or "network is unreachable" in out), (address, port, out)
