"""README's "Use it on your own cluster" as a test reads it: the site's variables, then numbered steps and
their undos, each a `sh` block whose first line names it (`# your site`, `# step N: ...`, `# undo N ...`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Use it on your own cluster"
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
EXPORT = re.compile(r"^export ([A-Z_]+)=", re.MULTILINE)


@dataclass
class QuickStart:
    site: str = ""
    steps: dict[int, str] = field(default_factory=dict)
    undos: dict[int, str] = field(default_factory=dict)

    @property
    def site_variables(self) -> list[str]:
        return EXPORT.findall(self.site)

    def script(self, blocks: list[str]) -> str:
        """One shell script of `blocks`, stopping at the first command that fails, as a careful user would."""
        return "set -euo pipefail\n" + "\n".join(blocks)


def read(readme: Path = README) -> QuickStart:
    text = readme.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end != -1 else len(text)]
    quick = QuickStart()
    for block in BLOCK.findall(section):
        first = block.splitlines()[0]
        if first == "# your site":
            quick.site = block
        elif match := re.match(r"# (step|undo) (\d+)\b", first):
            kind, number = match.group(1), int(match.group(2))
            table = quick.steps if kind == "step" else quick.undos
            if number in table:
                raise ValueError(f"README: {kind} {number} appears twice in {SECTION!r}")
            table[number] = block
        else:
            raise ValueError(f"README: a block of {SECTION!r} starts with {first!r}, not '# your site', "
                             "'# step N' or '# undo N'")
    return quick
