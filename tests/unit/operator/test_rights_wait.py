"""A run waits for the operator's rights in the VirtualCluster's namespace (kubenest-binder grants them) instead of
failing half-way; the API's answer is stubbed here, tests/integration/k8s/test_binder.py asks a real API server."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import kopf
import pytest

from kubenest_operator import handlers


class FakeApi:
    def __init__(self, allowed: bool):
        self.allowed, self.asked, self.conditions = allowed, [], []

    async def has_tenant_rights(self, namespace):
        self.asked.append(namespace)
        return self.allowed

    async def apply_virtualcluster_conditions(self, body):
        self.conditions.append({c["type"]: c for c in body["status"]["conditions"]})


def _ctx(allowed: bool):
    return SimpleNamespace(api=FakeApi(allowed), config=SimpleNamespace(rights_wait_interval=3.0))


def _body(**metadata):
    return kopf.Body({"metadata": {"namespace": "team-a", "name": "vc1", "generation": 2, **metadata}})


def test_a_namespace_without_the_rights_waits_saying_why():
    ctx = _ctx(allowed=False)
    with pytest.raises(kopf.TemporaryError) as waiting:
        asyncio.run(handlers._await_rights(ctx, _body(), logging.getLogger("test")))
    assert waiting.value.delay == 3.0
    assert "no rights in namespace team-a yet" in str(waiting.value)
    [conditions] = ctx.api.conditions
    assert conditions["Ready"]["status"] == "False" and conditions["Ready"]["reason"] == "WaitingForRights"
    assert ctx.api.asked == ["team-a"]


def test_a_deletion_waits_too_without_touching_ready():
    ctx = _ctx(allowed=False)
    with pytest.raises(kopf.TemporaryError):
        asyncio.run(handlers._await_rights(ctx, _body(deletionTimestamp="2026-12-04T07:00:00Z"),
                                           logging.getLogger("test")))
    assert ctx.api.conditions == []


def test_with_the_rights_the_run_goes_on():
    ctx = _ctx(allowed=True)
    assert asyncio.run(handlers._await_rights(ctx, _body(), logging.getLogger("test"))) is None
    assert ctx.api.conditions == []
