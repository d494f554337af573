"""Wall time of each tier of `make test`, and a warning when a tier outgrows its share of CI's budget.

`tiers.py run NAME -- COMMAND...` runs COMMAND and appends one JSON line to the log (`$KUBENEST_TIERS`, default
build/tiers.jsonl): the tier's name, start, end and exit status. The background builds log their steps the same
way, so the table shows what ran beside what. `tiers.py report` prints the table; it warns, never fails, when a
tier took more than its share, so a change that costs CI minutes shows up in the run that makes it.

Standard library only: the install tier is timed before the virtualenv exists.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# CI stops a run at 90 minutes; `make test` on a machine with nothing cached is to stay within 60. These are the
# minutes each foreground tier may take of those 60 (they add up to 60). Background builds have no share of their
# own: what they cost shows as the foreground's wait for them.
BUDGET_MINUTES = 60
SHARES = {
    "install": 2,
    "lint": 4,
    "unit": 1,
    "integration:agent": 3,
    "wait:k8s": 4,
    "integration": 8,
    "wait:builds": 5,
    "integration:images": 2,
    "e2e": 31,  # with the kubeadm host's tests and the conformance suite's smoke subset (about 4 min of it)
}
DEFAULT_LOG = "build/tiers.jsonl"


def log_path() -> Path:
    return Path(os.environ.get("KUBENEST_TIERS", DEFAULT_LOG))


def record(name: str, start: float, end: float, status: int, path: Path | None = None) -> None:
    path = path or log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as log:  # one short line per write: the background appends too
        log.write(json.dumps({"tier": name, "start": start, "end": end, "status": status}) + "\n")


def run(name: str, argv: list[str]) -> int:
    start = time.time()
    try:
        status = subprocess.call(argv)
    except OSError as exc:
        print(f"error: tier {name}: cannot run {argv[0]}: {exc}", file=sys.stderr)
        status = 127
    record(name, start, time.time(), status)
    return status


def load(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a killed writer
    return rows


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def table(rows: list[dict], now: float | None = None) -> tuple[list[str], list[str]]:
    """(lines of the table, warnings): each tier with its start offset, duration and share of the budget."""
    if not rows:
        return [], []
    origin = min(r["start"] for r in rows)
    lines = [f"{'tier':<24} {'start':>6} {'took':>6} {'share':>6}  status"]
    warnings = []
    for row in sorted(rows, key=lambda r: r["start"]):
        took = row["end"] - row["start"]
        share = SHARES.get(row["tier"])
        share_text = f"{share}m" if share is not None else ("bg" if row["tier"].startswith("build:") else "-")
        status = "ok" if row["status"] == 0 else f"exit {row['status']}"
        lines.append(f"{row['tier']:<24} {_minutes(row['start'] - origin):>6} {_minutes(took):>6} "
                     f"{share_text:>6}  {status}")
        if share is not None and took > share * 60:
            warnings.append(f"warning: tier {row['tier']} took {_minutes(took)}, past its share of "
                            f"{share} of the {BUDGET_MINUTES} minutes (.ci/tiers.py SHARES)")
    end = max(r["end"] for r in rows) if now is None else now
    lines.append(f"{'total':<24} {'':>6} {_minutes(end - origin):>6} {BUDGET_MINUTES:>5}m")
    if end - origin > BUDGET_MINUTES * 60:
        warnings.append(f"warning: make test took {_minutes(end - origin)}, past its budget of "
                        f"{BUDGET_MINUTES} minutes (CI stops at 90)")
    return lines, warnings


def report(path: Path) -> int:
    lines, warnings = table(load(path), now=time.time())
    if lines:
        print("\nmake test, time by tier (min:s; share of the budget; bg = background build):")
        print("\n".join(lines))
    for warning in warnings:
        print(warning)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run a command as a named tier")
    run_p.add_argument("name")
    run_p.add_argument("argv", nargs=argparse.REMAINDER)
    rec_p = sub.add_parser("record", help="log a tier that ran elsewhere, from START (epoch seconds) to now")
    rec_p.add_argument("name")
    rec_p.add_argument("start", type=float)
    rec_p.add_argument("status", type=int)
    sub.add_parser("report", help="print the time table of the log")
    args = parser.parse_args(argv)
    if args.command == "run":
        command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not command:
            parser.error("run: a command is needed after the tier's name")
        return run(args.name, command)
    if args.command == "record":
        record(args.name, args.start, time.time(), args.status)
        return 0
    return report(log_path())


if __name__ == "__main__":
    sys.exit(main())
