"""Module payloads kept from one real ansible-playbook run to the next (kosmos.kubenest.module_cache)."""

from __future__ import annotations

import os
import sys

import yaml

from tests.support.playbook import run_playbook, write_play

MODULE = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
AnsibleModule(argument_spec={}).exit_json(changed=False, answer=%r)
"""


def _setup(tmp_path):
    checkout = tmp_path / "collections" / "ansible_collections" / "example" / "dev"
    (checkout / "plugins" / "modules").mkdir(parents=True)
    (checkout / "galaxy.yml").write_text("namespace: example\nname: dev\nversion: 0.0.1\n")
    inventory = tmp_path / "inv.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    play = write_play(tmp_path / "play.yml", [{"name": "ask", "example.dev.thing": {}}], hosts="localhost")
    return checkout / "plugins" / "modules" / "thing.py", inventory, play


def _run(tmp_path, inventory, play, cache):
    local_tmp = tmp_path / "local"
    local_tmp.mkdir(exist_ok=True)
    existing = os.environ.get("ANSIBLE_COLLECTIONS_PATH")
    return run_playbook(play, inventory, tmp_path / "control", extra_env={
        "ANSIBLE_CALLBACKS_ENABLED": "kosmos.kubenest.module_cache", "KUBENEST_MODULE_CACHE_DIR": str(cache),
        "ANSIBLE_LOCAL_TEMP": str(local_tmp),
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(p for p in (str(tmp_path / "collections"), existing) if p)})


def _payloads(cache):
    return {(key, name): os.stat(cache / key / name).st_mtime_ns for key in os.listdir(cache)
            for name in os.listdir(cache / key) if "example.dev" in name and not name.endswith(".lock")}


def test_a_payload_serves_later_runs_until_its_module_changes(tmp_path):
    module, inventory, play = _setup(tmp_path)
    cache = tmp_path / "cache"
    module.write_text(MODULE % "one")

    first = _run(tmp_path, inventory, play, cache)
    assert first.rc == 0, first.stderr
    assert first.task("ask", "localhost")["answer"] == "one"
    built = _payloads(cache)
    assert len(built) == 1, built

    second = _run(tmp_path, inventory, play, cache)
    assert second.rc == 0 and second.task("ask", "localhost")["answer"] == "one"
    assert _payloads(cache) == built  # served, not built again

    # Edited in place, same size: the next run builds it anew and runs the new code.
    module.write_text(MODULE % "two")
    third = _run(tmp_path, inventory, play, cache)
    assert third.rc == 0 and third.task("ask", "localhost")["answer"] == "two"
    after = _payloads(cache)
    assert len(after) == 2 and set(built) < set(after)
    # The run's own temporary directory went; the kept payloads did not.
    assert not list((tmp_path / "local").iterdir())


def test_a_cache_others_may_write_to_is_not_used(tmp_path):
    module, inventory, play = _setup(tmp_path)
    module.write_text(MODULE % "one")
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o777)
    result = _run(tmp_path, inventory, play, cache)
    assert result.rc == 0 and result.task("ask", "localhost")["answer"] == "one"
    assert "module payloads are built for this run only" in result.stderr
    assert "may be written by others" in result.stderr
    assert os.listdir(cache) == []
