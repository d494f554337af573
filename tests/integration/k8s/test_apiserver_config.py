"""The API server's files the collection builds from a VirtualCluster's spec (plugins/plugin_utils/apiserver_config.py),
read by a real kube-apiserver: tokens of a JWT issuer (served over TLS here, its CA given inline) authenticate
users under the configured prefix, other tokens do not; the audit policy's events land in the log, which the real
server rotates by size, and follow-log (the API server pod's second container, from the built image) streams every
event once, whole, across the rotations."""

from __future__ import annotations

import json
import ssl
import subprocess
from pathlib import Path

import pytest
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import apiserver_config

from tests.support.apiserver import ApiServer
from tests.support.http import json_request
from tests.support.jwt_issuer import JwtIssuer
from tests.support.procs import wait_until

AUDIENCE = "kubenest-tenant"
VC = {"name": "vc1", "namespace": "tenants", "labels": {}, "selector": {}, "owner_references": []}
# Every write of a ConfigMap with its request body, so that a few writes fill the 1 MiB at which the log rotates.
AUDIT = {"policy": {"omitStages": ["RequestReceived"], "rules": [
    {"level": "RequestResponse", "resources": [{"group": "", "resources": ["configmaps"]}],
     "verbs": ["create", "update"]},
    {"level": "None"}]}, "log": {"maxSizeMB": 1, "maxBackups": 20}}


@pytest.fixture(scope="module")
def issuer():
    with JwtIssuer() as served:
        yield served


@pytest.fixture(scope="module")
def configured(issuer, k8s_bin_dir, tmp_path_factory):
    """An API server started with the files as the collection builds them, and its audit log's path."""
    work = tmp_path_factory.mktemp("apiserver-config")
    settings = {"image_repository": "kubenest.local", "version": "v1.36.3", "authentication":
                issuer.authentication(AUDIENCE), "audit": AUDIT}
    files = hosted_manifest("apiserver-config", VC, settings)["data"]
    for name, content in files.items():
        (work / name).write_text(content)
    _policy, limits = apiserver_config.audit_settings(AUDIT)
    log = work / "audit" / "audit.log"
    flags = [f"--authentication-config={work / apiserver_config.AUTHENTICATION_KEY}"]
    for name, value in apiserver_config.audit_flags(limits, str(work / apiserver_config.AUDIT_POLICY_KEY)):
        flags.append(f"--{name}={log if name == 'audit-log-path' else value}")
    with ApiServer(extra_args=tuple(flags)) as api:
        yield api, log


def _request(api, method, path, token=None, body=None):
    """(status, decoded body) of a request made with `token`, or with the admin's certificate without one."""
    context = api.ssl_context() if token is None else ssl.create_default_context(cafile=str(api.ca_file))
    return json_request(api.url + path, method, context, token, body)


def _who(api, token):
    return _request(api, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", token,
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})


def test_a_token_of_the_issuer_is_a_user_under_the_prefix_and_rbac_still_decides(configured, issuer):
    api, _log = configured
    status, review = _who(api, issuer.token("alice", AUDIENCE, groups=("devs",)))
    assert status == 201, review
    user = review["status"]["userInfo"]
    assert user["username"] == "oidc:alice" and "oidc:devs" in user["groups"], user
    assert issuer.key_fetches >= 1
    # Authenticated, not authorized: RBAC of the cluster decides what the user may do.
    status, answer = _request(api, "GET", "/api/v1/namespaces/default/pods", issuer.token("alice", AUDIENCE))
    assert status == 403 and 'User "oidc:alice" cannot list resource "pods"' in answer["message"], answer


@pytest.mark.parametrize("why", ["another audience", "expired", "another issuer"])
def test_other_tokens_are_refused(configured, issuer, why):
    api, _log = configured
    token = {"another audience": lambda: issuer.token("alice", "elsewhere"),
             "expired": lambda: issuer.token("alice", AUDIENCE, lifetime=-120),
             "another issuer": lambda: issuer.token("alice", AUDIENCE, issuer="https://127.0.0.1:1")}[why]()
    status, answer = _who(api, token)
    assert status == 401, (why, answer)


def _follow_log(oci_images) -> Path:
    return Path(oci_images["kube-apiserver"]["path"]).parent / "follow-log-bin" / "follow-log"


def test_every_audited_write_is_streamed_once_and_whole_across_rotations(configured, oci_images, tmp_path):
    api, log = configured
    streamed = tmp_path / "streamed.log"
    # 100 KiB a write, logged with its request and response: the 1 MiB file rotates every five writes or so.
    payload = "x" * (100 * 1024)
    names = [f"audited-{i}" for i in range(12)]
    with streamed.open("wb") as out:
        follower = subprocess.Popen([str(_follow_log(oci_images)), str(log)], stdout=out, stderr=subprocess.PIPE)
        try:
            for name in names:
                status, answer = _request(api, "POST", "/api/v1/namespaces/default/configmaps", body={
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"d": payload}})
                assert status == 201, answer
            wait_until(lambda: len(_audited(_lines(streamed, whole_only=True))) >= len(names), 30,
                       "follow-log streaming the writes")
        finally:
            follower.terminate()
            _out, err = follower.communicate(timeout=10)
    assert follower.returncode in (0, -15), err
    rotated = sorted(log.parent.glob("audit-*.log"))
    assert len(rotated) >= 2, f"the server rotated its audit log {len(rotated)} times"
    written = [event for path in [*rotated, log] for event in _lines(path)]
    events = _lines(streamed)
    assert sorted(_audited(events)) == sorted(names)
    assert sorted(e["auditID"] for e in events) == sorted(e["auditID"] for e in written)
    assert {e["level"] for e in events} == {"RequestResponse"} and not err, err


def _lines(path: Path, whole_only: bool = False) -> list[dict]:
    """Every line a whole JSON event (a line cut in two would not parse); whole_only: without the last line when
    it has no newline yet (read while it is being written)."""
    text = path.read_text()
    if whole_only:
        text = text[:text.rfind("\n") + 1]
    return [json.loads(line) for line in text.splitlines()]


def _audited(events: list[dict]) -> list[str]:
    return [e["objectRef"]["name"] for e in events if e["objectRef"].get("name", "").startswith("audited-")]
