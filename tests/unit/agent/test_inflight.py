from kubenest_agent.inflight import InflightJournal


def test_recover_removes_recorded_partial_files(tmp_path):
    journal = InflightJournal(tmp_path / "state")
    partial = tmp_path / ".file.kubenest-part"
    partial.write_bytes(b"half")
    journal.add(str(partial))
    assert InflightJournal(tmp_path / "state").recover() == 1
    assert not partial.exists()
    assert list((tmp_path / "state" / "inflight").iterdir()) == []


def test_completed_uploads_are_forgotten(tmp_path):
    journal = InflightJournal(tmp_path / "state")
    kept = tmp_path / "kept"
    kept.write_bytes(b"x")
    journal.add(str(kept))
    journal.remove(str(kept))
    assert journal.recover() == 0
    assert kept.exists()
