"""Kept-alive clients (clients.py) against a local HTTP server (tests/support/scripted_http) that counts the
connections it was opened."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import ConfigError, Connection

from kubenest_operator import health
from kubenest_operator.clients import Lender, TenantClients
from tests.support.scripted_http import scripted_server


class Tenant:
    """What the stand-in tenant API answers to GET /api/v1/nodes: `nodes`, or a Status when `status` is not 200."""

    def __init__(self):
        self.status, self.nodes = 200, []

    def answer(self, _path):
        return self.status, {}, {"items": self.nodes} if self.status == 200 else {"kind": "Status"}


@pytest.fixture
def tenant():
    return Tenant()


@pytest.fixture
def api_server(tenant):
    with scripted_server(tenant.answer) as server:
        yield server


@pytest.fixture
def server(api_server):
    return api_server.url


def kubeconfig(server: str, user: dict | None = None) -> bytes:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "admin",
        "clusters": [{"name": "vc", "cluster": {"server": server}}],
        "users": [{"name": "admin", "user": user or {"token": "t"}}],
        "contexts": [{"name": "admin", "context": {"cluster": "vc", "user": "admin"}}]}).encode()


def test_a_lent_client_is_kept_connected_for_the_next_borrower(server, api_server):
    lender = Lender(Connection(server), timeout=5, keep=1)
    for _look in range(5):
        with lender.client() as api:
            api.request("GET", "/api/v1/nodes")
    assert len(api_server.connections) == 1
    lender.close()


def test_borrowers_at_once_get_clients_of_their_own_and_only_keep_of_them_stay(server, api_server):
    lender = Lender(Connection(server), timeout=5, keep=1)
    with lender.client() as first, lender.client() as second:
        assert first is not second
        first.request("GET", "/api/v1/nodes")
        second.request("GET", "/api/v1/nodes")
    assert len(api_server.connections) == 2 and len(lender._idle) == 1
    lender.close()
    assert lender._idle == []


def test_a_tenant_keeps_its_lender_until_its_kubeconfig_changes(server):
    tenants = TenantClients(timeout=5)
    first = tenants.lender("ns", "a", kubeconfig(server))
    assert tenants.lender("ns", "a", kubeconfig(server)) is first
    renewed = tenants.lender("ns", "a", kubeconfig(server, {"token": "renewed"}))
    assert renewed is not first and renewed.connection.bearer() == "renewed"
    assert tenants.lender("ns", "b", kubeconfig(server)) is not renewed
    tenants.forget("ns", "a")  # deleted: its clients close
    assert ("ns", "a") not in tenants._lenders and renewed._idle == []
    tenants.close()


def test_the_tenant_looked_at_longest_ago_gives_way(server):
    tenants = TenantClients(timeout=5, kept=2)
    a = tenants.lender("ns", "a", kubeconfig(server))
    tenants.lender("ns", "b", kubeconfig(server))
    assert tenants.lender("ns", "a", kubeconfig(server)) is a  # a is now the newest
    tenants.lender("ns", "c", kubeconfig(server))
    assert set(tenants._lenders) == {("ns", "a"), ("ns", "c")}


@pytest.mark.parametrize("user, named", [
    ({"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "tokenFile"),
    ({"client-certificate": "/etc/x.crt", "client-key": "/etc/x.key"}, "client-certificate, client-key"),
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh"}}, "exec"),
])
def test_a_tenants_kubeconfig_may_not_read_files_or_run_commands_here(server, user, named):
    with pytest.raises(ConfigError, match=f"kubeconfig of ns/a names {named}: a kubeconfig given as data"):
        TenantClients(timeout=5).lender("ns", "a", kubeconfig(server, user))


def test_ask_tenant_reads_node_readiness_and_names_what_does_not_answer(server, tenant):
    tenants = TenantClients(timeout=5)
    tenant.nodes = [{"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                    {"metadata": {"name": "n2"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                    {"metadata": {"name": "n3"}}]
    assert health.ask_tenant(tenants, "ns", "a", kubeconfig(server)) == (None, {"n1": True, "n2": False, "n3": False})
    tenant.status = 503
    assert health.ask_tenant(tenants, "ns", "a", kubeconfig(server)) == (
        "the virtual cluster's API does not answer: HTTP 503", {})
    assert health.ask_tenant(tenants, "ns", "b", b"kind: Config\n") == (
        "the virtual cluster's API does not answer: ConfigError", {})
    assert health.ask_tenant(tenants, "ns", "c", kubeconfig("http://127.0.0.1:9")) == (
        "the virtual cluster's API does not answer: GET /api/v1/nodes: cannot reach the API server at "
        "http://127.0.0.1:9: [Errno 111] Connection refused", {})
    tenants.close()
