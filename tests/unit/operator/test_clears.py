"""A held GlobalNode annotated kubenest.kosmos.io/clear gets one clear run at a time, and the annotation answers it."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as protocol

from kubenest_operator import clears
from kubenest_operator.runs import RunOutcome
from kubenest_operator.slots import RunSlots


def gn(state, annotations=None):
    return {"apiVersion": "kosmos.io/v1alpha1", "kind": "GlobalNode",
            "metadata": {"name": "w1", "uid": "u1", "annotations": annotations or {}}, "status": {"state": state}}


ASKED = {protocol.CLEAR_ANNOTATION: "asked", protocol.CLEAR_FAILED_ANNOTATION: "an older failure"}


def test_only_a_held_node_with_the_annotation_is_asked_for():
    assert clears.asked(gn("held", ASKED))
    assert not clears.asked(gn("held"))
    assert not clears.asked(gn("free", ASKED))
    assert not clears.asked(gn("occupied", ASKED))


class Api:
    def __init__(self, body):
        self.body, self.patches = body, []

    async def get_globalnode(self, name):
        return self.body

    async def patch_globalnode(self, name, patch, status=False):
        self.patches.append(patch["metadata"]["annotations"])
        return self.body


class Runner:
    def __init__(self, status):
        self.status, self.runs = status, []

    async def run(self, playbook, run_id, extravars, tracker):
        self.runs.append((playbook, extravars))
        await asyncio.sleep(0.05)
        return RunOutcome(run_id, self.status, 0 if self.status == "successful" else 2, 0.05)


def _ctx(body, status):
    config = SimpleNamespace(kubeconfig="/k/config")
    return SimpleNamespace(api=Api(body), runner=Runner(status), slots=RunSlots(2, 2), config=config,
                           run_site_vars=lambda logger: {"kubenest_images_dir": "/images"},
                           node_clears=clears.NodeClears())


def _scenario(ctx, body):
    async def go():
        ctx.node_clears.start(ctx, body, logging.getLogger("test"))
        ctx.node_clears.start(ctx, body, logging.getLogger("test"))  # an event while the first runs
        for _tick in range(200):  # bounded: 2 s
            if not ctx.node_clears.running:
                break
            await asyncio.sleep(0.01)
        assert ctx.node_clears.running == {}
    asyncio.run(go())


@pytest.mark.parametrize(("status", "failure"), [("successful", None), ("failed", "node_clear.yml failed (rc 2)")])
def test_one_run_per_request_and_the_answer_removes_the_request(status, failure, posted):
    body = gn("held", ASKED)
    ctx = _ctx(body, status)
    _scenario(ctx, body)
    assert [(p, e["kubenest_clear_nodes"], e["kubenest_images_dir"]) for p, e in ctx.runner.runs] == [
        ("node_clear.yml", "w1", "/images")]
    assert ctx.runner.runs[0][1]["kubenest_host_kubeconfig"] == "/k/config"
    # The older failure goes first, keeping the request (a restarted operator runs it again); the answer ends it.
    assert ctx.api.patches == [{protocol.CLEAR_FAILED_ANNOTATION: None},
                               {protocol.CLEAR_ANNOTATION: None, protocol.CLEAR_FAILED_ANNOTATION: failure}]
    assert posted[0][:2] == ("Normal", "Clearing")
    assert (posted[-1][:2] == ("Warning", "ClearFailed")) == (failure is not None)


def test_a_request_on_a_node_that_is_not_held_is_dropped_without_a_run(posted):
    body = gn("free", {protocol.CLEAR_ANNOTATION: "asked"})  # cleared by an operator that stopped before answering
    ctx = _ctx(body, "successful")
    _scenario(ctx, body)
    assert ctx.runner.runs == [] and ctx.api.patches == [{protocol.CLEAR_ANNOTATION: None}] and posted == []


def test_a_node_no_longer_held_when_its_turn_comes_is_left_alone(posted):
    ctx = _ctx(gn("free", ASKED), "successful")
    _scenario(ctx, gn("held", ASKED))
    assert ctx.runner.runs == [] and ctx.api.patches == [{protocol.CLEAR_ANNOTATION: None}] and posted == []
