"""The molecule scenarios under extensions/molecule (converge, idempotence, verify) that need only an API server,
against the real kube-apiserver of this tier: `molecule test` exits non-zero when a second converge changes
anything or an assertion in verify fails. The scenarios that need machines run in tests/e2e."""

from __future__ import annotations

import pytest

from tests.support.apiserver import ApiServer
from tests.support.molecule import SANDBOX_SCENARIOS, molecule_test, scenarios, steps

API_SCENARIOS = [s for s in scenarios() if s not in SANDBOX_SCENARIOS]


def test_every_role_has_a_scenario():
    assert {"coredns", "cilium", "calico", "control_plane"} <= set(API_SCENARIOS)
    assert SANDBOX_SCENARIOS <= set(scenarios())
    for scenario in scenarios():
        assert {"converge", "idempotence", "verify"} <= set(steps(scenario)), scenario


@pytest.fixture(scope="module")
def own_apiserver(k8s_bin_dir):
    """An API server of the scenarios' own, not the tier's shared one: files running beside this one create Node
    objects that no kubelet backs, and a role that reads the nodes (coredns, the CNIs) would then wait for pods
    that can never start, or converge a second time to other replica counts."""
    with ApiServer() as api:
        yield api


@pytest.mark.parametrize("scenario", API_SCENARIOS)
def test_scenario(scenario, own_apiserver, tmp_path):
    molecule_test(scenario, tmp_path, {"K8S_AUTH_KUBECONFIG": str(own_apiserver.kubeconfig),
                                       "KUBENEST_TEST_SERVICE_CIDR": own_apiserver.service_cidr})
