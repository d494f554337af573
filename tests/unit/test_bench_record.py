"""make bench keeps its figures as data: one file a day, a section per benchmark, the commit beside them."""

from __future__ import annotations

import datetime as dt
import json

from bench.record import commit, record

DAY = dt.datetime(2026, 12, 5, 9, 30, tzinfo=dt.UTC)


def test_each_benchmark_is_a_section_of_the_days_file_with_its_commit(tmp_path):
    record("virtualclusters", {"ready_s": 31.9, "raw_s": 5.7}, out_dir=tmp_path, now=DAY)
    path = record("promotion", {"promotion_s": [4.1, 4.3], "at": DAY}, out_dir=tmp_path, now=DAY)
    assert path == tmp_path / "2026-12-05.json"
    data = json.loads(path.read_text())
    assert set(data["benchmarks"]) == {"virtualclusters", "promotion"}
    assert data["benchmarks"]["virtualclusters"]["figures"] == {"ready_s": 31.9, "raw_s": 5.7}
    assert data["benchmarks"]["promotion"]["figures"]["at"] == str(DAY)  # anything else as text
    assert data["benchmarks"]["promotion"]["commit"] == commit() != "unknown"


def test_a_second_run_the_same_day_replaces_its_own_section_only(tmp_path):
    record("addons", {"ready_s": 10.0}, out_dir=tmp_path, now=DAY)
    record("virtualclusters", {"ready_s": 31.9}, out_dir=tmp_path, now=DAY)
    record("addons", {"ready_s": 9.0}, out_dir=tmp_path, now=DAY)
    data = json.loads((tmp_path / "2026-12-05.json").read_text())
    assert data["benchmarks"]["addons"]["figures"] == {"ready_s": 9.0}
    assert data["benchmarks"]["virtualclusters"]["figures"] == {"ready_s": 31.9}
