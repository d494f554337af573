"""The operator's steps of a CA rotation (operator/kubenest_operator/ca_rotation.py): which step each run takes,
from spec.caRotation and what status.caRotation says was done, so that a rotation resumes where it stopped and a
finished one is never started again."""

from __future__ import annotations

import pytest

from kubenest_operator import ca_rotation
from kubenest_operator.extravars import build_extravars


def _spec(rotation_id=None, complete=None):
    rotation = {} if rotation_id is None else {"id": rotation_id}
    if complete is not None:
        rotation["complete"] = complete
    return {"caRotation": rotation} if rotation else {}


def _done(rotation_id, step):
    return {"caRotation": {"id": rotation_id, "step": step}}


@pytest.mark.parametrize(("spec", "status", "step"), [
    (_spec(), {}, None),
    (_spec("r1"), {}, "trust"),
    (_spec("r1"), _done("r1", "trust"), "sign"),
    (_spec("r1"), _done("r1", "sign"), None),  # prepared: waits for complete
    (_spec("r1", True), _done("r1", "sign"), "finish"),
    (_spec("r1", True), {}, "trust"),  # complete from the start still goes through every step
    (_spec("r1", True), _done("r1", "finish"), None),
    (_spec("r2"), _done("r1", "finish"), "trust"),  # a new id starts a new rotation
    (_spec("r1"), {"caRotation": {"id": "r1", "step": "bogus"}}, "trust"),
])
def test_each_run_takes_the_step_after_the_last_one_done(spec, status, step):
    assert ca_rotation.next_step(spec, status) == step


def test_a_step_done_is_recorded_with_its_phase_and_said_in_an_event():
    entry = ca_rotation.status_entry({"id": "r1", "step": "sign"}, "2026-12-06T10:00:00Z")
    assert entry == {"id": "r1", "step": "sign", "phase": "Prepared", "lastStepTime": "2026-12-06T10:00:00Z"}
    assert "fetch the kubeconfig again" in ca_rotation.describe(entry, None)
    assert ca_rotation.describe({"id": "r1", "step": "trust"}, "sign") == "CA rotation r1: step trust done, sign next"
    assert ca_rotation.status_entry({"id": "r1"}, "now") is None
    assert ca_rotation.status_entry({"id": "", "step": "trust"}, "now") is None


def test_the_step_reaches_the_playbook_only_for_a_present_virtual_cluster():
    body = {"metadata": {"namespace": "t", "name": "vc", "uid": "u", "generation": 3},
            "spec": _spec("r1"), "status": _done("r1", "trust")}
    assert build_extravars(body, "present", None)["virtualcluster"]["ca_rotation"] == {"id": "r1", "step": "sign"}
    assert "ca_rotation" not in build_extravars(body, "absent", None)["virtualcluster"]
    body["status"] = _done("r1", "sign")
    assert "ca_rotation" not in build_extravars(body, "present", None)["virtualcluster"]
