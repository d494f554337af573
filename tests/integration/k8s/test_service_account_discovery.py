"""Service account issuer discovery of a server started with the collection's own apiserver flags: the discovery
document names the key set under the issuer (the `kubernetes` Service's name, which every pod of the cluster
reaches), not at the address the server advertises (a hosted server's is a pod address inside the host)."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.control_plane_flags import Files, apiserver_flags

from tests.support.apiserver import ApiServer

FILES = Files("/etc/kubernetes/pki", "/etc/kubernetes/pki/etcd-ca.crt", "/etc/kubernetes/pki/etcd.crt",
              "/etc/kubernetes/pki/etcd.key", "/etc/kubernetes")


def _discovery_flags() -> dict[str, str]:
    flags = dict(apiserver_flags(FILES, 6443, ["https://127.0.0.1:2379"], "198.18.128.0/17",
                                 advertise_address="198.18.0.11"))
    return {name: flags[name] for name in ("service-account-issuer", "service-account-jwks-uri")}


@pytest.fixture(scope="module")
def server(k8s_bin_dir):
    flags = _discovery_flags()
    # The fixture sets the issuer itself (the same value, checked below); a second --service-account-issuer
    # would add an issuer, not replace it.
    with ApiServer(extra_args=(f"--service-account-jwks-uri={flags['service-account-jwks-uri']}",)) as api:
        yield api, flags


def _get(api, path: str) -> dict:
    with urllib.request.urlopen(api.url + path, context=api.ssl_context(), timeout=10) as answer:
        return json.loads(answer.read())


def test_the_discovery_document_names_the_key_set_under_the_issuer_not_the_advertised_address(server):
    api, flags = server
    document = _get(api, "/.well-known/openid-configuration")
    assert document["issuer"] == flags["service-account-issuer"]
    assert document["jwks_uri"] == flags["service-account-jwks-uri"]
    jwks = urllib.parse.urlsplit(document["jwks_uri"])
    assert jwks.netloc == urllib.parse.urlsplit(document["issuer"]).netloc == "kubernetes.default.svc.cluster.local"
    assert "127.0.0.1" not in document["jwks_uri"]


def test_the_server_serves_the_key_set_at_the_path_the_document_names(server):
    api, _flags = server
    path = urllib.parse.urlsplit(_get(api, "/.well-known/openid-configuration")["jwks_uri"]).path
    keys = _get(api, path)["keys"]
    assert keys and all(key["use"] == "sig" and key["kty"] in ("RSA", "EC") for key in keys)
