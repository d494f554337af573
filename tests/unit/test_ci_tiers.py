""".ci/tiers.py: the time table at the end of make test and its warnings."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "tiers.py"


@pytest.fixture(scope="module")
def tiers():
    spec = importlib.util.spec_from_file_location("ci_tiers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shares_add_up_to_the_budget(tiers):
    assert sum(tiers.SHARES.values()) == tiers.BUDGET_MINUTES == 60


def test_a_run_is_logged_with_its_status(tiers, tmp_path, monkeypatch):
    log = tmp_path / "tiers.jsonl"
    monkeypatch.setenv("KUBENEST_TIERS", str(log))
    assert tiers.main(["run", "unit", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert tiers.main(["run", "lint", sys.executable, "-c", "pass"]) == 0
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["tier"], r["status"]) for r in rows] == [("unit", 3), ("lint", 0)]
    assert all(r["end"] >= r["start"] for r in rows)


def test_a_command_that_is_not_there_is_a_failed_tier(tiers, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KUBENEST_TIERS", str(tmp_path / "tiers.jsonl"))
    assert tiers.main(["run", "lint", "--", str(tmp_path / "missing")]) == 127
    assert "tier lint: cannot run" in capsys.readouterr().err


def test_the_table_lists_tiers_in_order_and_warns_past_a_share(tiers):
    rows = [{"tier": "unit", "start": 100.0, "end": 400.0, "status": 0},          # 5 min against 1
            {"tier": "install", "start": 0.0, "end": 100.0, "status": 0},
            {"tier": "build:k8s", "start": 100.0, "end": 900.0, "status": 0},
            {"tier": "e2e", "start": 900.0, "end": 1000.0, "status": 1}]
    lines, warnings = tiers.table(rows)
    assert [line.split()[0] for line in lines[1:]] == ["install", "unit", "build:k8s", "e2e", "total"]
    assert "1:40" in lines[1] and "bg" in lines[3] and "exit 1" in lines[4]
    assert warnings == ["warning: tier unit took 5:00, past its share of 1 of the 60 minutes (.ci/tiers.py SHARES)"]


def test_a_run_past_the_budget_is_warned_about_not_failed(tiers, tmp_path, monkeypatch, capsys):
    log = tmp_path / "tiers.jsonl"
    log.write_text(json.dumps({"tier": "e2e", "start": 0.0, "end": 3700.0, "status": 0}) + "\nnot json\n")
    monkeypatch.setenv("KUBENEST_TIERS", str(log))
    lines, warnings = tiers.table(tiers.load(log))
    assert any("make test took 61:40, past its budget of 60 minutes" in w for w in warnings)
    assert tiers.main(["report"]) == 0
    out = capsys.readouterr().out
    assert "time by tier" in out and "warning: tier e2e took 61:40" in out


def test_nothing_logged_prints_nothing(tiers, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KUBENEST_TIERS", str(tmp_path / "none.jsonl"))
    assert tiers.main(["report"]) == 0
    assert capsys.readouterr().out == ""
