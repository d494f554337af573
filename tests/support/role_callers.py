"""Which playbooks and roles of the collection include which role entry points (read from the YAML as data)."""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PREFIX = "kosmos.kubenest."
INCLUDES = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")


def _walk(node):
    if isinstance(node, list):
        for item in node:
            yield from _walk(item)
    elif isinstance(node, dict):
        yield node
        for value in node.values():
            if isinstance(value, (list, dict)):
                yield from _walk(value)


def _entries(tasks_from: str | None) -> list[str]:
    """The entry points a tasks_from names; a template choosing between files names each of them."""
    names = re.findall(r"'([\w-]+)\.ya?ml'", tasks_from) if tasks_from and "{{" in tasks_from else [tasks_from]
    return [(name or "main").removesuffix(".yml").removesuffix(".yaml") for name in names]


@lru_cache(maxsize=4)
def callers(repo: Path = REPO) -> dict[tuple[str, str], set[str]]:
    """(role, entry point) -> the files (relative to the repository) that include it."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    files = [*repo.glob("playbooks/*.yml"), *repo.glob("playbooks/tasks/*.yml"), *repo.glob("roles/*/tasks/*.yml")]
    for path in sorted(files):
        where = path.relative_to(repo).as_posix()
        for node in _walk(yaml.safe_load(path.read_text()) or []):
            for key in INCLUDES:
                spec = node.get(key)
                if isinstance(spec, dict) and str(spec.get("name", "")).startswith(PREFIX):
                    for entry in _entries(spec.get("tasks_from")):
                        found[(spec["name"][len(PREFIX):], entry)].add(where)
            for role in node.get("roles") or []:
                name = role.get("role", role.get("name")) if isinstance(role, dict) else role
                if isinstance(name, str) and name.startswith(PREFIX):
                    found[(name[len(PREFIX):], "main")].add(where)
    return dict(found)


if __name__ == "__main__":
    for (role, entry), where in sorted(callers().items()):
        print(f"{role}:{entry}: {', '.join(sorted(where))}")
