"""Each role entry point says which mode it serves and who calls it, and says it truly: the callers it names are
the playbooks and roles of the collection that include it (tests/support/role_callers.py reads them as data)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.support.role_callers import callers

REPO = Path(__file__).resolve().parents[3]
LINE = re.compile(r"^Mode: (machines|hosted|cluster)\. Callers: (.+)\.$")
NONE = "none in the collection; for playbooks of your own"
SPECS = sorted(REPO.glob("roles/*/meta/argument_specs.yml"))


def entry_points():
    for path in SPECS:
        specs = yaml.safe_load(path.read_text())["argument_specs"]
        for name, spec in specs.items():
            # An entry point that is another's alias (systemd: *main) is that one under a second name.
            names = sorted(other for other, same in specs.items() if same is spec)
            if name == names[0]:
                yield path.parts[-3], tuple(names), spec


@pytest.mark.parametrize(("role", "names", "spec"), list(entry_points()),
                         ids=[f"{role}:{'+'.join(names)}" for role, names, _spec in entry_points()])
def test_an_entry_point_names_its_mode_and_its_callers(role, names, spec):
    found = [LINE.match(item) for item in spec.get("description") or [] if isinstance(item, str)]
    found = [match for match in found if match]
    assert len(found) == 1, f"{role}:{names[0]} has no single 'Mode: ... Callers: ...' line"
    named = found[0].group(2)
    scanned = set().union(*(callers().get((role, name), set()) for name in names))
    assert (set(named.split(", ")) if named != NONE else set()) == scanned


def test_the_scan_sees_includes_by_a_template_and_by_a_plain_name():
    found = callers()
    assert "playbooks/virtualcluster.yml" in found[("node_promote", "claim")]  # tasks_from: "{{ 'claim.yml' if ..."
    assert "playbooks/virtualcluster.yml" in found[("node_promote", "release_all")]
    assert "playbooks/bootstrap.yml" in found[("etcd", "main")]


def test_each_role_readme_is_the_one_its_argument_specs_give():
    from tests.support.role_readmes import main

    assert main(["--check"]) == 0, "run `make role-readmes` and commit the READMEs"
