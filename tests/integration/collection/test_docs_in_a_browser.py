"""README and the docs pages, opened in headless Chromium as a reader would see them rendered: every image
loads, nothing makes the page wider than the window, every relative link leads to a file of the repository, and a
screenshot of each page is left in build/docs/ to look at."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.support import browser

REPO = Path(__file__).resolve().parents[3]
PAGES = [REPO / "README.md", REPO / "operator" / "README.md"] + sorted((REPO / "docs").glob("*.md"))
SHOTS = REPO / "build" / "docs"


def _targets(page: Path, token_type: str, attr: str) -> list[str]:
    found = []
    for token in browser.markdown().parse(page.read_text()):
        for child in token.children or []:
            if child.type == token_type and child.attrGet(attr):
                found.append(child.attrGet(attr))
    return found


@pytest.fixture(scope="module")
def shots():
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_page_lays_out_in_a_browser_with_every_image(page, shots):
    html = browser.render(page, shots / f"{page.relative_to(REPO).as_posix().replace('/', '_')}.html")
    seen = browser.layout(html)
    wanted = _targets(page, "image", "src")
    assert [image["src"] for image in seen.images] == wanted
    broken = [image["src"] for image in seen.images if not (image["loaded"] and image["width"] > 0)]
    assert not broken, f"images that did not load: {broken}"
    # A table or code block that does not fit scrolls in its own box; the page itself never gets wider.
    assert seen.scroll_width <= seen.viewport_width, (seen.scroll_width, seen.viewport_width)
    assert seen.height > 200, seen.height  # laid out: the text takes room
    width, height = browser.screenshot(html, html.with_suffix(".png"))
    assert width == browser.WIDTH and height == browser.MAX_HEIGHT


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_of_the_repository(page):
    missing = []
    for href in _targets(page, "link_open", "href") + _targets(page, "image", "src"):
        url = urlsplit(href)
        if url.scheme or url.netloc or not url.path:  # another site, or an anchor on the page
            continue
        target = (page.parent / unquote(url.path)).resolve()
        if not target.exists() or REPO not in target.parents:
            missing.append(href)
    assert not missing, f"{page.relative_to(REPO)} links to what is not there: {missing}"
