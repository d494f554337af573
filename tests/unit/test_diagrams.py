"""The diagrams README.md shows are drawn from their sources: each SVG is what Graphviz makes of its .dot now."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

DIAGRAMS = Path(__file__).resolve().parents[2] / "docs" / "diagrams"


@pytest.mark.parametrize("source", sorted(DIAGRAMS.glob("*.dot")), ids=lambda path: path.stem)
def test_the_svg_is_drawn_from_its_source(source):
    drawn = subprocess.run(["dot", "-Tsvg", str(source)], capture_output=True, text=True, check=True).stdout
    assert source.with_suffix(".svg").read_text() == drawn, "run `make diagrams` and commit the SVG"


def test_readme_shows_every_diagram():
    readme = (DIAGRAMS.parents[1] / "README.md").read_text()
    for source in DIAGRAMS.glob("*.dot"):
        assert f"docs/diagrams/{source.stem}.svg" in readme
