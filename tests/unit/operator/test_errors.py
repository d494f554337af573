"""Permanent-error markers, failure messages and the retry backoff."""

from __future__ import annotations

import pytest

from kubenest_operator.errors import Permanent, backoff, failure_messages, failure_reason, parse_permanent, summarize


@pytest.mark.parametrize(("message", "expected"), [
    ("[kubenest:permanent:Unsatisfiable] promotePolicies[0] wants 3 node(s) but only 1 free GlobalNode(s) match",
     Permanent("Unsatisfiable", "promotePolicies[0] wants 3 node(s) but only 1 free GlobalNode(s) match")),
    # folded YAML (>-) and assert's fail_msg keep newlines and runs of spaces: one line comes out
    ("[kubenest:permanent:InvalidRequest] virtualcluster needs a DNS-label\n  namespace", Permanent(
        "InvalidRequest", "virtualcluster needs a DNS-label namespace")),
    ("Action failed: [kubenest:permanent:Quota]   too many", Permanent("Quota", "too many")),
    ("[kubenest:permanent:Bare]", Permanent("Bare", "Bare")),
])
def test_markers_are_parsed(message, expected):
    assert parse_permanent(message) == expected


@pytest.mark.parametrize("message", [
    "connection refused", "[kubenest:transient:Flaky] x", "[kubenest:permanent:] x", "[kubenest:permanent:9x] y",
    None, 42, ["[kubenest:permanent:Unsatisfiable] in a list"],
])
def test_other_failures_are_not_permanent(message):
    assert parse_permanent(message) is None


def test_failure_messages_include_failed_loop_items_only():
    res = {"msg": "One or more items failed", "results": [
        {"failed": False, "msg": "All assertions passed"},
        {"failed": True, "msg": "[kubenest:permanent:Unsatisfiable] not enough nodes"},
        "not-a-dict",
    ]}
    assert failure_messages(res) == ["One or more items failed", "[kubenest:permanent:Unsatisfiable] not enough nodes"]
    assert failure_messages({"rc": 1}) == [] and failure_messages(None) == []


def test_backoff_doubles_from_the_base_up_to_the_cap():
    assert [backoff(retry, 10, 300) for retry in range(7)] == [10, 20, 40, 80, 160, 300, 300]
    assert backoff(10_000, 10, 300) == 300
    assert backoff(-1, 10, 300) == 10


def test_summarize_is_one_bounded_line():
    assert summarize("a\n  b\tc") == "a b c"
    long = summarize("x" * 2000, limit=100)
    assert len(long) == 100 and long.endswith("…")


def test_a_failed_node_step_gets_its_own_reason():
    message = ("task 'Report the failed step' of role node_promote failed on kn-w3: [kubenest:step:Kubelet] "
               "promoting kn-w3 failed at step Kubelet and was rolled back: boom")
    assert failure_reason(message, "RunFailed") == "NodeStepFailed"
    assert failure_reason("task 'x' failed on a host: [kubenest:step:] nothing", "RunFailed") == "RunFailed"
    assert failure_reason("playbook failed (rc 2)", "DeleteFailed") == "DeleteFailed"


def test_a_pod_that_cannot_start_gives_its_own_reason():
    message = ("task 'Wait until etcd is ready' failed on localhost: StatefulSet tenants/vc1-etcd cannot come up: "
               "pod vc1-etcd-0: ImagePullBackOff: Back-off pulling image \"kubenest.local/absent/etcd:v3\"")
    assert failure_reason(message, "RunFailed") == "ImagePullBackOff"
    assert failure_reason("cannot come up: pod x: lowercase: no", "RunFailed") == "RunFailed"
