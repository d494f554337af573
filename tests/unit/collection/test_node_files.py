"""node_files: a node's directories and files in one module run, written only when they differ."""

from __future__ import annotations

import os
import stat

import pytest
from ansible_collections.kosmos.kubenest.plugins.modules.node_files import NodeFilesError, converge, plan


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def request(root):
    return plan([{"path": str(root / "etc/pki"), "mode": "0700"}],
                [{"path": str(root / "etc/pki/ca.crt"), "content": "CA\n", "mode": "0644"},
                 {"path": str(root / "etc/pki/key"), "content": "secret", "mode": "600"}])


def test_a_first_run_creates_everything_and_a_second_changes_nothing(tmp_path):
    dirs, files = request(tmp_path)
    assert converge(dirs, files, check_mode=False) == [str(tmp_path / p) for p in
                                                       ("etc/pki", "etc/pki/ca.crt", "etc/pki/key")]
    assert mode(tmp_path / "etc/pki") == 0o700
    assert (tmp_path / "etc/pki/ca.crt").read_text() == "CA\n" and mode(tmp_path / "etc/pki/ca.crt") == 0o644
    assert mode(tmp_path / "etc/pki/key") == 0o600
    assert converge(dirs, files, check_mode=False) == []


def test_only_what_differs_is_changed_content_or_mode(tmp_path):
    dirs, files = request(tmp_path)
    converge(dirs, files, check_mode=False)
    (tmp_path / "etc/pki/ca.crt").write_text("old")
    os.chmod(tmp_path / "etc/pki/key", 0o644)
    os.chmod(tmp_path / "etc/pki", 0o755)
    assert converge(dirs, files, check_mode=False) == [str(tmp_path / p) for p in
                                                       ("etc/pki", "etc/pki/ca.crt", "etc/pki/key")]
    assert (tmp_path / "etc/pki/ca.crt").read_text() == "CA\n"
    assert mode(tmp_path / "etc/pki/key") == 0o600 and mode(tmp_path / "etc/pki") == 0o700


def test_check_mode_reports_and_writes_nothing(tmp_path):
    dirs, files = request(tmp_path)
    assert len(converge(dirs, files, check_mode=True)) == 3
    assert not (tmp_path / "etc").exists()


@pytest.mark.parametrize(("directories", "files", "message"), [
    ([{"path": "relative", "mode": "0700"}], [], r"directories\[0\]: 'relative' is not an absolute path"),
    ([{"path": "/x", "mode": "rw"}], [], r"directories\[0\]: mode 'rw' is not an octal file mode"),
    ([], [{"path": "/x/f", "content": "", "mode": "99"}], r"files\[0\]: mode '99' is not an octal"),
    ([{"path": "/x", "mode": "0700"}], [{"path": "/x", "content": "", "mode": "0644"}], r"given once: /x"),
])
def test_bad_requests_are_named_before_anything_is_written(directories, files, message):
    with pytest.raises(NodeFilesError, match=message):
        plan(directories, files)


def test_a_missing_directory_or_a_path_of_another_kind_fails(tmp_path):
    with pytest.raises(NodeFilesError, match=r"directory .*/nope does not exist"):
        converge(*plan([], [{"path": str(tmp_path / "nope/f"), "content": "", "mode": "0644"}]), check_mode=False)
    (tmp_path / "d").mkdir()
    with pytest.raises(NodeFilesError, match=r"/d exists and is not a regular file"):
        converge(*plan([], [{"path": str(tmp_path / "d"), "content": "", "mode": "0644"}]), check_mode=False)
    (tmp_path / "f").write_text("")
    with pytest.raises(NodeFilesError, match=r"/f exists and is not a directory"):
        converge(*plan([{"path": str(tmp_path / "f"), "mode": "0700"}], []), check_mode=False)
