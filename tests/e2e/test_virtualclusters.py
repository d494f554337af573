"""VirtualClusters end to end on the sandbox host cluster, driven by the real operator."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from sandbox.cluster import pod_routes
from sandbox.cluster.layout import cidrs
from tests.support import rotation
from tests.support.http import json_request
from tests.support.jwt_issuer import JwtIssuer
from tests.support.k8sbin import versions as pinned_versions
from tests.support.tenant_poller import USER_TIMEOUT, TenantPoller
from tests.support.virtualclusters import (
    REPO_ROOT,
    condition,
    create_vc,
    delete_vc,
    get_vc,
    labelled_objects,
    own_operator,
    tenant_client,
    tenant_write,
    wait_for,
    wait_ready,
)

NS = "kubenest-e2e-vc"
EXPECTED = {"Deployment": 3, "StatefulSet": 1, "Service": 2, "Secret": 5, "ConfigMap": 1, "NetworkPolicy": 3,
            "PodDisruptionBudget": 4, "Pod": 4, "PersistentVolumeClaim": 1}
POOL = "/var/lib/kubenest/volumes"  # kosmos.kubenest.local_volumes on the control-plane machine


@pytest.fixture(scope="module")
def operator(host_cluster, tmp_path_factory):
    sb, api = host_cluster
    # The site variables give runs the agent credentials, which wiping a released etcd volume needs.
    with own_operator(sb, api, NS, tmp_path_factory.mktemp("operator"), leftovers_timeout=300) as proc:
        yield proc, api


def _counts(api, name):
    return {kind: len(names) for kind, names in labelled_objects(api, NS, name).items()}


def test_virtual_cluster_becomes_ready_and_the_tenant_can_use_it(operator):
    _proc, api = operator
    started = time.monotonic()
    # externalIP: a worker's address, where the NodePort answers too, rather than the control-plane node's.
    create_vc(api, NS, "alpha", {"externalIP": "198.18.0.13"})
    vc = wait_ready(api, NS, "alpha")
    print(f"\nalpha Ready in {time.monotonic() - started:.0f}s")
    status = vc["status"]
    assert status["phase"] == "Completed"
    assert status["endpoint"].startswith("https://198.18.0.13:")
    assert "kubeconfig" not in vc["spec"]  # the credential stays in the Secret the status names
    # No nodes: the DNS is installed and waits for them; the control plane alone makes it Ready.
    addons = condition(vc, "AddonsReady")
    assert (addons["status"], addons["reason"]) == ("False", "NoNodes"), addons
    tenant, config = tenant_client(vc, api)
    assert config["clusters"][0]["cluster"]["server"] == status["endpoint"]  # the kubeconfig goes there
    core = k8s.CoreV1Api(tenant)
    assert core.read_namespaced_service("kube-dns", "kube-system").spec.cluster_ip == "198.18.128.10"
    assert [a.ip for a in core.read_namespaced_endpoints("kubernetes", "default").subsets[0].addresses] == \
        ["198.18.0.13"]
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="team-a")))
    k8s.ApiextensionsV1Api(tenant).create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.tenant.example"},
        "spec": {"group": "tenant.example", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]}})
    k8s.AppsV1Api(tenant).create_namespaced_deployment("team-a", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "kubenest.local/echo:1.0"}]}}}})
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert names == {"default", "kube-node-lease", "kube-public", "kube-system", "team-a"}
    assert _counts(api, "alpha") == EXPECTED
    # Components start in order (etcd, the API server, then the controllers): none of them had to restart.
    pods = k8s.CoreV1Api(api).list_namespaced_pod(NS, label_selector="kosmos.io/virtualcluster=alpha").items
    restarts = {p.metadata.name: sum(c.restart_count for c in p.status.container_statuses or []) for p in pods}
    assert restarts and not any(restarts.values()), restarts
    assert vc["status"]["kubernetesVersion"] == pinned_versions()["KUBERNETES_VERSION"]
    # Its only etcd member takes connections as soon as it listens (no readiness probe period in between).
    assert k8s.CoreV1Api(api).read_namespaced_service("alpha-etcd", NS).spec.publish_not_ready_addresses


def test_kubectl_kubenest_shows_the_status_and_hands_out_a_kubeconfig_that_reaches_the_tenant(operator, tmp_path):
    """The kubectl plugin, run by the real kubectl with the sandbox's admin kubeconfig, on alpha of the test above."""
    from sandbox.machines.config import from_env
    from tests.support.k8sbin import binary

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(from_env().state_dir / "kubeconfig")}

    def kubectl(*args):
        return subprocess.run([str(binary("kubectl")), *args], capture_output=True, text=True, env=env, timeout=60,
                              check=False)
    status = kubectl("kubenest", "status", f"{NS}/alpha")
    assert status.returncode == 0, status.stderr
    assert "Phase:       Completed" in status.stdout and "Endpoint:    https://198.18.0.13:" in status.stdout
    tenant_kubeconfig = tmp_path / "alpha.kubeconfig"
    taken = kubectl("kubenest", "kubeconfig", f"{NS}/alpha", "-o", str(tenant_kubeconfig))
    assert taken.returncode == 0, taken.stderr
    used = kubectl("--kubeconfig", str(tenant_kubeconfig), "get", "namespace", "team-a", "-o", "name")
    assert used.returncode == 0 and used.stdout.strip() == "namespace/team-a", used.stderr


def test_extra_flags_reach_the_tenants_api_server_and_host_paths_are_refused(operator):
    """spec.controlPlane.apiServer.extraArgs on alpha: the API server rolls with the flag and the tenant sees its
    effect (pods get the not-ready toleration for the seconds it says); a flag naming a host file is refused at
    admission and changes nothing."""
    _proc, api = operator
    custom = k8s.CustomObjectsApi(api)
    args = {"controlPlane": {"apiServer": {"extraArgs": {"default-not-ready-toleration-seconds": "117"}}}}
    generation = custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", "alpha",
                                                       {"spec": args})["metadata"]["generation"]
    started = time.monotonic()
    wait_for(lambda: (get_vc(api, NS, "alpha")["status"].get("observedGeneration") == generation
                      and condition(get_vc(api, NS, "alpha"), "Ready").get("status") == "True"), 300,
             "alpha Ready with its API server's extra flag")
    core = k8s.CoreV1Api(tenant_client(get_vc(api, NS, "alpha"), api)[0])

    def not_ready_seconds():  # a pod nothing schedules: admission alone sets its tolerations
        pod = core.create_namespaced_pod("team-a", {"metadata": {"generateName": "toleration-",
                                                                 "labels": {"probe": "toleration"}}, "spec": {
            "containers": [{"name": "c", "image": "kubenest.local/echo:1.0"}]}})
        return next(t.toleration_seconds for t in pod.spec.tolerations if t.key == "node.kubernetes.io/not-ready")

    wait_for(lambda: not_ready_seconds() == 117, 60, "pods admitted by the rolled API server")
    print(f"\nalpha rolled its API server with the extra flag in {time.monotonic() - started:.0f}s")
    core.delete_collection_namespaced_pod("team-a", label_selector="probe=toleration")
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment("alpha-apiserver", NS)
    assert "--default-not-ready-toleration-seconds=117" in deployment.spec.template.spec.containers[0].command

    with pytest.raises(ApiException) as refused:
        custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", "alpha", {"spec": {
            "controlPlane": {"controllerManager": {"extraArgs": {"cloud-config": "/etc/kubernetes/pki/ca.key"}}}}})
    assert refused.value.status == 422
    assert "takes a file, a directory or a config file" in refused.value.body, refused.value.body
    assert get_vc(api, NS, "alpha")["metadata"]["generation"] == generation


def _as_token(kubeconfig: dict, token: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """A request to the tenant's API server with a bearer token, checking the server against the tenant's CA."""
    cluster = kubeconfig["clusters"][0]["cluster"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    return json_request(cluster["server"] + path, method, context, token, body)


def test_issuer_tokens_sign_tenant_users_in_and_the_audit_log_is_the_tenants_own(operator, host_cluster):
    """spec.controlPlane.apiServer.authentication and .audit on alpha: a JWT issuer served from the sandbox's host
    (its CA inline in the spec) signs a token, the tenant's API server takes it as user oidc:alice, RBAC in the
    tenant decides what she may do, and her requests appear in the audit log streamed by the API server pod's
    audit-log container. Taken out of the spec again, both are gone and her token is refused."""
    _proc, api = operator
    sb, _api = host_cluster
    custom = k8s.CustomObjectsApi(api)
    with JwtIssuer(address=sb.host_ip) as issuer:
        api_server = {"authentication": issuer.authentication("kubenest-e2e"), "audit": {"policy": {"rules": [
            {"level": "Metadata", "resources": [{"group": "", "resources": ["pods"]}], "namespaces": ["team-a"]},
            {"level": "None"}]}}}
        started = time.monotonic()
        generation = custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", "alpha", {
            "spec": {"controlPlane": {"apiServer": api_server}}})["metadata"]["generation"]
        wait_for(lambda: (get_vc(api, NS, "alpha")["status"].get("observedGeneration") == generation
                          and condition(get_vc(api, NS, "alpha"), "Ready").get("status") == "True"), 300,
                 "alpha Ready with its authentication and audit")
        rolled = time.monotonic() - started
        tenant, kubeconfig = tenant_client(get_vc(api, NS, "alpha"), api)
        token = issuer.token("alice", "kubenest-e2e", groups=("devs",))
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        # The server may still be fetching the issuer's keys right after it started.

        def reviewed():
            answered = _as_token(kubeconfig, token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                 review)
            return answered if answered[0] != 401 else None

        status, answer = wait_for(reviewed, 60, "alice's token accepted")
        assert status == 201 and answer["status"]["userInfo"]["username"] == "oidc:alice", answer
        assert "oidc:devs" in answer["status"]["userInfo"]["groups"], answer
        assert _as_token(kubeconfig, token, "GET", "/api/v1/namespaces/team-a/pods")[0] == 403
        k8s.RbacAuthorizationV1Api(tenant).create_namespaced_role_binding("team-a", {
            "metadata": {"name": "devs-view"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                           "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "oidc:devs"}]})
        wait_for(lambda: _as_token(kubeconfig, token, "GET", "/api/v1/namespaces/team-a/pods")[0] == 200, 30,
                 "the devs group viewing team-a")
        assert _as_token(kubeconfig, token, "GET", "/api/v1/namespaces/kube-system/pods")[0] == 403
        assert _as_token(kubeconfig, issuer.token("alice", "elsewhere"), "POST",
                         "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)[0] == 401
        asked = time.monotonic()

        def alices_list_in_the_audit_log():
            pods = k8s.CoreV1Api(api).list_namespaced_pod(
                NS, label_selector="kosmos.io/virtualcluster=alpha,app.kubernetes.io/component=apiserver").items
            serving = [p for p in pods if p.metadata.deletion_timestamp is None and p.status.phase == "Running"
                       and "audit-log" in [c.name for c in p.spec.containers]]
            events = [json.loads(line) for pod in serving for line in k8s.CoreV1Api(api).read_namespaced_pod_log(
                pod.metadata.name, NS, container="audit-log").splitlines()]
            listed = [e for e in events if e["user"]["username"] == "oidc:alice" and e["verb"] == "list"
                      and e["stage"] == "ResponseComplete"]
            # Both of her lists in team-a, the refused and the allowed one; streamed within moments of each.
            return listed if {e["responseStatus"]["code"] for e in listed} == {200, 403} else None

        listed = wait_for(alices_list_in_the_audit_log, 60, "alice's requests in the audit log")
        print(f"\nalpha rolled with an issuer and an audit policy in {rolled:.0f}s; {len(listed)} events of alice's "
              f"lists in the streamed audit log, looked for {time.monotonic() - asked:.1f}s after her last request")
        assert {e["objectRef"]["namespace"] for e in listed} == {"team-a"}  # kube-system is not audited
        pod = k8s.AppsV1Api(api).read_namespaced_deployment("alpha-apiserver", NS).spec.template.spec
        audit_volume = next(v for v in pod.volumes if v.name == "audit-log")
        assert audit_volume.empty_dir is not None and audit_volume.host_path is None

        generation = custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", "alpha", {
            "spec": {"controlPlane": {"apiServer": {"authentication": None, "audit": None}}}})["metadata"][
                "generation"]
        wait_for(lambda: (get_vc(api, NS, "alpha")["status"].get("observedGeneration") == generation
                          and condition(get_vc(api, NS, "alpha"), "Ready").get("status") == "True"), 300,
                 "alpha Ready without them")
        wait_for(lambda: _as_token(kubeconfig, token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                   review)[0] == 401, 60, "alice's token refused again")
    pod = k8s.AppsV1Api(api).read_namespaced_deployment("alpha-apiserver", NS).spec.template.spec
    assert "audit-log" not in [c.name for c in pod.containers]
    assert "--authentication-config" not in " ".join(pod.containers[0].command)
    assert k8s.CoreV1Api(api).read_namespaced_config_map("alpha-apiserver-config", NS).data in (None, {})


def test_no_run_artifact_and_no_status_holds_key_material(operator):
    """After alpha's runs: the tenant's private keys appear nowhere in what the operator keeps."""
    proc, api = operator
    core = k8s.CoreV1Api(api)
    secrets = {name: core.read_namespaced_secret(name, NS).data
               for name in ("alpha-pki", "alpha-etcd-pki", "alpha-admin-kubeconfig")}
    kubeconfig = yaml.safe_load(base64.b64decode(secrets["alpha-admin-kubeconfig"]["kubeconfig"]))
    keys = [value for data in secrets.values() for key, value in data.items() if key.endswith(".key")]
    keys.append(kubeconfig["users"][0]["user"]["client-key-data"])
    needles = {b"PRIVATE KEY"}
    for value in keys:
        needles.add(value.encode()[-64:])  # base64, as stored
        pem_body = [line for line in base64.b64decode(value).splitlines() if not line.startswith(b"-----")]
        needles |= set(pem_body[1:-1])  # whole base64 lines of the key itself

    def inputs():
        return [p for p in proc.runs_dir.rglob("*") if p.is_file() and p.parent.name in ("env", "tmp", "inventory")]
    # Inputs go after each run; one that is still going (the periodic look may have started one) keeps its own
    # until it ends.
    try:
        wait_for(lambda: not inputs(), 600, "the runs under way to end", interval=2)
    except AssertionError:
        pass
    assert not inputs(), "a run's inputs stayed after it ended"
    files = [p for p in proc.runs_dir.rglob("*") if p.is_file()]
    assert any(p.name == "stdout" for p in files)  # the artifacts are there to be searched
    found = {str(p.relative_to(proc.runs_dir)) for p in files for n in needles if n in p.read_bytes()}
    assert not found, f"key material in {sorted(found)}"
    status = json.dumps(get_vc(api, NS, "alpha")["status"]).encode()
    assert not [n for n in needles if n in status]


def _rejected(client_api) -> bool:
    try:
        k8s.CoreV1Api(client_api).list_namespace(_request_timeout=10)
    except ApiException as exc:
        return exc.status == 401
    except (HTTPError, OSError):  # TLS: neither side trusts the other's CA
        return True
    return False


def test_the_calico_role_passes_a_server_side_dry_run_against_a_tenant_api_server(operator, tmp_path):
    """The calico role in check mode against alpha's API server (which runs Cilium): every object is validated
    by the tenant's API server and none is written."""
    _proc, api = operator
    alpha = get_vc(api, NS, "alpha") or wait_ready(api, NS, "alpha")
    tenant, config = tenant_client(alpha, api)
    kubeconfig = tmp_path / "alpha.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    kubeconfig.chmod(0o600)
    play = tmp_path / "calico.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Pod network", "ansible.builtin.include_role": {"name": "kosmos.kubenest.calico"},
         "vars": {"calico_kubeconfig": str(kubeconfig), "calico_api_server_host": "198.18.0.13",
                  "calico_api_server_port": int(alpha["status"]["endpoint"].rsplit(":", 1)[1])}}]}]))
    venv = Path(sys.executable).parent
    proc = subprocess.run([str(venv / "ansible-playbook"), "-i", "localhost,", "-c", "local", "--check",
                           "-e", f"ansible_python_interpreter={sys.executable}", str(play)],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PATH": f"{venv}:{os.environ['PATH']}", "ANSIBLE_NOCOLOR": "1"})
    assert proc.returncode == 0 and "changed=1" in proc.stdout, proc.stdout[-4000:] + proc.stderr[-2000:]
    crds = k8s.ApiextensionsV1Api(tenant).list_custom_resource_definition().items
    assert not [c.metadata.name for c in crds if "projectcalico" in c.spec.group]
    assert "calico-node" not in {d.metadata.name for d in
                                 k8s.AppsV1Api(tenant).list_namespaced_daemon_set("kube-system").items}


def test_two_virtual_clusters_side_by_side_are_isolated(operator, host_cluster):
    sb, api = host_cluster
    # same namespace as alpha: names must not collide; beta asks for Calico as its pod network
    create_vc(api, NS, "beta", {"podNetwork": "calico"})
    beta = wait_ready(api, NS, "beta")
    addons = condition(beta, "AddonsReady")
    assert (addons["status"], addons["reason"]) == ("False", "NoNodes"), addons
    beta_apps = k8s.AppsV1Api(tenant_client(beta, api)[0])
    node = beta_apps.read_namespaced_daemon_set("calico-node", "kube-system").spec.template.spec.containers[0]
    assert node.image.startswith("quay.io/calico/node:") and \
        {e.name: e.value for e in node.env}["CALICO_IPV4POOL_CIDR"] == "198.18.64.0/18"
    assert "cilium" not in {d.metadata.name for d in beta_apps.list_namespaced_daemon_set("kube-system").items}
    alpha = get_vc(api, NS, "alpha") or wait_ready(api, NS, "alpha")
    alpha_api, alpha_cfg = tenant_client(alpha, api)
    beta_api, beta_cfg = tenant_client(beta, api)
    for client_api, cfg, other_server in ((alpha_api, alpha_cfg, beta["status"]["endpoint"]),
                                          (beta_api, beta_cfg, alpha["status"]["endpoint"]),
                                          (alpha_api, alpha_cfg, api.configuration.host)):
        client_api.configuration.host = other_server
        assert _rejected(client_api), f"{cfg['clusters'][0]['name']} credentials accepted by {other_server}"
    # and the tenant sees nothing of the host
    beta_api, _cfg = tenant_client(beta, api)
    assert NS not in {ns.metadata.name for ns in k8s.CoreV1Api(beta_api).list_namespace().items}
    assert k8s.CoreV1Api(beta_api).list_node().items == []


def _probe_pod(sb, api, name: str) -> str:
    """An echo pod of the host in the virtual clusters' own namespace, on a worker; its IP once it runs, with the
    sandbox host's routes to pods following the nodes' subnets (earlier modules moved nodes in and out)."""
    core = k8s.CoreV1Api(api)
    core.create_namespaced_pod(NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                    "spec": {"containers": [{"name": "echo", "image": "kubenest.local/echo:1.0"}]}})

    def running():
        pod = core.read_namespaced_pod(name, NS)
        ready = pod.status.phase == "Running" and all(c.ready for c in pod.status.container_statuses or [])
        return pod.status.pod_ip if ready else None
    ip = wait_for(running, 180, f"pod {name}")
    pod_routes.refresh(sb, cidrs()[0])
    return ip


def _fetch_from(pod_ip: str, url: str) -> tuple[int, str]:
    """What `url` answered as seen from the echo pod at `pod_ip` (502: no answer at all)."""
    query = urllib.parse.urlencode({"url": url})
    try:
        with urllib.request.urlopen(f"http://{pod_ip}:8080/fetch?{query}", timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _component_ip(api, name: str, component: str) -> str:
    """The IP of a pod of the component that serves: a pod of an earlier roll (the tests above change the API
    server's flags) keeps its IP while it terminates and answers nothing there."""
    def serving():
        pods = k8s.CoreV1Api(api).list_namespaced_pod(
            NS, label_selector=f"kosmos.io/virtualcluster={name},app.kubernetes.io/component={component}").items
        return next((p.status.pod_ip for p in pods
                     if p.status.pod_ip and p.metadata.deletion_timestamp is None and p.status.phase == "Running"
                     and all(c.ready for c in p.status.container_statuses or [])), None)
    return wait_for(serving, 180, f"a serving {component} pod of {name}")


def test_network_policies_let_only_its_api_server_reach_a_tenants_etcd(operator, host_cluster):
    """Enforced by the host's pod network (Cilium): a host pod in the same namespace, and the sandbox host
    itself, reach the tenant API server's port but not its etcd, which answers only its own API server."""
    sb, api = host_cluster
    alpha = get_vc(api, NS, "alpha") or wait_ready(api, NS, "alpha")
    assert condition(alpha, "Ready").get("status") == "True"  # its API server does reach etcd
    etcd, apiserver = _component_ip(api, "alpha", "etcd"), _component_ip(api, "alpha", "apiserver")
    probe = _probe_pod(sb, api, "policy-probe")
    try:
        # A TLS port asked for plain HTTP answers 400: the connection itself went through.
        # The probe's identity reaches the other nodes' Cilium a moment after the pod runs: until then its
        # packets may be dropped, so the allowed path is asked until it answers (the denied one after that).
        answers = []

        def api_server_answers():
            answers.append(_fetch_from(probe, f"http://{apiserver}:6443/"))
            return answers[-1][0] != 502
        wait_for(api_server_answers, 120, f"an answer of {apiserver}:6443 to the probe pod")
        status, answer = answers[-1]
        assert status == 400 and "HTTPS server" in answer, answers
        status, answer = _fetch_from(probe, f"http://{etcd}:2379/")
        assert status == 502 and "Timeout" in answer, (status, answer)
        with socket.create_connection((apiserver, 6443), timeout=5):
            pass
        with pytest.raises(TimeoutError), socket.create_connection((etcd, 2379), timeout=5):
            pass
    finally:
        k8s.CoreV1Api(api).delete_namespaced_pod("policy-probe", NS, grace_period_seconds=0)


def _etcd_volume(api, name):
    """The local volume that holds a virtual cluster's etcd data: (PersistentVolume, node, path)."""
    claim = k8s.CoreV1Api(api).read_namespaced_persistent_volume_claim(f"data-{name}-etcd-0", NS)
    assert claim.status.phase == "Bound"
    volume = k8s.CoreV1Api(api).read_persistent_volume(claim.spec.volume_name)
    assert volume.spec.local.path.startswith(POOL + "/vol-")
    return volume, volume.metadata.labels["kosmos.io/local-volume-node"], volume.spec.local.path


def test_etcd_keeps_the_tenant_state_when_its_pod_is_deleted(operator, host_cluster):
    sb, api = host_cluster
    alpha = get_vc(api, NS, "alpha") or wait_ready(api, NS, "alpha")
    volume, node, path = _etcd_volume(api, "alpha")
    data_dir = sb.machine_dir(node) / "rootfs" / path.lstrip("/")
    assert (data_dir / "data" / "member").is_dir()  # etcd writes into the pool directory
    core = k8s.CoreV1Api(api)
    before = core.read_namespaced_pod("alpha-etcd-0", NS)
    core.delete_namespaced_pod("alpha-etcd-0", NS)

    def serving_again():
        try:
            pod = core.read_namespaced_pod("alpha-etcd-0", NS)
        except ApiException:
            return None
        ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
        return pod if pod.metadata.uid != before.metadata.uid and ready else None

    after = wait_for(serving_again, 300, "a new alpha-etcd-0 to be ready")
    assert after.spec.node_name == node
    tenant, _config = tenant_client(alpha, api)

    def tenant_state():
        try:
            names = {ns.metadata.name for ns in k8s.CoreV1Api(tenant).list_namespace(_request_timeout=10).items}
            return names, k8s.AppsV1Api(tenant).read_namespaced_deployment("web", "team-a", _request_timeout=10)
        except (ApiException, HTTPError, OSError):
            return None

    names, web = wait_for(tenant_state, 120, "alpha's API server to answer from the new etcd member")
    assert "team-a" in names and web.metadata.name == "web"
    assert k8s.ApiextensionsV1Api(tenant).read_custom_resource_definition("gadgets.tenant.example")
    assert _etcd_volume(api, "alpha")[0].metadata.uid == volume.metadata.uid
    wait_ready(api, NS, "alpha")


def test_a_scaled_down_api_server_and_a_deleted_policy_are_reported_and_put_back(operator):
    """Tried as a user would break a tenant: its API server scaled to 0 (kubectl scale) and its etcd's
    NetworkPolicy deleted. Ready turns False within a resync period (30 s, the operator's default) saying both,
    and the operator's repair run puts both back without a spec change."""
    _proc, api = operator
    alpha = get_vc(api, NS, "alpha") or wait_ready(api, NS, "alpha")
    tenant, _config = tenant_client(alpha, api)
    apps, policies = k8s.AppsV1Api(api), k8s.NetworkingV1Api(api)
    started = time.monotonic()
    apps.patch_namespaced_deployment_scale("alpha-apiserver", NS, {"spec": {"replicas": 0}}, field_manager="kubectl")
    policies.delete_namespaced_network_policy("alpha-etcd", NS)

    def not_ready():
        vc = get_vc(api, NS, "alpha")
        return vc if condition(vc, "Ready").get("status") == "False" else None

    vc = wait_for(not_ready, 30 + 30, "alpha's Ready to turn False (a resync period and a look)", interval=1)
    noticed = time.monotonic() - started
    ready = condition(vc, "Ready")
    assert ready["reason"] == "ControlPlaneDegraded"
    assert ready["message"].startswith(
        "Deployment alpha-apiserver: spec.replicas is 0 where the collection set 1; NetworkPolicy alpha-etcd is "
        "missing"), ready["message"]
    wait_ready(api, NS, "alpha")
    repaired = time.monotonic() - started
    assert apps.read_namespaced_deployment("alpha-apiserver", NS).spec.replicas == 1
    assert policies.read_namespaced_network_policy("alpha-etcd", NS).spec.pod_selector.match_labels
    assert "team-a" in {ns.metadata.name for ns in k8s.CoreV1Api(tenant).list_namespace(_request_timeout=10).items}
    assert condition(get_vc(api, NS, "alpha"), "Ready")["reason"] == "Reconciled"
    print(f"\nalpha broken: Ready=False after {noticed:.0f}s, repaired and Ready after {repaired:.0f}s")


# Its turn in make test (tests/support/rotation.py); the three control-plane machines of
# tests/e2e/test_ha_control_planes.py show three members through a lost machine in make test-long.
@rotation.turn("three-etcd-members-rolled-frozen-and-one-lost")
def test_three_etcd_members_keep_the_tenant_serving_while_one_is_gone(operator):
    _proc, api = operator
    create_vc(api, NS, "trio", {"etcdMembers": 3})
    trio = wait_ready(api, NS, "trio")
    core = k8s.CoreV1Api(api)
    selector = "kosmos.io/virtualcluster=trio,app.kubernetes.io/component=etcd"
    pods = core.list_namespaced_pod(NS, label_selector=selector).items
    assert sorted(p.metadata.name for p in pods) == ["trio-etcd-0", "trio-etcd-1", "trio-etcd-2"]
    claims = core.list_namespaced_persistent_volume_claim(NS, label_selector=selector).items
    assert len({c.spec.volume_name for c in claims}) == 3  # a volume of its own for each member
    # Several members: only ready ones take the API server's connections.
    assert not core.read_namespaced_service("trio-etcd", NS).spec.publish_not_ready_addresses
    tenant, config = tenant_client(trio, api)
    tenant_core = k8s.CoreV1Api(tenant)
    tenant_core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="team-b")))

    def member_back(name: str, gone: str):
        def back():
            try:
                pod = core.read_namespaced_pod(name, NS)
            except ApiException as exc:
                if exc.status == 404:  # the StatefulSet controller has not made the new pod yet
                    return False
                raise
            ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
            return pod.metadata.uid != gone and ready

        wait_for(back, 300, f"{name} to rejoin")

    # Members stopping one at a time, as a roll stops them (a CA rotation, an upgrade): the tenant's API answers
    # every request meanwhile, each waiting as a user's client would; the slowest answer is printed.
    # A stopping member sends the API server's etcd client away at once, and the client reconnects through the
    # Service at once: where the Service's rules still sent it to that member the connection was refused and the
    # client's retries backed off, holding requests for seconds (once more than 10). So the API server's log must
    # show no refused connection to the Service either: each member must stop only once its endpoint is gone.
    with TenantPoller(config, timeout=USER_TIMEOUT) as rolled:
        for member in ("trio-etcd-2", "trio-etcd-1", "trio-etcd-0"):
            gone = core.read_namespaced_pod(member, NS).metadata.uid
            core.delete_namespaced_pod(member, NS)
            member_back(member, gone)
    refused = _refused_dials(core, "trio", core.read_namespaced_service("trio-etcd", NS).spec.cluster_ip,
                             time.monotonic() - rolled.started)
    print(f"\nthree etcd members stopped and back one at a time: {rolled.summary()}; "
          f"{len(refused)} connections to etcd's Service refused")
    assert rolled.ok > 20 and rolled.failed == 0, rolled.summary()
    assert not refused, "\n".join(refused[:5])

    # Every member frozen at once for a few seconds (a stalled disk, a host under pressure): the API server's
    # readiness check waits on etcd, and the only API server must stay behind the tenant's address, its requests
    # waiting as a user's would, rather than be dropped from its Service and refuse connections.
    # The poller's one request waits out the freeze, so the pod's Ready condition says whether the server ever
    # left its Service meanwhile.
    apiserver = "kosmos.io/virtualcluster=trio,app.kubernetes.io/component=apiserver"
    before = _ready_since(core, apiserver)
    with TenantPoller(config, timeout=USER_TIMEOUT) as frozen:
        time.sleep(2)
        _frozen_for(_etcd_members(NS, "trio"), ETCD_FREEZE_S)
        time.sleep(5)
    print(f"three etcd members frozen for {ETCD_FREEZE_S} s: {frozen.summary()}")
    assert frozen.ok > 20 and frozen.failed == 0, frozen.summary()
    assert _ready_since(core, apiserver) == before, "the API server left its Service while etcd was frozen"

    # A member lost outright: the other two are a quorum.
    gone = core.read_namespaced_pod("trio-etcd-1", NS).metadata.uid
    core.delete_namespaced_pod("trio-etcd-1", NS, grace_period_seconds=0)
    tenant_write(tenant_core, "team-b", "written-by-two", {"quorum": "2 of 3"}, 60,
                 "the tenant API to write with two members")
    member_back("trio-etcd-1", gone)
    assert tenant_core.read_namespaced_config_map("written-by-two", "team-b").data == {"quorum": "2 of 3"}
    wait_ready(api, NS, "trio")
    delete_vc(api, NS, "trio")
    assert all(names == [] for names in labelled_objects(api, NS, "trio").values())


# Longer than the kubelet's default probe timeout (1 s) three times over, shorter than a user's client waits.
ETCD_FREEZE_S = 5


def _etcd_members(namespace: str, name: str) -> list[int]:
    """The process IDs of a tenant's etcd members. The sandbox's machines share this machine's kernel, so their
    processes are visible here; a member's name is its pod's, which the StatefulSet gives as `<name>-etcd-<i>`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone, or not a process
            continue
        if argv and argv[0].endswith(b"etcd") and any(a.startswith(f"--name={name}-etcd-".encode()) for a in argv):
            found.append(int(entry.name))
    assert len(found) == 3, f"etcd processes of {namespace}/{name} on this machine: {found}"
    return found


def _refused_dials(core, name: str, address: str, seconds: float) -> list[str]:
    """What the API servers of virtual cluster `name` logged in the last `seconds` about a connection to
    `address`:2379 that was refused (grpc's log of a failed dial)."""
    selector = f"kosmos.io/virtualcluster={name},app.kubernetes.io/component=apiserver"
    refused = []
    for pod in core.list_namespaced_pod(NS, label_selector=selector).items:
        log = core.read_namespaced_pod_log(pod.metadata.name, NS, container="kube-apiserver",
                                           since_seconds=int(seconds) + 2)
        refused += [line for line in log.splitlines()
                    if f'Addr: "{address}:2379"' in line and "connection refused" in line]
    return refused


def _ready_since(core, selector: str) -> dict:
    """Each pod's name and when its Ready condition last changed, None where it is not Ready."""
    pods = core.list_namespaced_pod(NS, label_selector=selector).items
    return {p.metadata.name: next((c.last_transition_time for c in p.status.conditions or []
                                   if c.type == "Ready" and c.status == "True"), None) for p in pods}


def _frozen_for(pids: list[int], seconds: float) -> None:
    """Stops the processes for `seconds` and lets them go on, whatever happens meanwhile."""
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(seconds)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def _apply_and_wait(api, name: str, spec: dict, what: str) -> dict:
    generation = k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
        "kosmos.io", "v1alpha1", NS, "virtualclusters", name, {"spec": spec})["metadata"]["generation"]

    def applied():
        vc = get_vc(api, NS, name)
        done = vc["status"].get("observedGeneration") == generation and condition(vc, "Ready").get("status") == "True"
        return vc if done else None

    return wait_for(applied, 300, what)


def _all_rolled(api, name: str, component: str):
    """The component's Deployment with every replica of its current template ready, and no older pod left."""
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(f"{name}-{component}", NS)
    status, wanted = deployment.status, deployment.spec.replicas
    pods = k8s.CoreV1Api(api).list_namespaced_pod(
        NS, label_selector=f"kosmos.io/virtualcluster={name},app.kubernetes.io/component={component}").items
    done = (status.observed_generation == deployment.metadata.generation and status.updated_replicas == wanted
            and status.ready_replicas == wanted and status.replicas == wanted and len(pods) == wanted)
    return deployment if done else None


def _disrupt(api, kubeconfig: dict, name: str, extra_args: dict) -> tuple[TenantPoller, TenantPoller]:
    """A client polls the tenant every 100 ms while one API server pod is deleted, then while a changed flag
    rolls every API server. Returns the two polls."""
    core = k8s.CoreV1Api(api)
    selector = f"kosmos.io/virtualcluster={name},app.kubernetes.io/component=apiserver"
    with TenantPoller(kubeconfig) as deleted:
        time.sleep(2)
        victim = core.list_namespaced_pod(NS, label_selector=selector).items[0].metadata.name
        core.delete_namespaced_pod(victim, NS)
        wait_for(lambda: _all_rolled(api, name, "apiserver") and not any(
            p.metadata.name == victim for p in core.list_namespaced_pod(NS, label_selector=selector).items),
            180, f"{victim} replaced", interval=0.5)
        time.sleep(2)
    with TenantPoller(kubeconfig) as rolled:
        time.sleep(2)
        _apply_and_wait(api, name, {"controlPlane": {"apiServer": {"extraArgs": extra_args}}},
                        f"{name} Ready with its API servers rolled")
        wait_for(lambda: _all_rolled(api, name, "apiserver"), 180, f"{name}'s API servers rolled", interval=0.5)
        time.sleep(2)
    return deleted, rolled


@rotation.turn("two-api-servers-through-a-lost-pod-and-a-roll")
def test_two_api_servers_keep_the_tenant_answering_through_a_lost_pod_and_a_roll(operator, host_cluster):
    """One VirtualCluster, first with one API server, then scaled to two in place: a client polling its API every
    100 ms (a connection per request, no retries) while an API server pod is deleted and while a changed flag
    rolls them. With two, no request fails; the counts with one are printed beside them. The controllers elect a
    leader, every component has a disruption budget, and ControlPlaneSpread says whether each API server has a
    host node of its own (the sandbox's tenants run on its control-plane machines)."""
    _proc, api = operator
    create_vc(api, NS, "duo", {})
    duo = wait_ready(api, NS, "duo")
    _tenant, kubeconfig = tenant_client(duo, api)
    one = _disrupt(api, kubeconfig, "duo", {"v": "2"})

    started = time.monotonic()
    duo = _apply_and_wait(api, "duo", {"apiServerReplicas": 2}, "duo Ready with two API servers")
    scaled = time.monotonic() - started
    apps = k8s.AppsV1Api(api)
    for component in ("apiserver", "controller-manager", "scheduler"):
        assert wait_for(lambda c=component: _all_rolled(api, "duo", c), 120, f"two {component}s").spec.replicas == 2
    duo_label = "kosmos.io/virtualcluster=duo"
    budgets = k8s.PolicyV1Api(api).list_namespaced_pod_disruption_budget(NS, label_selector=duo_label)
    assert sorted((b.metadata.name, b.spec.max_unavailable) for b in budgets.items) == [
        ("duo-apiserver", 1), ("duo-controller-manager", 1), ("duo-etcd", 1), ("duo-scheduler", 1)]
    nodes = [n for n in k8s.CoreV1Api(api).list_node(label_selector="node-role.kubernetes.io/control-plane").items
             if not n.spec.unschedulable]
    spread = condition(duo, "ControlPlaneSpread")
    assert spread["status"] == ("True" if len(nodes) >= 2 else "False"), spread
    assert spread["reason"] == ("OnePerHostNode" if len(nodes) >= 2 else "TooFewHostNodes"), spread
    affinity = apps.read_namespaced_deployment("duo-apiserver", NS).spec.template.spec.affinity.pod_anti_affinity
    assert bool(affinity.required_during_scheduling_ignored_during_execution) == (len(nodes) >= 2)
    tenant, kubeconfig = tenant_client(duo, api)

    def holder(lease):
        try:
            return k8s.CoordinationV1Api(tenant).read_namespaced_lease(lease, "kube-system").spec.holder_identity
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    holders = {lease: wait_for(lambda name=lease: holder(name), 60, f"a leader of {lease}")
               for lease in ("kube-controller-manager", "kube-scheduler")}
    pods = {p.metadata.name for p in k8s.CoreV1Api(api).list_namespaced_pod(NS, label_selector=duo_label).items}
    assert all(holder.split("_")[0] in pods for holder in holders.values()), (holders, pods)
    two = _disrupt(api, kubeconfig, "duo", {"v": "3"})

    print(f"\nduo scaled to two API servers in {scaled:.0f}s; ControlPlaneSpread {spread['status']} "
          f"({len(nodes)} control-plane host node(s))")
    for count, (deleted, rolled) in (("one", one), ("two", two)):
        print(f"  {count} API server(s): pod deleted: {deleted.summary()}; roll: {rolled.summary()}")
    assert two[0].ok > 20 and two[1].ok > 20, "the polls did not run"
    assert (two[0].failed, two[1].failed) == (0, 0), (two[0].summary(), two[1].summary())
    delete_vc(api, NS, "duo")
    assert all(names == [] for names in labelled_objects(api, NS, "duo").values())


def test_operator_killed_mid_reconcile_recovers_without_duplicates(operator):
    proc, api = operator
    create_vc(api, NS, "gamma", {})
    wait_for(lambda: ((get_vc(api, NS, "gamma") or {}).get("status") or {}).get("progress", {}).get("tasksDone", 0)
             >= 5, 300, "the reconcile of gamma to be under way", interval=0.5)
    proc.kill()
    time.sleep(3)
    proc.start()
    wait_ready(api, NS, "gamma")
    assert _counts(api, "gamma") == EXPECTED


def test_delete_leaves_nothing_labelled_and_wipes_the_etcd_volume(operator, host_cluster):
    sb, _api = host_cluster
    _proc, api = operator
    wait_ready(api, NS, "gamma")
    volume, node, path = _etcd_volume(api, "gamma")
    data_dir = sb.machine_dir(node) / "rootfs" / path.lstrip("/")
    assert any(data_dir.iterdir())
    seconds = delete_vc(api, NS, "gamma")
    print(f"\ngamma deleted in {seconds:.0f}s")
    assert labelled_objects(api, NS, "gamma") == {k: [] for k in EXPECTED}
    # The volume is wiped and offered again: the next claim starts empty.

    def available():
        pv = k8s.CoreV1Api(api).read_persistent_volume(volume.metadata.name)
        return pv if pv.status.phase == "Available" else None

    again = wait_for(available, 60, "the volume to be available")
    assert again.spec.claim_ref is None
    assert data_dir.is_dir() and not any(data_dir.iterdir())
    assert data_dir.stat().st_mode & 0o777 == 0o700


def test_a_control_plane_that_cannot_start_fails_fast_with_the_pods_reason(operator):
    _proc, api = operator
    started = time.monotonic()
    # A repository without images: no catalog to refuse it beforehand, so the kubelet finds out.
    create_vc(api, NS, "unpullable", {"imageRepository": "kubenest.local/absent"})

    def failing():
        ready = condition(get_vc(api, NS, "unpullable"), "Ready")
        return ready if ready.get("reason") == "ImagePullBackOff" else None

    ready = wait_for(failing, 300, "unpullable to fail with ImagePullBackOff")
    print(f"\nunpullable reported ImagePullBackOff after {time.monotonic() - started:.0f}s")
    assert ready["status"] == "False"
    assert "pod unpullable-etcd-0: ImagePullBackOff" in ready["message"]
    assert "kubenest.local/absent/etcd" in ready["message"]
    delete_vc(api, NS, "unpullable")
    assert labelled_objects(api, NS, "unpullable") == {k: [] for k in EXPECTED}


def test_bad_spec_is_refused_at_admission(host_cluster):
    sb, _api = host_cluster
    manifest = f"""
apiVersion: kosmos.io/v1alpha1
kind: VirtualCluster
metadata: {{namespace: {NS}, name: bad}}
spec:
  promotePolicies:
    - labelSelector: {{matchLabels: {{zone: a}}}}
      nodeCount: -2
"""
    proc = subprocess.run(["kubectl", "--kubeconfig", str(sb.state_dir / "kubeconfig"), "apply", "-f", "-"],
                          input=manifest, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert "spec.promotePolicies[0].nodeCount" in proc.stderr


def test_unsatisfiable_spec_waits_with_a_condition_that_says_why(operator):
    _proc, api = operator
    create_vc(api, NS, "greedy", {"promotePolicies": [
        {"labelSelector": {"matchLabels": {"kubenest.example/pool": "gpu"}}, "nodeCount": 5}]})

    def waiting():
        nodes = condition(get_vc(api, NS, "greedy"), "NodesReady")
        return nodes if nodes.get("reason") == "WaitingForNodes" else None

    nodes = wait_for(waiting, 600, "greedy to report WaitingForNodes")
    vc = get_vc(api, NS, "greedy")
    assert nodes["status"] == "False" and "0 of 5 nodes available" in nodes["message"]
    assert "promotePolicies[0] matches 0 free node(s), wants 5" in nodes["message"]
    assert condition(vc, "Ready")["status"] == "False" and vc["status"]["phase"] == "Pending"
    assert vc["status"]["nodesReady"] == "0/5"
    delete_vc(api, NS, "greedy")


def _playbook(name: str, kubeconfig, variables: dict, tmp_path, *args) -> subprocess.CompletedProcess:
    """A playbook of the collection run by ansible-playbook alone; variables from a file (the passphrase)."""
    vars_file = tmp_path / f"{name}-vars.json"
    vars_file.write_text(json.dumps({"kubenest_host_kubeconfig": str(kubeconfig), **variables}))
    vars_file.chmod(0o600)
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(REPO_ROOT / "playbooks" / name),
                           "-e", f"@{vars_file}", *args], capture_output=True, text=True, timeout=900, check=False)


def test_a_backup_restores_into_a_new_virtual_cluster_with_the_tenants_objects(operator, host_cluster, tmp_path):
    sb, _api = host_cluster
    _proc, api = operator
    kubeconfig = sb.state_dir / "kubeconfig"
    alpha = get_vc(api, NS, "alpha") or wait_ready(api, NS, "alpha")
    tenant, alpha_admin = tenant_client(alpha, api)
    secret = "s3cret-" + base64.b16encode(os.urandom(8)).decode()
    k8s.CoreV1Api(tenant).create_namespaced_secret("team-a", k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(name="kept"), string_data={"token": secret}))
    backup = tmp_path / "alpha.kbk"
    passphrase = {"kubenest_backup_passphrase": "correct horse battery staple"}
    proc = _playbook("etcd_backup.yml", kubeconfig, {"kubenest_backup_name": "alpha", "kubenest_backup_namespace": NS,
                                                     "kubenest_backup_dest": str(backup), **passphrase}, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert backup.stat().st_mode & 0o777 == 0o600
    data = backup.read_bytes()
    assert secret.encode() not in data and b"team-a" not in data  # sealed
    assert secret not in proc.stdout + proc.stderr
    # An existing file is refused, not overwritten.
    again = _playbook("etcd_backup.yml", kubeconfig, {"kubenest_backup_name": "alpha", "kubenest_backup_namespace": NS,
                                                      "kubenest_backup_dest": str(backup), **passphrase}, tmp_path)
    assert again.returncode != 0 and "exists; choose another file" in again.stdout and backup.read_bytes() == data

    delete_vc(api, NS, "alpha")
    restore = {"kubenest_restore_src": str(backup), "kubenest_restore_name": "omega",
               "kubenest_restore_passphrase": passphrase["kubenest_backup_passphrase"]}
    wrong = _playbook("etcd_restore.yml", kubeconfig, {**restore, "kubenest_restore_passphrase": "wrong"}, tmp_path)
    assert wrong.returncode != 0 and "passphrase does not open" in wrong.stdout
    assert get_vc(api, NS, "omega") is None  # nothing created
    started = time.monotonic()
    proc = _playbook("etcd_restore.yml", kubeconfig, restore, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    print(f"\nomega restored from alpha's backup and Ready in {time.monotonic() - started:.0f}s")
    omega = wait_ready(api, NS, "omega")
    restored, _config = tenant_client(omega, api)
    core = k8s.CoreV1Api(restored)
    assert base64.b64decode(core.read_namespaced_secret("kept", "team-a").data["token"]).decode() == secret
    assert k8s.AppsV1Api(restored).read_namespaced_deployment("web", "team-a").metadata.name == "web"
    assert k8s.ApiextensionsV1Api(restored).read_custom_resource_definition("gadgets.tenant.example")
    # The backed-up CA is omega's own: alpha's admin credentials are accepted by omega's API server.
    _restored, omega_admin = tenant_client(omega, api)
    alpha_admin["clusters"][0]["cluster"]["server"] = omega_admin["clusters"][0]["cluster"]["server"]
    with_alphas = k8s.CoreV1Api(k8s_config.new_client_from_config_dict(alpha_admin))
    assert base64.b64decode(with_alphas.read_namespaced_secret("kept", "team-a").data["token"]).decode() == secret
    host_core = k8s.CoreV1Api(api)
    for name in ("omega-pki", "omega-etcd-pki"):
        owners = host_core.read_namespaced_secret(name, NS).metadata.owner_references
        assert [o.uid for o in owners] == [omega["metadata"]["uid"]]
    assert host_core.list_namespaced_secret(NS, label_selector="kosmos.io/virtualcluster=omega").items
    left = [s.metadata.name for s in host_core.list_namespaced_secret(NS).items]
    assert not [name for name in left if name.startswith("omega-etcd-restore")]
    # A second restore under a name in use is refused and changes nothing.
    twice = _playbook("etcd_restore.yml", kubeconfig, restore, tmp_path)
    assert twice.returncode != 0 and "already exist" in twice.stdout
    assert get_vc(api, NS, "omega")["metadata"]["uid"] == omega["metadata"]["uid"]
    delete_vc(api, NS, "omega")
    assert labelled_objects(api, NS, "omega") == {k: [] for k in EXPECTED}
