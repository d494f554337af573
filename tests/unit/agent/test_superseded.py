"""The agent's marks of superseded client certificates: the rules, and the file that keeps them."""

from __future__ import annotations

import json
import logging

from kubenest_agent.superseded import FILE_NAME, ClientCertificate, SupersededClients


def test_a_mark_refuses_only_older_certificates_of_its_own_name(tmp_path):
    marks = SupersededClients(tmp_path)
    assert marks.supersede(ClientCertificate("ctl", 2000), 1500) == (True, 1500)
    assert marks.refuses(ClientCertificate("ctl", 1499))
    assert not marks.refuses(ClientCertificate("ctl", 1500))
    assert not marks.refuses(ClientCertificate("other", 1)) and not marks.refuses(None)


def test_a_certificate_cannot_move_the_mark_past_itself_or_back(tmp_path):
    marks = SupersededClients(tmp_path)
    assert marks.supersede(ClientCertificate("ctl", 1000), 9999) == (True, 1000)
    assert marks.supersede(ClientCertificate("ctl", 2000), 500) == (False, 1000)
    assert marks.supersede(ClientCertificate("ctl", 2000), 1000) == (False, 1000)
    assert marks.supersede(ClientCertificate("ctl", 2000), 1800) == (True, 1800)


def test_marks_survive_a_restart_and_a_damaged_file_refuses_nobody(tmp_path, caplog):
    SupersededClients(tmp_path).supersede(ClientCertificate("ctl", 2000), 1800)
    assert json.loads((tmp_path / FILE_NAME).read_text()) == {"issued_before": {"ctl": 1800}}
    assert (tmp_path / FILE_NAME).stat().st_mode & 0o777 == 0o600
    assert SupersededClients(tmp_path).refuses(ClientCertificate("ctl", 1799))

    (tmp_path / FILE_NAME).write_text('{"issued_before": {"ctl": 18')
    with caplog.at_level(logging.ERROR):
        assert not SupersededClients(tmp_path).refuses(ClientCertificate("ctl", 1))
    assert FILE_NAME in caplog.text

    (tmp_path / FILE_NAME).write_text(json.dumps({"issued_before": {"a": True, "b": "9", "c": 5}}))
    assert SupersededClients(tmp_path).before == {"c": 5}
