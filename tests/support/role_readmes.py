"""Each role's README.md, written from its meta/argument_specs.yml: entry points with their mode and callers,
options, and an example include. `python -m tests.support.role_readmes` writes them (`make role-readmes`);
tests/unit/collection/test_role_entry_points.py fails when one differs from what the specs give."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
# Ansible's documentation markup, as plain Markdown.
MARKUP = re.compile(r"\b([CIMOPVBLU])\(([^()]*)\)")
EXAMPLE_VALUES = {"str": '"..."', "path": '"..."', "int": "1", "bool": "true", "list": "[]", "dict": "{}",
                  "raw": '"..."'}


def _plain(text: object) -> str:
    def one(match: re.Match) -> str:
        kind, value = match.groups()
        if kind in "CMOPVU":
            return f"`{value}`"
        return f"*{value}*" if kind == "I" else value

    return MARKUP.sub(one, " ".join(str(text).split()))


def _lines(description: object) -> list[str]:
    if description is None:
        return []
    return [_plain(item) for item in (description if isinstance(description, list) else [description])]


def _option_row(name: str, spec: dict) -> str:
    kind = spec.get("type", "str") + (f" of {spec['elements']}" if spec.get("elements") else "")
    if spec.get("required"):
        default = "required"
    elif "default" in spec:
        default = f"`{yaml.safe_dump(spec['default'], default_flow_style=True).strip().removesuffix('...').strip()}`"
    else:
        default = ""
    described = " ".join(_lines(spec.get("description")))
    if spec.get("choices"):
        described += " One of " + ", ".join(f"`{c}`" for c in spec["choices"]) + "."
    return f"| `{name}` | {kind} | {default} | {described.replace('|', '&#124;')} |"


def _example(role: str, entry: str, options: dict) -> list[str]:
    lines = ["```yaml", f"- name: {role} {entry}", "  ansible.builtin.include_role:",
             f"    name: kosmos.kubenest.{role}"]
    if entry != "main":
        lines.append(f"    tasks_from: {entry}")
    required = [(name, spec) for name, spec in options.items() if spec.get("required")]
    if required:
        lines.append("  vars:")
        lines += [f"    {name}: {EXAMPLE_VALUES.get(spec.get('type', 'str'), '...')}" for name, spec in required]
    return lines + ["```"]


def readme(role_dir: Path) -> str:
    role = role_dir.name
    specs = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    out = [f"# kosmos.kubenest.{role}", "",
           "Written from `meta/argument_specs.yml` by `make role-readmes`; edit that file, not this one.", ""]
    for entry, spec in specs.items():
        aliases = [other for other, same in specs.items() if same is spec and other != entry]
        out += [f"## Entry point `{entry}`", "", _plain(spec.get("short_description", "")), ""]
        if aliases and list(specs).index(aliases[0]) < list(specs).index(entry):
            out += [f"The same as `{aliases[0]}`.", ""]
            continue
        out += [f"- {line}" for line in _lines(spec.get("description"))]
        options = spec.get("options") or {}
        if options:
            out += ["", "| option | type | default | description |", "| --- | --- | --- | --- |"]
            out += [_option_row(name, option) for name, option in options.items()]
        out += ["", *_example(role, entry, options), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for role_dir in sorted(path.parent.parent for path in REPO.glob("roles/*/meta/argument_specs.yml")):
        target, text = role_dir / "README.md", readme(role_dir)
        if not target.is_file() or target.read_text() != text:
            stale.append(target.relative_to(REPO).as_posix())
            if not check:
                target.write_text(text)
    if stale:
        print(("stale: " if check else "written: ") + ", ".join(stale))
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
