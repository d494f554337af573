"""Kubeconfigs people have, against a real API server: an exec credential plugin (a real program handing out a
ServiceAccount token or a client certificate the server's CA signed), a token the server revokes before its
expiry, and an API server reached only through a real HTTP proxy (Debian's tinyproxy). The same kubeconfigs work
for the controller-side actions, the modules and the operator (its requests and kopf's login)."""

from __future__ import annotations

import base64
import json
import os
import shutil

import kubernetes
import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import kube_api, pki

from kubenest_operator import kube as operator_kube
from tests.support.exec_plugin import credential, exec_kubeconfig, in_minutes, plugin_dir, runs
from tests.support.http_proxy import TinyProxy
from tests.support.playbook import run_module

NS = "exec-kubeconfigs"


@pytest.fixture(scope="module")
def core(api_client):
    client = kubernetes.client.CoreV1Api(api_client)
    client.create_namespace({"metadata": {"name": NS}})
    client.create_namespaced_service_account(NS, {"metadata": {"name": "deployer"}})
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    # A Role of its own: the aggregated ClusterRole `admin` is empty without a controller-manager.
    rbac.create_namespaced_role(NS, {"metadata": {"name": "deployer"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]})
    rbac.create_namespaced_role_binding(NS, {
        "metadata": {"name": "deployer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deployer"},
        "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": NS}]})
    return client


def sa_token(core, name="deployer", seconds=600):
    return core.create_namespaced_service_account_token(name, NS, {"spec": {"expirationSeconds": seconds}}).status.token


def config_map(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": {"a": "1"}}


def test_a_token_from_an_exec_plugin_drives_the_actions_and_never_shows(apiserver, core, tmp_path):
    token = sa_token(core)
    bin_dir = plugin_dir(tmp_path, credential({"token": token, "expirationTimestamp": in_minutes(10)}))
    path = exec_kubeconfig(apiserver, tmp_path)
    rc, result, out = run_module("kube_apply", path, definition=config_map("by-exec"))
    assert rc == 0 and result["changed"], result
    assert token not in out
    assert core.read_namespaced_config_map("by-exec", NS).metadata.managed_fields[0].manager == "kosmos.kubenest"
    rc, result, _out = run_module("kube_info", path, kind="Secret", namespace="kube-system")
    # The plugin's identity, not the admin's: its Role gives nothing in kube-system.
    assert rc != 0 and "HTTP 403" in result["msg"] and f"system:serviceaccount:{NS}:deployer" in result["msg"]
    [first, second] = runs(bin_dir)  # one run for each task
    assert base64.b64decode(first["info"]["spec"]["cluster"]["certificate-authority-data"]) \
        == apiserver.ca_file.read_bytes()


def test_a_credential_revoked_before_its_expiry_is_replaced_on_the_401(apiserver, core, tmp_path):
    core.create_namespaced_service_account(NS, {"metadata": {"name": "short-lived"}})
    revoked = sa_token(core, "short-lived")
    core.delete_namespaced_service_account("short-lived", NS)  # its tokens stop working at once
    bin_dir = plugin_dir(tmp_path, credential({"token": revoked, "expirationTimestamp": in_minutes(10)}),
                         credential({"token": sa_token(core)}))
    rc, result, _out = run_module("kube_info", exec_kubeconfig(apiserver, tmp_path), kind="ConfigMap", namespace=NS)
    assert rc == 0 and result["resources"] is not None, result.get("msg")
    assert len(runs(bin_dir)) == 2


def test_a_client_certificate_from_an_exec_plugin_works_for_every_client(apiserver, tmp_path):
    pair = pki.issue_certificate(apiserver.ca, "exec-admin", organizations=["system:masters"], client=True)
    bin_dir = plugin_dir(tmp_path, credential({
        "clientCertificateData": pki.certificate_pem(pair.cert).decode(),
        "clientKeyData": pki.private_key_pem(pair.key).decode()}))
    path = exec_kubeconfig(apiserver, tmp_path)
    rc, result, _out = run_module("kube_info", path, kind="Namespace", name=NS)
    assert rc == 0 and result["resources"][0]["metadata"]["name"] == NS, result
    # The collection's client in a process of its own (as a module or the inventory plugin runs it), and in the
    # operator with the credential kopf logs in with, from the same code.
    modules_client = kube_api.connect(str(path))
    assert NS in {n["metadata"]["name"] for n in modules_client.list("v1", "Namespace")}
    modules_client.close()
    operator_api = operator_kube.Api(operator_kube.host_connection(str(path)))
    info = operator_kube.connection_info(operator_api.connection)
    assert info.certificate_data == pki.certificate_pem(pair.cert).decode()
    assert operator_api.request_now("GET", f"/api/v1/namespaces/{NS}")["metadata"]["name"] == NS
    operator_api.close()
    assert len(runs(bin_dir)) == 3  # the task, the module client, the operator


def test_a_failing_plugin_fails_the_task_with_its_reason(apiserver, tmp_path):
    plugin_dir(tmp_path, {"exit": 2, "stderr": "error: refresh token expired, run `corp-login`"})
    rc, result, out = run_module("kube_info", exec_kubeconfig(apiserver, tmp_path), kind="Namespace")
    assert rc != 0 and result["msg"].endswith("exited with status 2: error: refresh token expired, run `corp-login`")
    assert "token-that-must-not-leak" not in out


@pytest.fixture
def proxy(apiserver):
    if not shutil.which("tinyproxy") and not os.path.exists("/usr/bin/tinyproxy"):
        pytest.fail("tinyproxy is not installed: make install installs it (.ci/system-deps.sh)")
    with TinyProxy(connect_port=apiserver.port) as running:
        yield running


def test_an_api_server_behind_an_http_proxy(apiserver, core, tmp_path, proxy):
    bin_dir = plugin_dir(tmp_path, credential({"token": sa_token(core)}))
    path = exec_kubeconfig(apiserver, tmp_path, proxy_url=proxy.url)
    rc, result, out = run_module("kube_apply", path, definition=config_map("through-the-proxy"))
    assert rc == 0 and result["changed"], result
    assert proxy.password not in out
    assert "CONNECT" in proxy.log() and f"127.0.0.1:{apiserver.port}" in proxy.log()
    operator_api = operator_kube.Api(operator_kube.host_connection(str(path)))
    config_map_path = f"/api/v1/namespaces/{NS}/configmaps/through-the-proxy"
    assert operator_api.request_now("GET", config_map_path)["data"] == {"a": "1"}
    assert operator_kube.connection_info(operator_api.connection).proxy_url == proxy.url  # kopf's way, too
    operator_api.close()
    assert len(runs(bin_dir)) == 2
    # A wrong proxy password: the task names the proxy and its refusal (tinyproxy answers 401 to CONNECT).
    config = yaml.safe_load(path.read_text())
    config["clusters"][0]["cluster"]["proxy-url"] = proxy.url.replace(proxy.password, "wrong")
    path.write_text(json.dumps(config))
    rc, result, _out = run_module("kube_info", path, kind="Namespace")
    assert rc != 0 and "wrong" not in result["msg"], result
    assert f"through the proxy 127.0.0.1:{proxy.port}: Tunnel connection failed: 401" in result["msg"], result
