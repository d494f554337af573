"""Every figure `make bench` prints, also kept as data: build/bench/<date>.json, with the commit it measured, so
two runs compare. Each benchmark adds its own section; a second run on the same day replaces that section."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def commit(repo: Path = REPO) -> str:
    """The commit measured, with `-dirty` when the tree has changes; `unknown` outside a checkout."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def record(bench: str, figures: Mapping[str, Any], out_dir: Path | None = None,
           now: dt.datetime | None = None) -> Path:
    """Write `figures` as section `bench` of today's file (UTC) and return its path."""
    now = now or dt.datetime.now(dt.UTC)
    out_dir = out_dir or Path(os.environ.get("KUBENEST_BENCH_DIR") or REPO / "build" / "bench")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{now:%Y-%m-%d}.json"
    data = json.loads(path.read_text()) if path.is_file() else {"benchmarks": {}}
    data["benchmarks"][bench] = {"commit": commit(), "finished": now.isoformat(timespec="seconds"),
                                 "figures": json.loads(json.dumps(figures, default=str))}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path
