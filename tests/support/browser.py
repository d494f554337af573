"""Markdown pages as a reader sees them: rendered to HTML (CommonMark with tables, the way GitHub and Galaxy show a
README) and opened in headless Chromium, which reports how each image loaded and how wide the page came out, and
takes a screenshot."""

from __future__ import annotations

import html
import json
import shutil
import struct
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from markdown_it import MarkdownIt

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH = 1280
# Long enough for the first screens of a long page; a screenshot of all of README would be tens of megapixels.
MAX_HEIGHT = 8000
# Close to GitHub's page: a centred column, tables with borders, code blocks that scroll rather than widen it.
STYLE = """body{max-width:980px;margin:2em auto;padding:0 1em;font-family:sans-serif;line-height:1.5}
table{border-collapse:collapse;display:block;overflow-x:auto}td,th{border:1px solid #ccc;padding:4px 8px}
pre{overflow-x:auto;background:#f6f8fa;padding:8px}img{max-width:100%}"""
# Once everything has loaded: what became of each image and how wide the page is, as attributes of <body>, which
# --dump-dom prints.
REPORT = """window.addEventListener('load', () => {
  const images = Array.from(document.images, i => ({src: i.getAttribute('src'), loaded: i.complete,
                                                    width: i.naturalWidth}));
  document.body.setAttribute('data-images', JSON.stringify(images));
  document.body.setAttribute('data-scroll-width', String(document.documentElement.scrollWidth));
  document.body.setAttribute('data-viewport-width', String(window.innerWidth));
  document.body.setAttribute('data-height', String(Math.ceil(document.body.getBoundingClientRect().height)));
});"""


def markdown() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def render(page: Path, out: Path) -> Path:
    """The page as HTML in `out`, its relative links and images resolved against the page's own directory."""
    body = markdown().render(page.read_text())
    out.write_text(f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(page.name)}</title>
<base href="{page.parent.resolve().as_uri()}/"><style>{STYLE}</style></head>
<body>{body}<script>{REPORT}</script></body></html>""")
    return out


@dataclass
class Layout:
    """Each image (src, loaded, natural width), the page's and the window's width, the content's height."""

    images: list[dict]
    scroll_width: int
    viewport_width: int
    height: int


class _Body(HTMLParser):
    def __init__(self):
        super().__init__()
        self.attrs: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        if tag == "body":
            self.attrs = {key: value or "" for key, value in attrs}


def _chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    if not CHROMIUM:
        raise RuntimeError("chromium is missing: .ci/system-deps.sh installs Debian's package")
    # No sandbox: the tests run as root, which Chromium's own sandbox refuses.
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--window-size={WIDTH},{MAX_HEIGHT}", "--virtual-time-budget=3000", *args],
                          capture_output=True, text=True, timeout=timeout, check=True)


def layout(page_html: Path) -> Layout:
    """How the page came out in the browser, once loaded."""
    parser = _Body()
    parser.feed(_chromium("--dump-dom", page_html.resolve().as_uri()).stdout)
    found = parser.attrs
    if "data-images" not in found:
        raise AssertionError(f"{page_html} did not finish loading in the browser")
    return Layout(json.loads(found["data-images"]), int(found["data-scroll-width"]),
                  int(found["data-viewport-width"]), int(found["data-height"]))


def screenshot(page_html: Path, png: Path) -> tuple[int, int]:
    """A screenshot of the page's first MAX_HEIGHT pixels; its width and height as the PNG says."""
    _chromium(f"--screenshot={png.resolve()}", page_html.resolve().as_uri())
    header = png.read_bytes()[:24]
    if header[:8] != b"\x89PNG\r\n\x1a\n":
        raise AssertionError(f"{png} is no PNG")
    return struct.unpack(">II", header[16:24])
