"""The rollout wait polls faster once every pod is ready and only the controller's status has to catch up."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.action import workload_rollout
from ansible_collections.kosmos.kubenest.plugins.action.workload_rollout import _Rollout

ARGS = {"kind": "Deployment", "name": "vc1-apiserver", "namespace": "tenants", "crash_restarts": 2,
        "unschedulable_after": 15, "timeout": 5, "reachable_url": None}
WORKLOAD = {"kind": "Deployment", "metadata": {"generation": 2},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "apiserver"}}},
            "status": {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 0}}


def _pod(name, ready, deleting=False):
    metadata = {"name": name, **({"deletionTimestamp": "2026-11-28T00:00:00Z"} if deleting else {})}
    return {"metadata": metadata, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


class _Api:
    def __init__(self, pods):
        self.listed = pods

    def list(self, *_args, **_kwargs):
        return self.listed


def test_every_pod_ready_counts_as_ready_and_a_terminating_or_missing_one_does_not():
    for pods, ready in (([_pod("a", True)], True), ([_pod("a", False)], False), ([], False),
                        ([_pod("a", True, deleting=True)], False)):
        rollout = _Rollout(_Api(pods), ARGS)
        assert rollout.problem(WORKLOAD) is None
        assert rollout.pods_ready is ready, pods


def test_the_wait_sleeps_the_short_interval_once_the_pods_are_ready(monkeypatch):
    sleeps = []
    states = iter([WORKLOAD, dict(WORKLOAD, status=dict(WORKLOAD["status"], availableReplicas=1))])
    rollout = _Rollout(_Api([_pod("a", True)]), ARGS)
    monkeypatch.setattr(rollout, "workload", lambda: next(states))
    monkeypatch.setattr(workload_rollout.time, "sleep", sleeps.append)
    result = rollout.run(check_mode=False)
    assert result["rolled_out"] is True
    assert sleeps == [workload_rollout.REACH_POLL_S]
