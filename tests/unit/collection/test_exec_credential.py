"""Kubeconfigs whose user is an exec credential plugin, as EKS, GKE, AKS and OIDC logins write them: real plugin
programs (small scripts) run by both of the collection's API clients, with no API server (see
tests/integration/k8s/test_exec_kubeconfigs.py for one)."""

from __future__ import annotations

import base64
import http.server
import json
import os
import threading
import time

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import exec_credential, kube_api

from kubenest_operator import kube as operator_kube
from tests.support.exec_plugin import V1, credential, in_minutes, plugin_dir, runs

CA = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def exec_kubeconfig(tmp_path, exec_spec=None, server="https://127.0.0.1:6443", cluster_extra=None, user_extra=None):
    spec = {"apiVersion": V1, "command": "./bin/get-token", "args": ["--cluster", "prod"],
            "env": [{"name": "PLUGIN_REGION", "value": "eu-1"}], "interactiveMode": "Never"}
    spec.update(exec_spec or {})
    (tmp_path / "ca.crt").write_bytes(CA)
    cluster = {"server": server, "certificate-authority": "ca.crt", **(cluster_extra or {})}
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "main",
              "clusters": [{"name": "c", "cluster": cluster}],
              "users": [{"name": "sso", "user": {"exec": {k: v for k, v in spec.items() if v is not None},
                                                 **(user_extra or {})}}],
              "contexts": [{"name": "main", "context": {"cluster": "c", "user": "sso"}}]}
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    return path


def connection(path):
    # The CA above is not a certificate: these tests never open a TLS connection, so the context is not built.
    return kube_api.Connection.from_kubeconfig(path)


def test_the_plugin_is_run_from_the_kubeconfig_directory_with_its_args_env_and_request(tmp_path):
    bin_dir = plugin_dir(tmp_path, credential({"token": "t-1", "expirationTimestamp": in_minutes(15)}))
    path = exec_kubeconfig(tmp_path, {"provideClusterInfo": True},
                           cluster_extra={"server": "http://127.0.0.1:6443", "tls-server-name": "api.example"})
    conn = connection(path)
    assert conn.bearer() == "t-1" and conn.bearer() == "t-1"
    [run] = runs(bin_dir)  # once: the credential is good for 15 minutes
    assert run["args"] == ["--cluster", "prod"] and run["env"] == "eu-1"
    assert run["info"]["apiVersion"] == V1 and run["info"]["kind"] == "ExecCredential"
    assert run["info"]["spec"]["interactive"] is False
    cluster = run["info"]["spec"]["cluster"]
    assert cluster["server"] == "http://127.0.0.1:6443" and cluster["tls-server-name"] == "api.example"
    assert base64.b64decode(cluster["certificate-authority-data"]) == CA  # read from the file the kubeconfig names


def test_no_cluster_information_unless_the_plugin_asks_for_it(tmp_path):
    bin_dir = plugin_dir(tmp_path, credential({"token": "t"}))
    assert connection(exec_kubeconfig(tmp_path, server="http://127.0.0.1:1")).bearer() == "t"
    assert "cluster" not in runs(bin_dir)[0]["info"]["spec"]


def test_an_expired_credential_is_renewed_and_one_without_expiry_is_kept(tmp_path):
    bin_dir = plugin_dir(tmp_path, credential({"token": "old", "expirationTimestamp": in_minutes(-1)}),
                         credential({"token": "new"}))
    conn = connection(exec_kubeconfig(tmp_path, server="http://127.0.0.1:1"))
    assert [conn.bearer(), conn.bearer(), conn.bearer()] == ["old", "new", "new"]
    assert len(runs(bin_dir)) == 2


def test_a_bare_command_is_looked_up_on_path(tmp_path, monkeypatch):
    bin_dir = plugin_dir(tmp_path, credential({"token": "from-path"}))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    conn = connection(exec_kubeconfig(tmp_path, {"command": "get-token"}, server="http://127.0.0.1:1"))
    assert conn.bearer() == "from-path"


def test_v1beta1_plugins_need_no_interactive_mode(tmp_path):
    plugin_dir(tmp_path, credential({"token": "beta"}, "client.authentication.k8s.io/v1beta1"))
    path = exec_kubeconfig(tmp_path, {"apiVersion": "client.authentication.k8s.io/v1beta1", "interactiveMode": None},
                           server="http://127.0.0.1:1")
    assert connection(path).bearer() == "beta"


@pytest.mark.parametrize("spec, message", [
    ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "asks for apiVersion .*v1alpha1.*; supported: "),
    ({"command": ""}, "names no command"),
    ({"interactiveMode": None}, "has interactiveMode None; one of Never, IfAvailable, Always is required"),
    ({"interactiveMode": "Always"}, "needs a terminal"),
    ({"args": "--one-string"}, "has args that are not a list of strings"),
    ({"env": [{"name": "A"}]}, "has an env entry without a name and value"),
])
def test_an_exec_section_that_cannot_work_is_refused_before_anything_runs(tmp_path, spec, message):
    bin_dir = plugin_dir(tmp_path, credential({"token": "t"}))
    with pytest.raises(kube_api.ConfigError, match="user 'sso' " + message):
        connection(exec_kubeconfig(tmp_path, spec))
    assert runs(bin_dir) == []


@pytest.mark.parametrize("answer, message", [
    ({"raw": "login page <html>"}, "printed no JSON ExecCredential"),
    ({"raw": json.dumps({"kind": "Status"})}, "printed something other than an ExecCredential"),
    (credential({"token": "t"}, "client.authentication.k8s.io/v1beta1"), "answered in .*v1beta1.*, not the"),
    ({"apiVersion": V1, "kind": "ExecCredential"}, "answered without a status"),
    (credential({}), "gave neither a token nor a client certificate"),
    (credential({"clientCertificateData": "PEM"}), "gave a client certificate without its key"),
    (credential({"token": "t", "expirationTimestamp": "tomorrow"}),
     "gave the expirationTimestamp 'tomorrow', which is not"),
    ({"exit": 3, "stderr": "error: the SSO session has expired;\n  run `sso login`\n"},
     r"exited with status 3: error: the SSO session has expired; run `sso login`$"),
])
def test_a_failing_plugin_is_reported_without_what_it_printed(tmp_path, answer, message):
    plugin_dir(tmp_path, answer)
    conn = connection(exec_kubeconfig(tmp_path, server="http://127.0.0.1:1"))
    with pytest.raises(kube_api.ConfigError, match="the exec plugin '.*get-token' of user 'sso' " + message) as err:
        conn.bearer()
    assert "token-that-must-not-leak" not in str(err.value)


def test_a_missing_plugin_says_how_to_install_it(tmp_path):
    path = exec_kubeconfig(tmp_path, {"command": "no-such-plugin-here",
                                      "installHint": "Install it with:\n  apt install no-such-plugin"})
    with pytest.raises(kube_api.ConfigError, match=r"'no-such-plugin-here' of user 'sso' is not installed "
                                                   r"\(Install it with: apt install no-such-plugin\)"):
        connection(path).bearer()


def test_a_plugin_that_hangs_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(exec_credential, "TIMEOUT", 0.5)
    plugin_dir(tmp_path, {"sleep": 30})
    conn = connection(exec_kubeconfig(tmp_path, server="http://127.0.0.1:1"))
    started = time.monotonic()
    with pytest.raises(kube_api.ConfigError, match="gave no answer within 0 s"):
        conn.bearer()
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("user, message", [
    ({"token": "static"}, "has both an exec plugin and token: keep one way"),
    ({"auth-provider": {"name": "oidc"}}, "authenticates through an auth-provider"),
])
def test_two_ways_to_authenticate_or_a_removed_one_are_refused(tmp_path, user, message):
    plugin_dir(tmp_path, credential({"token": "t"}))
    with pytest.raises(kube_api.ConfigError, match=message):
        connection(exec_kubeconfig(tmp_path, user_extra=user))


class _TokenChecking(http.server.BaseHTTPRequestHandler):
    """Accepts only `good` as a bearer token."""

    seen: list = []

    def do_GET(self):
        type(self).seen.append(self.headers.get("Authorization"))
        ok = self.headers.get("Authorization") == "Bearer good"
        body = json.dumps({"kind": "NodeList", "items": []} if ok else {"kind": "Status", "message": "Unauthorized"})
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        del args


@pytest.fixture
def token_checking():
    server = http.server.HTTPServer(("127.0.0.1", 0), _TokenChecking)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _TokenChecking.seen = []
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_a_refused_credential_is_asked_for_once_more_as_client_go_does(tmp_path, token_checking):
    bin_dir = plugin_dir(tmp_path, credential({"token": "revoked", "expirationTimestamp": in_minutes(15)}),
                         credential({"token": "good"}))
    api = kube_api.KubeApi(connection(exec_kubeconfig(tmp_path, server=token_checking)))
    assert api.request("GET", "/api/v1/nodes") == {"kind": "NodeList", "items": []}
    assert _TokenChecking.seen == ["Bearer revoked", "Bearer good"] and len(runs(bin_dir)) == 2


def test_a_second_refusal_stands(tmp_path, token_checking):
    bin_dir = plugin_dir(tmp_path, credential({"token": "bad"}))
    api = kube_api.KubeApi(connection(exec_kubeconfig(tmp_path, server=token_checking)))
    with pytest.raises(kube_api.KubeApiError, match="HTTP 401"):
        api.request("GET", "/api/v1/nodes")
    assert len(_TokenChecking.seen) == 2 and len(runs(bin_dir)) == 2


def test_the_operators_kopf_login_takes_the_credential_from_the_same_implementation(tmp_path, token_checking):
    bin_dir = plugin_dir(tmp_path, credential({"token": "old", "expirationTimestamp": in_minutes(-1)}),
                         credential({"token": "good"}))
    info = operator_kube.connection_info(operator_kube.host_connection(str(exec_kubeconfig(tmp_path,
                                                                                           server=token_checking))))
    assert (info.scheme, info.token) == ("Bearer", "good")  # the expired one was renewed
    assert len(runs(bin_dir)) == 2


def test_a_failing_plugin_is_reported_when_the_operator_first_asks_for_a_credential(tmp_path):
    plugin_dir(tmp_path, {"exit": 1, "stderr": "no session"})
    connection = operator_kube.host_connection(str(exec_kubeconfig(tmp_path, server="http://127.0.0.1:1")))
    with pytest.raises(kube_api.ConfigError, match="exited with status 1: no session"):
        operator_kube.connection_info(connection)


def test_kopf_gets_a_plugin_certificate_as_data(tmp_path):
    # As data, not as files of ours: kopf holds it in a temporary file only while it builds its TLS context.
    plugin_dir(tmp_path, credential({"clientCertificateData": "CERT PEM", "clientKeyData": "KEY PEM"}))
    info = operator_kube.connection_info(operator_kube.host_connection(
        str(exec_kubeconfig(tmp_path, server="http://127.0.0.1:1"))))
    assert (info.certificate_data, info.private_key_data, info.token) == ("CERT PEM", "KEY PEM", None)
    assert (info.certificate_path, info.private_key_path) == (None, None)


@pytest.mark.parametrize("proxy, message", [
    ("socks5://127.0.0.1:1080", "proxy-url 'socks5://127.0.0.1' is not an http:// proxy"),
    ("https://user:secret@proxy.example:3129", "proxy-url 'https://proxy.example' is not an http:// proxy"),
])
def test_proxies_other_than_http_are_refused_without_their_credentials(tmp_path, proxy, message):
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "m",
              "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1", "proxy-url": proxy}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "m", "context": {"cluster": "c", "user": "u"}}]}
    (tmp_path / "config").write_text(json.dumps(config))
    with pytest.raises(kube_api.ConfigError, match=message) as err:
        kube_api.Connection.from_kubeconfig(tmp_path / "config")
    assert "secret" not in str(err.value)
