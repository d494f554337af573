"""versions.env is the one place that pins versions: the lookup reads it, and no role, playbook, manifest or
plugin of the collection (nor the operator) repeats a pinned value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible.errors import AnsibleLookupError
from ansible_collections.kosmos.kubenest.plugins.lookup.pinned_version import LookupModule, read_pins

REPO = Path(__file__).resolve().parents[3]
SHIPPED = ("roles", "playbooks", "deploy", "plugins", "meta", "operator/kubenest_operator", "extensions")


def test_the_lookup_reads_versions_env_by_component_name():
    pins = read_pins(REPO / "versions.env")
    assert LookupModule().run(["kubernetes", "CILIUM", "pause"]) == [
        pins["KUBERNETES_VERSION"], pins["CILIUM_VERSION"], pins["PAUSE_VERSION"]]


def test_an_unknown_component_names_the_pinned_ones():
    with pytest.raises(AnsibleLookupError, match=r"no pin for 'flannel' \(pinned: .*kubernetes"):
        LookupModule().run(["flannel"])


def test_no_pinned_value_is_repeated_outside_versions_env():
    values = set()
    for value in read_pins(REPO / "versions.env").values():
        values |= {value, value.removeprefix("v")}
    alternatives = "|".join(map(re.escape, sorted(values)))
    pattern = re.compile(rf"(?<![\w.])({alternatives})(?![\w.])")
    repeats = []
    for top in SHIPPED:
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".py", ".j2", ".json", ".toml"):
                for number, line in enumerate(path.read_text().splitlines(), 1):
                    if pattern.search(line):
                        repeats.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not repeats, "\n".join(repeats)
