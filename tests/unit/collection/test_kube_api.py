"""The controller-side API client without a server: reading kubeconfigs, what counts as a change, conditions."""

from __future__ import annotations

import http.server
import json
import os
import threading

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import kube_api
from ansible_collections.kosmos.kubenest.plugins.module_utils.kubeconfig import kubeconfig_path
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import plain

from tests.support.scripted_http import scripted_server


def write(tmp_path, config):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    return path


def kubeconfig(user=None, current="main", server="https://127.0.0.1:6443"):
    return {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u", "user": user or {"token": "abc"}}],
            "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}},
                         {"name": "other", "context": {"cluster": "c", "user": "u"}}]}


def test_token_and_server_come_from_the_current_context(tmp_path):
    connection = kube_api.Connection.from_kubeconfig(write(tmp_path, kubeconfig()))
    assert (connection.host, connection.port, connection.bearer()) == ("127.0.0.1", 6443, "abc")


def test_a_token_file_is_read_relative_to_the_kubeconfig_at_each_request(tmp_path):
    (tmp_path / "token").write_text("first\n")
    connection = kube_api.Connection.from_kubeconfig(write(tmp_path, kubeconfig({"tokenFile": "token"})))
    assert connection.bearer() == "first"
    (tmp_path / "token").write_text("rotated\n")
    assert connection.bearer() == "rotated"


@pytest.mark.parametrize("config, context, message", [
    (kubeconfig(current=""), None, "names no context and none was given"),
    (kubeconfig(), "absent", "has no context named 'absent'"),
    (kubeconfig(server="ftp://x"), None, "is not an http(s) URL"),
    (kubeconfig({"auth-provider": {"name": "gcp"}}), None, "authenticates through an auth-provider"),
    (kubeconfig({"exec": {"command": "x"}}), None, "user 'u' asks for apiVersion None"),
    (kubeconfig({"client-certificate-data": "not base64!", "client-key-data": "x"}), None, "not valid base64"),
    (kubeconfig({"client-certificate": "missing.crt", "client-key": "missing.key"}), None,
     "cannot read the kubeconfig's client certificate"),
])
def test_unusable_kubeconfigs_are_named(tmp_path, config, context, message):
    with pytest.raises(kube_api.ConfigError, match=".*" + message.replace("(", r"\(").replace(")", r"\)")):
        kube_api.Connection.from_kubeconfig(write(tmp_path, config), context)


def test_a_kubeconfig_that_is_not_a_mapping_is_named(tmp_path):
    path = tmp_path / "config"
    path.write_text("- just\n- a list\n")
    with pytest.raises(kube_api.ConfigError, match="holds no configuration"):
        kube_api.Connection.from_kubeconfig(path)


def test_comparable_ignores_what_the_server_changes_on_every_write():
    before = {"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "1", "managedFields": [1]},
              "data": {"a": "1"}, "status": {"x": 1}}
    after = {"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "2", "managedFields": [2]},
             "data": {"a": "1"}, "status": {"x": 2}}
    assert kube_api.comparable(before) == kube_api.comparable(after)
    after["data"]["a"] = "2"
    assert kube_api.comparable(before) != kube_api.comparable(after)


@pytest.mark.parametrize("conditions, wanted, met", [
    ([{"type": "Ready", "status": "True"}], {"type": "Ready"}, True),
    ([{"type": "Ready", "status": "False"}], {"type": "Ready"}, False),
    ([{"type": "Ready", "status": "False"}], {"type": "Ready", "status": "False"}, True),
    ([{"type": "Other", "status": "True"}], {"type": "Ready"}, False),
    ([{"type": "Ready", "status": "True", "reason": "A"}], {"type": "Ready", "reason": "B"}, False),
    ([], {"type": "Ready"}, False),
])
def test_condition_met(conditions, wanted, met):
    assert kube_api.condition_met({"status": {"conditions": conditions}}, wanted) is met


def test_plain_turns_subclasses_into_builtins_and_refuses_other_types():
    class Tagged(str):
        pass

    value = plain({"a": [Tagged("x"), 1, 2.5, True, None]})
    assert value == {"a": ["x", 1, 2.5, True, None]} and not isinstance(value["a"][0], Tagged)
    with pytest.raises(Exception, match="a value of type set cannot be sent"):
        plain({"a": {1, 2}})


@pytest.fixture
def scripted():
    """A server answering from `script`, a list of (status, headers), then 200."""
    script: list = []

    def answer(_path):
        status, headers = script.pop(0) if script else (200, {})
        return status, headers, {"kind": "Status", "message": "busy"} if status >= 400 else {"items": None}

    with scripted_server(answer) as server:
        yield server, script, kube_api.KubeApi(kube_api.Connection(server.url))


def test_a_busy_server_is_asked_again_after_its_retry_after(scripted):
    server, script, api = scripted
    script.extend([(429, {"Retry-After": "0"}), (503, {"Retry-After": "0"})])
    assert api.request("GET", "/api/v1/nodes") == {"items": None}
    assert len(server.seen) == 3


def test_no_retry_without_retry_after_and_a_bounded_number_with_it(scripted):
    server, script, api = scripted
    script.append((429, {}))
    with pytest.raises(kube_api.KubeApiError, match="HTTP 429 Too Many Requests: busy"):
        api.request("GET", "/api/v1/nodes")
    assert len(server.seen) == 1
    server.seen.clear()
    script.extend([(429, {"Retry-After": "0"})] * (kube_api.RETRIES + 5))
    with pytest.raises(kube_api.KubeApiError, match="HTTP 429"):
        api.request("GET", "/api/v1/nodes")
    assert len(server.seen) == kube_api.RETRIES


def test_the_kubeconfig_comes_from_the_argument_then_the_environment_then_the_pod(tmp_path, monkeypatch):
    for name in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfig_path() == str(tmp_path / ".kube/config")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert kubeconfig_path() is None  # a pod's service account
    (tmp_path / "second").write_text("{}")
    # A list, as kubectl takes it: the first file that exists.
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "missing"), str(tmp_path / "second")]))
    assert kubeconfig_path() == str(tmp_path / "second")
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", "~/from-ansible")
    assert kubeconfig_path() == str(tmp_path / "from-ansible")
    assert kubeconfig_path("~/given") == str(tmp_path / "given")


class _ClosedOnce:
    """A stand-in connection (the requests of KubeApi._send only) whose first request finds the kept-alive
    connection closed the way `error` says; the next one, on a fresh connection, is answered."""

    opened = 0

    def __init__(self, error):
        self.error = error
        type(self).opened += 1
        self.first = type(self).opened == 1

    def request(self, *args, **kwargs):
        if self.first:
            raise self.error

    def getresponse(self):
        class Answer:
            status, reason = 200, "OK"

            @staticmethod
            def read():
                return b'{"kind": "Status"}'

            @staticmethod
            def getheader(_name):
                return None
        return Answer()

    def close(self):
        pass


@pytest.mark.parametrize("error", [ConnectionResetError(), kube_api.http.client.RemoteDisconnected(),
                                   kube_api.ssl.SSLEOFError(8, "EOF occurred in violation of protocol")],
                         ids=["reset", "disconnected", "tls-eof"])
def test_a_kept_alive_connection_the_server_closed_is_opened_again_once(monkeypatch, error):
    _ClosedOnce.opened = 0
    api = kube_api.KubeApi(kube_api.Connection("http://127.0.0.1:1", token="t"))
    monkeypatch.setattr(api, "_open", lambda: _ClosedOnce(error))
    assert api.request("GET", "/api/v1") == {"kind": "Status"}
    assert _ClosedOnce.opened == 2


def test_a_kubeconfig_given_as_data_carries_its_credentials_as_data():
    data = kubeconfig({"client-certificate-data": "", "token": "abc"})
    assert kube_api.Connection.from_config(data, None, where="in the Secret x").bearer() == "abc"
    data["clusters"][0]["cluster"]["certificate-authority"] = "/etc/ca.crt"
    with pytest.raises(kube_api.ConfigError, match="the kubeconfig in the Secret x names certificate-authority: "):
        kube_api.Connection.from_config(data, None, where="in the Secret x")


class _Watch(http.server.BaseHTTPRequestHandler):
    """A watch answered in chunks, as an API server streams it: two events, then a 410 ERROR event."""

    protocol_version = "HTTP/1.1"
    asked: list = []

    def do_GET(self):
        type(self).asked.append(self.path)
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = [{"type": "ADDED", "object": {"metadata": {"name": "a"}}},
                  {"type": "MODIFIED", "object": {"metadata": {"name": "a"}}},
                  {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                               "message": "too old resource version: 1 (5)"}}]
        for event in events:
            line = json.dumps(event).encode() + b"\n"
            for part in (line[:7], line[7:]):  # an event may arrive in pieces
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args):
        del args


def test_a_watch_yields_events_across_chunks_and_raises_an_error_event_with_its_code():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Watch)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    api = kube_api.KubeApi(kube_api.Connection(f"http://127.0.0.1:{server.server_port}"))
    seen = []
    with pytest.raises(kube_api.KubeApiError, match="too old resource version") as raised:
        for event in api.watch("/apis/x/v1/things", {"resourceVersion": "1"}, timeout=30):
            seen.append(event["type"])
    assert seen == ["ADDED", "MODIFIED"] and raised.value.status == 410
    assert _Watch.asked == ["/apis/x/v1/things?resourceVersion=1&watch=true&timeoutSeconds=30"]
    server.shutdown()
