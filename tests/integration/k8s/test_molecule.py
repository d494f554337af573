"""The molecule scenarios under extensions/molecule (converge, idempotence, verify) that need only an API server,
against the real kube-apiserver of this tier: `molecule test` exits non-zero when a second converge changes
anything or an assertion in verify fails. The scenarios that need machines run in tests/e2e."""

from __future__ import annotations

import pytest

from tests.support.molecule import SANDBOX_SCENARIOS, molecule_test, scenarios, steps

API_SCENARIOS = [s for s in scenarios() if s not in SANDBOX_SCENARIOS]


def test_every_role_has_a_scenario():
    assert {"coredns", "cilium", "calico", "control_plane"} <= set(API_SCENARIOS)
    assert SANDBOX_SCENARIOS <= set(scenarios())
    for scenario in scenarios():
        assert {"converge", "idempotence", "verify"} <= set(steps(scenario)), scenario


@pytest.mark.parametrize("scenario", API_SCENARIOS)
def test_scenario(scenario, apiserver, tmp_path):
    molecule_test(scenario, tmp_path, {"K8S_AUTH_KUBECONFIG": str(apiserver.kubeconfig),
                                       "KUBENEST_TEST_SERVICE_CIDR": apiserver.service_cidr})
