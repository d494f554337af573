"""Each playbook says who runs it, and README's table of playbooks agrees and leaves none out."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
GROUPS = ("setup", "day to day", "engine")


def _readme_table():
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Which playbook is for whom"):]
    rows = {}
    for line in section.split("\n")[4:]:
        if not line.startswith("| "):
            break
        group, _who, names = (cell.strip() for cell in line.strip("|").split("|"))
        rows.update({name: group for name in re.findall(r"`([a-z_]+)`", names)})
    return rows


def test_every_playbook_names_its_group_as_the_readme_does():
    table = _readme_table()
    playbooks = sorted(p for p in (REPO / "playbooks").glob("*.yml"))
    assert playbooks and set(table) == {p.stem for p in playbooks}
    for path in playbooks:
        header = re.search(r"^# Audience: (.+?) \(README\.md", path.read_text(), re.M)
        assert header, f"{path.name} has no '# Audience:' line"
        assert header.group(1) in GROUPS and header.group(1) == table[path.stem], path.name
