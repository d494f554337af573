"""kosmos.kubenest.bootstrap_token on a real API server: a token the bootstrap authenticator can read, created
and deleted without reading kube-system, check mode that changes nothing, and clear refusals."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta

import kubernetes
import pytest

from tests.support.playbook import run_module

SELECTOR = "kosmos.io/bootstrap-token=true,kosmos.io/globalnode=kn-bt"


@pytest.fixture
def core(api_client):
    api = kubernetes.client.CoreV1Api(api_client)
    yield api
    for secret in api.list_namespaced_secret("kube-system", label_selector=SELECTOR).items:
        api.delete_namespaced_secret(secret.metadata.name, "kube-system")


def _module(apiserver, check=False, **args) -> tuple[int, dict]:
    rc, result, _stdout = run_module("bootstrap_token", apiserver.kubeconfig, check=check, **args)
    return rc, result


def _tokens(core) -> list:
    return core.list_namespaced_secret("kube-system", label_selector=SELECTOR).items


def test_create_then_delete_by_id(apiserver, core):
    rc, made = _module(apiserver, node="kn-bt", ttl=300, groups=["system:bootstrappers:kubenest"])
    assert rc == 0 and made["changed"], made
    assert re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}", made["token"])
    token_id, token_secret = made["token"].split(".")
    assert made["token_id"] == token_id
    [secret] = _tokens(core)
    assert secret.metadata.name == f"bootstrap-token-{token_id}" and secret.type == "bootstrap.kubernetes.io/token"
    data = {k: base64.b64decode(v).decode() for k, v in secret.data.items()}
    assert data["token-id"] == token_id and data["token-secret"] == token_secret
    assert data["auth-extra-groups"] == "system:bootstrappers:kubenest"
    assert data["usage-bootstrap-authentication"] == "true"
    expires = datetime.strptime(data["expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert timedelta(seconds=250) < expires - datetime.now(UTC) <= timedelta(seconds=300)

    rc, checked = _module(apiserver, check=True, node="kn-bt", state="absent", token_id=token_id)
    assert rc == 0 and checked["changed"] and len(_tokens(core)) == 1

    rc, gone = _module(apiserver, node="kn-bt", state="absent", token_id=token_id)
    assert rc == 0 and gone["changed"] and gone["deleted"] == [f"bootstrap-token-{token_id}"], gone
    assert _tokens(core) == []
    rc, again = _module(apiserver, node="kn-bt", state="absent", token_id=token_id)
    assert rc == 0 and not again["changed"]


def test_check_mode_creates_nothing_and_absent_without_id_removes_every_token_of_the_node(apiserver, core):
    rc, checked = _module(apiserver, check=True, node="kn-bt")
    assert rc == 0 and checked["changed"] and "token" not in checked and _tokens(core) == []
    for _attempt in range(2):
        assert _module(apiserver, node="kn-bt")[0] == 0
    assert len(_tokens(core)) == 2
    rc, gone = _module(apiserver, node="kn-bt", state="absent")
    assert rc == 0 and len(gone["deleted"]) == 2 and _tokens(core) == []


@pytest.mark.parametrize(("args", "says"), [
    ({"groups": ["system:masters"]}, "must start with system:bootstrappers:"),
    ({"groups": ["system:bootstrappers:a,system:masters"]}, "hold no comma"),
    ({"ttl": 0}, "ttl must be a positive"),
    ({"state": "absent", "token_id": "../x"}, "token_id must be 6 characters"),
])
def test_bad_arguments_are_refused_and_nothing_is_made(apiserver, core, args, says):
    rc, result = _module(apiserver, node="kn-bt", **args)
    assert rc != 0 and says in result["msg"], result
    assert _tokens(core) == []
