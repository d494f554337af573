"""The controller's record of an agent's audit lines: each line once, gaps said, whichever answers arrive."""

from __future__ import annotations

import json

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.audit_trail import AuditRecord, drain


def _answer(boot: str, seqs: range, first: int | None = None, **flags) -> tuple[dict, bytes]:
    """What an agent of start `boot` answers, holding the lines `seqs` after the cursor it was asked with."""
    lines = [{"ts": 1.0, "event": "exec", "seq": n} for n in seqs]
    described = {"boot": boot, "first": first if first is not None else (seqs.start if seqs else 1),
                 "count": len(lines), "last": lines[-1]["seq"] if lines else 0, "more": False,
                 "missed": flags.get("missed", 0), "restarted": flags.get("restarted", False)}
    return described, b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _kept(directory) -> list[tuple]:
    return [(e["boot"], e.get("seq"), e["event"]) for e in drain(directory)]


def test_answers_of_two_starts_alternating_keep_every_line_once(tmp_path):
    record = AuditRecord(tmp_path, "kn-w1")
    record.append(record.cursor(), *_answer("one", range(1, 4)))
    # Another start answers (a second agent process behind the same name): all of its lines, and a gap line,
    # since it restarted as far as the cursor knows.
    record.append(record.cursor(), *_answer("two", range(1, 3), restarted=True))
    # The first start again, asked with the second's cursor: it answers everything it holds, as a restart.
    record.append(record.cursor(), *_answer("one", range(1, 6), first=1, restarted=True))
    record.append(record.cursor(), *_answer("two", range(1, 4), first=1, restarted=True))
    kept = _kept(tmp_path)
    lines = [(boot, seq) for boot, seq, event in kept if event == "exec"]
    assert len(lines) == len(set(lines))
    assert sorted(lines) == [("one", n) for n in range(1, 6)] + [("two", n) for n in range(1, 4)]
    assert [(boot, event) for boot, _seq, event in kept if event == "audit_gap"] == [("two", "audit_gap")]


def test_lines_a_known_start_dropped_since_they_were_last_taken_are_a_gap(tmp_path):
    record = AuditRecord(tmp_path, "kn-w1")
    record.append(record.cursor(), *_answer("one", range(1, 4)))
    record.append(record.cursor(), *_answer("two", range(1, 2), restarted=True))
    # The first start again, having dropped lines 4 to 9 from memory before anyone took them.
    record.append(record.cursor(), *_answer("one", range(10, 12), first=10, restarted=True))
    gaps = [e for e in drain(tmp_path) if e["event"] == "audit_gap"]
    assert [(g["boot"], g["missed"], g["restarted"]) for g in gaps] == [("two", 0, True), ("one", 6, False)]


def test_a_cursor_written_before_starts_were_remembered_still_counts(tmp_path):
    record = AuditRecord(tmp_path, "kn-w1")
    record.cursor_path.parent.mkdir(parents=True, exist_ok=True)
    record.cursor_path.write_text(json.dumps({"boot": "one", "last": 3}))
    assert record.cursor() == ("one", 3)
    record.append(("two", 1), *_answer("one", range(1, 6), first=1, restarted=True))
    assert [(b, s) for b, s, e in _kept(tmp_path)] == [("one", 4), ("one", 5)]
    assert record.cursor() == ("one", 5)


def test_the_cursor_remembers_a_bounded_number_of_starts(tmp_path):
    record = AuditRecord(tmp_path, "kn-w1")
    for n in range(40):
        record.append(record.cursor(), *_answer(f"start-{n}", range(1, 2), restarted=n > 0))
    assert len(json.loads(record.cursor_path.read_text())["seen"]) == 16
