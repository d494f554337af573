"""role_options: one argument spec for several role entry points, which virtualcluster.yml checks once instead
of ansible-core checking each role again at every include."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleLookupError
from ansible_collections.kosmos.kubenest.plugins.lookup.role_options import LookupModule
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.role_options import (
    RoleOptionsError,
    entry_points,
    merged_spec,
)

REPO = Path(__file__).resolve().parents[3]


def write_role(roles, name, specs):
    meta = roles / name / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": specs}))


def test_required_is_dropped_at_the_top_and_kept_in_sub_options(tmp_path):
    write_role(tmp_path, "r", {"main": {"options": {
        "r_name": {"type": "str", "required": True, "description": "x"},
        "r_vc": {"type": "dict", "required": True, "options": {"name": {"type": "str", "required": True}}},
        "r_mode": {"type": "str", "choices": ["a", "b"], "default": "a"},
    }}})
    spec = merged_spec(["r"], roles_dir=tmp_path)
    assert spec["r_name"] == {"type": "str", "description": "x"}
    assert spec["r_vc"]["options"] == {"name": {"type": "str", "required": True}}
    assert spec["r_mode"]["choices"] == ["a", "b"]


def test_a_role_alone_means_all_its_entry_points_and_a_named_one_only_that(tmp_path):
    write_role(tmp_path, "r", {"main": {"options": {"r_a": {"type": "int"}}},
                               "other": {"options": {"r_b": {"type": "bool"}}}})
    assert set(merged_spec(["r"], roles_dir=tmp_path)) == {"r_a", "r_b"}
    assert set(merged_spec(["r:other"], roles_dir=tmp_path)) == {"r_b"}


def test_an_option_two_entry_points_define_differently_is_an_error(tmp_path):
    write_role(tmp_path, "r", {"main": {"options": {"r_a": {"type": "int", "required": True}}},
                               "same": {"options": {"r_a": {"type": "int", "description": "other words"}}},
                               "other": {"options": {"r_a": {"type": "str"}}}})
    assert merged_spec(["r:main", "r:same"], roles_dir=tmp_path) == {"r_a": {"type": "int", "description": ""}}
    with pytest.raises(RoleOptionsError, match=r"option 'r_a' is defined differently by r:main and r:other"):
        merged_spec(["r:main", "r:other"], roles_dir=tmp_path)


def test_unknown_roles_and_entry_points_are_named(tmp_path):
    write_role(tmp_path, "r", {"main": {"options": {}}})
    with pytest.raises(RoleOptionsError, match=r"role 'nope' has no meta/argument_specs.yml"):
        merged_spec(["nope"], roles_dir=tmp_path)
    with pytest.raises(RoleOptionsError, match=r"role 'r' has no entry point 'hosted' \(it has: main\)"):
        merged_spec(["r:hosted"], roles_dir=tmp_path)
    with pytest.raises(AnsibleLookupError, match=r"role_options: role 'nope' has no"):
        LookupModule().run(["nope"])


def _includes(tasks):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if "ansible.builtin.include_role" in task:
            yield task["ansible.builtin.include_role"]
        for key in ("block", "rescue", "always"):
            yield from _includes(task.get(key))


def test_every_role_the_virtualcluster_playbook_includes_is_checked_up_front():
    plays = yaml.safe_load((REPO / "playbooks" / "virtualcluster.yml").read_text())
    check = next(t for t in plays[0]["tasks"] if t.get("name") == "Check the settings of the roles this playbook runs")
    terms = check["vars"]["kubenest_vc_entry_points"]
    checked = merged_spec(terms)  # the collection's own specs merge without a conflict
    assert checked
    includes = [i for play in plays for i in _includes(play.get("tasks"))]
    for tasks_file in sorted((REPO / "playbooks" / "tasks").glob("virtualcluster_*.yml")):
        includes += list(_includes(yaml.safe_load(tasks_file.read_text())))
    assert len(includes) > 15
    for include in includes:
        assert include.get("rolespec_validate") is False, include
        role = include["name"].removeprefix("kosmos.kubenest.")
        for entry in re.findall(r"(\w+)\.yml", include.get("tasks_from", "main.yml")) or [include["tasks_from"]]:
            assert entry in entry_points(role), (role, entry)
            assert role in terms or f"{role}:{entry}" in terms, (role, entry)
