"""The desired-state revision an operator upgrade compares (revision.py): prose, comments and layout do not change
it, a changed default or line of code does; and a resumed virtual cluster whose only drift is that revision runs
in the upgrade lane, one at a time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import kopf
import pytest

from kubenest_operator import drift, handlers
from kubenest_operator import status as st
from kubenest_operator.revision import ROOTS, desired_state_revision, file_meaning, python_meaning
from kubenest_operator.shards import ShardGuard

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    """A copy of this collection's playbooks, roles and plugins, and its revision before any edit."""
    root = tmp_path_factory.mktemp("collection")
    for top in ROOTS:
        shutil.copytree(REPO_ROOT / top, root / top, ignore=shutil.ignore_patterns("__pycache__"))
    return root, desired_state_revision(root)


@contextlib.contextmanager
def edited(path: Path, old: str, new: str):
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new, 1))
    try:
        yield
    finally:
        path.write_text(text)


PROSE_EDITS = [
    # a comment and a task's layout in a role
    ("roles/control_plane/tasks/hosted_prepare.yml", "# One module run reads", "# A single module run reads"),
    ("roles/control_plane/tasks/hosted_prepare.yml", "    kind: Node\n    label_selectors",
     "    kind: 'Node'\n    label_selectors"),
    # a role's README and an argument's description
    ("roles/etcd/README.md", "etcd", "Etcd"),
    ("roles/control_plane/meta/argument_specs.yml", "description:", "description: Reworded."),
    # a plugin's docstring, a comment and a module's DOCUMENTATION
    ("plugins/plugin_utils/hosted_pods.py", '"""', '"""Reworded. '),
    ("plugins/plugin_utils/hosted_pods.py", "\n# ", "\n# Reworded: "),
    ("plugins/modules/kube_apply.py", "short_description:", "short_description: Reworded."),
]

MEANING_EDITS = [
    ("roles/control_plane/defaults/main/hosted.yml", "control_plane_hosted_ready_timeout: ",
     "control_plane_hosted_ready_timeout: 1"),
    ("plugins/plugin_utils/hosted_pods.py", "maxUnavailable", "maxSurge"),
    ("roles/control_plane/tasks/hosted_prepare.yml", "delay: 2", "delay: 3"),
]


def _ids(edits):
    return [f"{path}:{old[:20]}" for path, old, _new in edits]


@pytest.mark.parametrize(("path", "old", "new"), PROSE_EDITS, ids=_ids(PROSE_EDITS))
def test_prose_comments_and_layout_leave_the_revision(collection, path, old, new):
    root = collection[0]
    before = file_meaning(root / path)
    with edited(root / path, old, new):
        assert file_meaning(root / path) == before


@pytest.mark.parametrize(("path", "old", "new"), MEANING_EDITS, ids=_ids(MEANING_EDITS))
def test_a_changed_default_task_or_line_of_code_changes_it(collection, path, old, new):
    root = collection[0]
    before = file_meaning(root / path)
    with edited(root / path, old, new):
        assert file_meaning(root / path) != before


def test_the_revision_is_of_the_files_meaning_and_a_new_file_changes_it(collection):
    root, before = collection
    assert before == desired_state_revision(REPO_ROOT)
    with edited(root / PROSE_EDITS[0][0], *PROSE_EDITS[0][1:]):
        assert desired_state_revision(root) == before
    with edited(root / MEANING_EDITS[0][0], *MEANING_EDITS[0][1:]):
        assert desired_state_revision(root) != before
    added = root / "roles/etcd/tasks/extra.yml"
    added.write_text("- ansible.builtin.debug: {msg: x}\n")
    try:
        assert desired_state_revision(root) != before
    finally:
        added.unlink()


def test_python_meaning_keeps_code_and_drops_documentation():
    documented = b'"""Doc."""\nDOCUMENTATION = "x: 1"\n\ndef f():\n    """Doc."""\n    return 1  # one\n'
    bare = b"def f():\n    return 1\n"
    assert python_meaning(documented) == python_meaning(bare)
    assert python_meaning(b"def f():\n    return 2\n") != python_meaning(bare)
    assert python_meaning(b'def f():\n    """Only a docstring."""\n') == python_meaning(b"def f():\n    pass\n")


def _resumed(name: str) -> kopf.Body:
    return kopf.Body({"metadata": {"namespace": "team-a", "name": name, "generation": 1},
                      "status": {"phase": st.COMPLETED, "observedGeneration": 1}})


def _concurrency(monkeypatch, why: str, count: int = 3, lane: int = 1) -> int:
    """How many of `count` resumed virtual clusters whose drift is `why` ran at once."""
    running, most = 0, 0

    async def reason_to_run(_ctx, _body):
        return why

    async def rights(_ctx, _body, _logger):
        return None

    @contextlib.asynccontextmanager
    async def exclusive(_ctx, _namespace, _name, _phase):
        yield None

    async def converge(_ctx, _body, _phase, _retry, _logger):
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)
        running -= 1

    monkeypatch.setattr(drift, "reason_to_run", reason_to_run)
    monkeypatch.setattr(handlers, "_await_rights", rights)
    monkeypatch.setattr(handlers, "exclusive_run", exclusive)
    monkeypatch.setattr(handlers, "converge", converge)

    async def main():
        ctx = SimpleNamespace(upgrades=asyncio.Semaphore(lane), shard_guard=ShardGuard())
        await asyncio.gather(*(handlers.reconcile(body=_resumed(f"vc{i}"), reason="resume", retry=0,
                                                  logger=logging.getLogger("test"), memo=SimpleNamespace(ctx=ctx))
                               for i in range(count)))
    asyncio.run(main())
    return most


def test_an_upgrade_runs_its_virtual_clusters_one_at_a_time(monkeypatch):
    assert _concurrency(monkeypatch, drift.COLLECTION_CHANGED) == 1


def test_an_upgrade_runs_as_many_at_once_as_it_is_given(monkeypatch):
    assert _concurrency(monkeypatch, drift.COLLECTION_CHANGED, count=4, lane=2) == 2


def test_other_drift_runs_side_by_side(monkeypatch):
    assert _concurrency(monkeypatch, "the spec changed") == 3
