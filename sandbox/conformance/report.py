"""What a conformance run found: the JUnit reports of ginkgo, per side, read into counts and failures.

A side is the cluster a run judged ("tenant", "host"); each side may have several reports (the parallel specs,
then the serial ones). A spec that does not pass on the tenant is marked with whether the host fails it too:
that separates what a virtual cluster lacks from what the world around it lacks. Standard library only.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

# ginkgo reports its suite-level nodes as test cases too; only specs count.
SPEC_PREFIX = "[It] "
# The message ginkgo gives a spec its filters left out (one skipped when it ran says why, after a dash).
NOT_SELECTED = "skipped"
FIRST_LINE_MAX = 300


@dataclass(frozen=True)
class Spec:
    name: str
    state: str  # passed, failed, skipped (ginkgo's pending and skipped alike), or the state ginkgo names
    first_error: str = ""
    seconds: float = 0.0


def first_line(text: str) -> str:
    """The line that says what failed. A gomega assertion spreads one over several ("Expected", the value, the
    matcher such as "to contain substring", what it wanted): those become one line, the value's first line
    standing for it."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0] == "Expected" and len(lines) > 1:
        matcher = next((i for i, line in enumerate(lines) if i > 1 and line.startswith(("to ", "not to "))), None)
        said = f"Expected {lines[1]}"
        if matcher is not None:
            said += (" … " if matcher > 2 else " ") + " ".join(lines[matcher:matcher + 2])
        return said[:FIRST_LINE_MAX]
    return lines[0][:FIRST_LINE_MAX]


def read_junit(path: Path) -> list[Spec]:
    """The specs of one ginkgo JUnit report."""
    specs = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if not name.startswith(SPEC_PREFIX):
            continue
        failure = case.find("failure")
        error = case.find("error")
        if failure is not None or error is not None:
            node = failure if failure is not None else error
            state = "failed"
            message = first_line(node.get("message", "")) or first_line(node.text or "")
        elif case.find("skipped") is not None or case.get("status") in ("skipped", "pending"):
            skipped = case.find("skipped")
            reason = skipped.get("message", "") if skipped is not None else ""
            if reason == NOT_SELECTED:
                continue
            state, message = "skipped", first_line(reason)
        else:
            state, message = case.get("status") or "passed", ""
        specs.append(Spec(name[len(SPEC_PREFIX):], state, message, float(case.get("time") or 0)))
    return specs


def read_side(paths: list[Path]) -> dict[str, Spec]:
    """Every spec of a side's reports by name (each phase's report holds the specs it selected)."""
    return {spec.name: spec for path in paths for spec in read_junit(path)}


def counts(specs: dict[str, Spec]) -> dict[str, int]:
    result = {"passed": 0, "failed": 0, "skipped": 0}
    for spec in specs.values():
        result[spec.state if spec.state in result else "failed"] += 1
    return result


def summarize(sides: dict[str, dict[str, Spec]], baseline: str = "host", judged: str = "tenant") -> dict:
    """Counts per side and each spec that did not pass on `judged`, with whether `baseline` fails it too."""
    judged_specs, base_specs = sides.get(judged, {}), sides.get(baseline, {})
    not_passing = []
    for name, spec in sorted(judged_specs.items()):
        if spec.state in ("passed", "skipped"):
            continue
        base = base_specs.get(name)
        not_passing.append({"spec": name, "state": spec.state, "first_error": spec.first_error,
                            baseline: base.state if base else "not run",
                            f"{baseline}_first_error": base.first_error if base else ""})
    only_baseline = sorted(name for name, spec in base_specs.items()
                           if spec.state == "failed" and judged_specs.get(name, Spec(name, "")).state == "passed")
    return {"counts": {side: counts(specs) for side, specs in sides.items()},
            "not_passing": not_passing, f"failed_only_on_{baseline}": only_baseline}


def markdown(summary: dict, title: str, baseline: str = "host", judged: str = "tenant") -> str:
    sides = [side for side in (judged, baseline) if side in summary["counts"]]
    lines = [f"# {title}", "", "| | " + " | ".join(sides) + " |", "|---|" + "---|" * len(sides)]
    for state in ("passed", "failed", "skipped"):
        lines.append(f"| {state} | " + " | ".join(str(summary["counts"][side][state]) for side in sides) + " |")
    lines.append("")
    if judged not in summary["counts"]:
        lines.append(f"The {judged} was not run.")
    elif summary["not_passing"]:
        lines += [f"## Not passing on the {judged}", ""]
        for item in summary["not_passing"]:
            also = item[baseline]
            lines.append(f"- `{item['spec']}` — {item['first_error'] or item['state']} ({baseline}: {also})")
    else:
        lines.append(f"Every spec run on the {judged} passed.")
    only = summary.get(f"failed_only_on_{baseline}") or []
    if only:
        lines += ["", f"## Failing on the {baseline} only", ""] + [f"- `{name}`" for name in only]
    return "\n".join(lines) + "\n"


def write(out_dir: Path, sides: dict[str, list[Path]], title: str) -> dict:
    summary = summarize({side: read_side(paths) for side, paths in sides.items()})
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    (out_dir / "summary.md").write_text(markdown(summary, title))
    return summary
