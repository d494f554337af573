"""kosmos.kubenest.secret_files on a real API server: files into a Secret and back, idempotent, check mode, and
clear errors that change nothing."""

from __future__ import annotations

import base64

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from tests.support.playbook import run_module
from tests.support.virtualclusters import ensure_namespace

NS = "secret-files"


def module(apiserver, check=False, **args):
    return run_module("secret_files", apiserver.kubeconfig, check=check, namespace=NS, **args)


@pytest.fixture(scope="module")
def core(api_client):
    ensure_namespace(api_client, NS)
    api = kubernetes.client.CoreV1Api(api_client)
    return api


def test_store_and_restore_round_trip(apiserver, core, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "ca.key").write_bytes(b"-----BEGIN PRIVATE KEY-----\nsecret-material\n")
    (src / "ca.crt").write_bytes(b"certificate")
    owner = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u-1"}]
    args = dict(name="pki", directory=str(src), state="stored", files=["ca.crt", "ca.key"],
                labels={"app": "x"}, owner_references=owner)

    rc, result, out = module(apiserver, check=True, **args)
    assert rc == 0 and result["changed"] and not result["found"], result
    with pytest.raises(ApiException):
        core.read_namespaced_secret("pki", NS)

    rc, result, out = module(apiserver, **args)
    assert rc == 0 and result["changed"] and result["keys"] == ["ca.crt", "ca.key"], result
    assert "secret-material" not in out and base64.b64encode(b"certificate").decode() not in out
    secret = core.read_namespaced_secret("pki", NS)
    assert base64.b64decode(secret.data["ca.key"]).endswith(b"secret-material\n")
    assert secret.metadata.labels == {"app": "x"} and secret.metadata.owner_references[0].uid == "u-1"

    rc, again, out = module(apiserver, **args)
    assert rc == 0 and not again["changed"] and again["found"], again

    rc, result, out = module(apiserver, name="pki", directory=str(dst), state="restored")
    assert rc == 0 and result["keys"] == ["ca.crt", "ca.key"]
    assert (dst / "ca.key").read_bytes() == (src / "ca.key").read_bytes()
    assert oct((dst / "ca.key").stat().st_mode & 0o777) == "0o600"

    (src / "ca.crt").write_bytes(b"renewed")
    rc, result, out = module(apiserver, **{**args, "files": ["ca.crt"]})
    assert rc == 0 and result["changed"]
    assert set(core.read_namespaced_secret("pki", NS).data) == {"ca.crt"}


def test_a_missing_secret_restores_nothing(apiserver, tmp_path):
    rc, result, out = module(apiserver, name="never-stored", directory=str(tmp_path), state="restored")
    assert rc == 0 and not result["found"] and result["keys"] == [] and not list(tmp_path.iterdir())


def test_bad_input_is_refused_and_changes_nothing(apiserver, core, tmp_path):
    (tmp_path / "a").write_text("a")
    rc, result, out = module(apiserver, name="bad", directory=str(tmp_path), state="stored", files=["a", "b"])
    assert rc != 0 and result["msg"] == f"files missing in {tmp_path}: b"
    rc, result, out = module(apiserver, name="bad", directory=str(tmp_path), state="stored", files=["../etc/x"])
    assert rc != 0 and "not file names" in result["msg"]
    rc, result, out = module(apiserver, name="bad", directory=str(tmp_path / "nope"), state="restored")
    assert rc != 0 and "does not exist" in result["msg"]
    with pytest.raises(ApiException):
        core.read_namespaced_secret("bad", NS)
