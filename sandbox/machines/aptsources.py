"""Find the Debian mirror the host itself uses, so nothing in the repository names a mirror host."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import SandboxError

APT_DIR = Path("/etc/apt")


@dataclass(frozen=True)
class AptSource:
    uri: str
    suite: str
    components: tuple[str, ...]
    signed_by: str | None = None


def _one_line_entries(text: str):
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        parts = line.split()[1:]
        options = {}
        if parts and parts[0].startswith("["):
            opts = []
            while parts:
                opts.append(parts.pop(0))
                if opts[-1].endswith("]"):
                    break
            for opt in " ".join(opts).strip("[]").split():
                key, _eq, value = opt.partition("=")
                options[key] = value
        if len(parts) >= 2:
            yield AptSource(parts[0], parts[1], tuple(parts[2:]), options.get("signed-by"))


def _deb822_entries(text: str):
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0].isspace() and key:
                fields[key] += " " + line.strip()
                continue
            key, _colon, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                yield AptSource(uri, suite, tuple(fields.get("components", "").split()), fields.get("signed-by"))


def host_sources(apt_dir: Path = APT_DIR) -> list[AptSource]:
    found: list[AptSource] = []
    main = apt_dir / "sources.list"
    if main.is_file():
        found += _one_line_entries(main.read_text(errors="replace"))
    parts = apt_dir / "sources.list.d"
    if parts.is_dir():
        for path in sorted(parts.iterdir()):
            if path.suffix == ".list":
                found += _one_line_entries(path.read_text(errors="replace"))
            elif path.suffix == ".sources":
                found += _deb822_entries(path.read_text(errors="replace"))
    return found


def mirror_for(suite: str, apt_dir: Path = APT_DIR) -> AptSource:
    """The host's source for `suite` with component main; KUBENEST_DEBIAN_MIRROR overrides it."""
    override = os.environ.get("KUBENEST_DEBIAN_MIRROR")
    if override:
        return AptSource(override, suite, ("main",))
    for source in host_sources(apt_dir):
        if source.suite == suite and "main" in source.components and source.uri.startswith(("http:", "https:")):
            return source
    raise SandboxError(f"no apt source for {suite!r} (component main) in {apt_dir}/sources.list*; "
                       "set KUBENEST_DEBIAN_MIRROR to a Debian mirror URL")
