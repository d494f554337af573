"""The agents' audit lines kept by runs go to the operator's log, once, and the directory is the operator's own."""

from __future__ import annotations

import json
import logging

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.audit_trail import AuditRecord

from kubenest_operator.agent_audit import AUDIT_DIR_VAR, AgentAudit


def _answer(boot: str, first_seq: int, count: int, **described) -> tuple[dict, bytes]:
    numbers = range(first_seq, first_seq + count)
    lines = [json.dumps({"ts": 1.0, "event": "exec", "seq": n, "cmd": "true"}) for n in numbers]
    header = {"boot": boot, "first": 1, "count": count, "last": first_seq + count - 1, "more": False, "missed": 0,
              "restarted": False, **described}
    return header, "".join(line + "\n" for line in lines).encode()


def test_runs_get_the_operators_directory_unless_the_site_names_one(tmp_path):
    audit = AgentAudit(tmp_path / "audit")
    assert audit.site_vars({"x": 1}) == {"x": 1, AUDIT_DIR_VAR: str(tmp_path / "audit")}
    assert audit.site_vars({AUDIT_DIR_VAR: "/site/own"})[AUDIT_DIR_VAR] == "/site/own"


def test_kept_lines_are_logged_once_as_json_with_their_node(tmp_path, caplog):
    audit = AgentAudit(tmp_path / "audit")
    assert audit.ship() == 0  # no directory yet: nothing, no error
    record = AuditRecord(tmp_path / "audit", "kn-w1")
    record.append((None, 0), *_answer("b1", 1, 3))
    with caplog.at_level(logging.INFO, logger="kubenest.agent-audit"):
        assert audit.ship() == 3
        assert audit.ship() == 0
    shipped = [json.loads(r.getMessage()) for r in caplog.records if r.name == "kubenest.agent-audit"]
    assert [(e["node"], e["seq"], e["boot"]) for e in shipped] == [("kn-w1", 1, "b1"), ("kn-w1", 2, "b1"),
                                                                   ("kn-w1", 3, "b1")]
    assert record.cursor() == ("b1", 3)  # draining keeps the cursor: the next run asks from line 3


def test_two_helpers_for_one_node_keep_each_line_once_and_gaps_are_said(tmp_path):
    record = AuditRecord(tmp_path, "kn-w1")
    record.append((None, 0), *_answer("b1", 1, 3))
    # A second helper asked with the same old cursor before the first one wrote: only its newer lines count.
    record.append((None, 0), *_answer("b1", 1, 5))
    # The agent restarted, and dropped lines: one gap line each time, then its lines.
    record.append(("b1", 5), *_answer("b2", 4, 1, restarted=True, missed=3, first=4))
    lines = [json.loads(raw) for raw in (tmp_path / "kn-w1.jsonl").read_text().splitlines()]
    assert [(e["event"], e.get("seq"), e["boot"]) for e in lines] == [
        ("exec", 1, "b1"), ("exec", 2, "b1"), ("exec", 3, "b1"), ("exec", 4, "b1"), ("exec", 5, "b1"),
        ("audit_gap", None, "b2"), ("exec", 4, "b2")]
    assert lines[5]["missed"] == 3 and lines[5]["restarted"] is True
    assert record.cursor() == ("b2", 4)
    assert (tmp_path / "kn-w1.cursor").stat().st_mode & 0o777 == 0o600


def test_a_node_name_cannot_leave_the_directory(tmp_path):
    record = AuditRecord(tmp_path / "audit", "../../etc/passwd")
    record.append((None, 0), *_answer("b1", 1, 1))
    assert [p.name for p in (tmp_path / "audit").glob("*.jsonl")] == [".._.._etc_passwd.jsonl"]


def test_a_line_cannot_claim_another_node_or_start(tmp_path):
    """An agent replaced by a tenant's root writes what it likes; the record names the node the helper dialled."""
    record = AuditRecord(tmp_path, "kn-w1")
    forged = json.dumps({"event": "exec", "seq": 1, "node": "kn-cp1", "boot": "forged"}) + "\n"
    record.append((None, 0), {"boot": "b1", "first": 1, "count": 1, "last": 1}, forged.encode())
    [line] = [json.loads(raw) for raw in (tmp_path / "kn-w1.jsonl").read_text().splitlines()]
    assert (line["node"], line["boot"]) == ("kn-w1", "b1")
