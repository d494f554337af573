"""promotion_step: the fact of the step entered, and the injected fault of the rollback tests, in one task."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.action.promotion_step import enter


def test_entering_a_step_sets_its_fact_and_changes_nothing():
    assert enter("Kubelet", "") == {"changed": False, "ansible_facts": {"node_promote_step": "Kubelet"},
                                    "step": "Kubelet"}


def test_another_steps_fault_does_not_fire():
    assert "failed" not in enter("Kubelet", "Drain")


def test_the_faulted_step_fails_and_carries_its_name_for_the_rescue():
    result = enter("Drain", "Drain")
    assert result["failed"] is True
    assert result["msg"] == "[kubenest:fault] fault injected on entering step Drain"
    assert result["step"] == "Drain"  # a failed result's facts are not set


def test_a_step_needs_a_name():
    with pytest.raises(AnsibleActionFail, match="name must name a step"):
        enter("  ", "")
