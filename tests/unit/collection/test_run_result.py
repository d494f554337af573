"""The result contract between a run and the operator: one set_stats, one key, markers of one shape."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result

ROOT = Path(__file__).resolve().parents[3]
YAML = sorted([*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("playbooks/*.yml"), *ROOT.glob("playbooks/tasks/*.yml")])


def _tasks(node):
    """Every task of a play list, a task list or a block, however deeply nested."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        if any(key in node for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers")):
            for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
                yield from _tasks(node.get(key) or [])
        else:
            yield node


def test_a_run_writes_its_result_once_from_the_report_play():
    writers = [(path.relative_to(ROOT).as_posix(), task) for path in YAML
               for task in _tasks(yaml.safe_load(path.read_text()) or [])
               if "ansible.builtin.set_stats" in task]
    assert [(where, task["name"]) for where, task in writers] == [("playbooks/virtualcluster.yml", "Report the result")]
    stats = writers[0][1]["ansible.builtin.set_stats"]
    assert list(stats["data"]) == [run_result.RESULT_KEY] and stats["aggregate"] is False


def test_every_marker_in_the_roles_and_playbooks_is_one_the_operator_reads():
    found = []
    for path in YAML:
        for marker in re.findall(r"\[kubenest:[^\]]*\]", path.read_text()):
            found.append(marker)
            if marker.startswith("[kubenest:permanent:"):
                assert run_result.PERMANENT.match(marker + " why"), (path, marker)
            else:
                assert run_result.STEP.match(marker) or "{{" in marker, (path, marker)
    assert found  # the scan sees them (e.g. the InvalidRequest of virtualcluster.yml)


@pytest.mark.parametrize(("message", "reason", "rest"), [
    (run_result.permanent("NotOwned", "Secret a/b already exists"), "NotOwned", "Secret a/b already exists"),
    (run_result.permanent("InvalidRequest", "line one\nline two"), "InvalidRequest", "line one\nline two"),
])
def test_a_permanent_failure_reads_back_as_written(message, reason, rest):
    match = run_result.PERMANENT.search("fatal: " + message)
    assert (match.group(1), match.group(2)) == (reason, rest)


def test_a_stuck_pod_reads_back_with_its_reason():
    message = run_result.pod_stuck("StatefulSet t/vc-etcd", "vc-etcd-0", "ImagePullBackOff: back-off pulling")
    assert run_result.POD.search(message).group(1) == "ImagePullBackOff"
    assert run_result.STEP.search(run_result.step("Kubelet")).group(1) == "Kubelet"
