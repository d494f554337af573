"""The restore annotation: pending, handed over, or refused."""

from __future__ import annotations

import pytest

from kubenest_operator.extravars import build_extravars
from kubenest_operator.restores import PENDING, RESTORE_ANNOTATION, BadRestore, restore_of

DIGEST = "0f" * 32


def body(annotation=None):
    annotations = {} if annotation is None else {RESTORE_ANNOTATION: annotation}
    return {"metadata": {"namespace": "tenants", "name": "alpha", "uid": "u1", "generation": 1,
                         "annotations": annotations}, "spec": {}}


def test_no_annotation_is_no_restore():
    assert restore_of(body()["metadata"]) is None
    assert "etcd_restore" not in build_extravars(body(), "present", None)["virtualcluster"]


def test_pending_waits_and_gives_the_run_nothing():
    assert restore_of(body(PENDING)["metadata"]) == PENDING
    assert "etcd_restore" not in build_extravars(body(PENDING), "present", None)["virtualcluster"]


def test_a_handed_over_restore_reaches_the_run():
    assert restore_of(body(f"{DIGEST}/3")["metadata"]) == {"sha256": DIGEST, "chunks": 3}
    assert build_extravars(body(f"{DIGEST}/3"), "present", None)["virtualcluster"]["etcd_restore"] == {
        "sha256": DIGEST, "chunks": 3}


@pytest.mark.parametrize("value", ["", "yes", f"{DIGEST}/0", f"{DIGEST}/1000", f"{DIGEST}/257", f"{DIGEST.upper()}/1",
                                   f"{DIGEST}/1\n", f"{DIGEST[:-1]}/1", "{{ lookup('pipe', 'id') }}/1", f"{DIGEST}/-1"])
def test_anything_else_is_refused(value):
    with pytest.raises(BadRestore, match=RESTORE_ANNOTATION):
        restore_of(body(value)["metadata"])
