"""node_files_read: several files of a node in one module run, missing ones named, anything odd refused."""

from __future__ import annotations

import base64

import pytest
from ansible_collections.kosmos.kubenest.plugins.modules.node_files_read import (
    NodeFilesReadError,
    check_paths,
    read_all,
)


def test_files_found_are_returned_by_path_and_missing_ones_listed_in_order(tmp_path):
    (tmp_path / "a.conf").write_bytes(b"kind: A\n")
    (tmp_path / "key").write_bytes(b"\x00\xffsecret")
    paths = [str(tmp_path / "gone"), str(tmp_path / "a.conf"), str(tmp_path / "also-gone"), str(tmp_path / "key")]
    contents, missing = read_all(check_paths(paths), 1024)
    assert {p: base64.b64decode(c) for p, c in contents.items()} == {
        str(tmp_path / "a.conf"): b"kind: A\n", str(tmp_path / "key"): b"\x00\xffsecret"}
    assert missing == [str(tmp_path / "gone"), str(tmp_path / "also-gone")]


def test_an_empty_file_is_found_not_missing(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert read_all([str(tmp_path / "empty")], 0) == ({str(tmp_path / "empty"): ""}, [])


def test_a_file_over_the_limit_is_refused(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(NodeFilesReadError, match=r"big holds 11 bytes, more than max_bytes \(10\)"):
        read_all([str(tmp_path / "big")], 10)


def test_a_directory_is_not_a_file(tmp_path):
    with pytest.raises(NodeFilesReadError, match="is not a regular file"):
        read_all([str(tmp_path)], 1024)


@pytest.mark.parametrize(("paths", "message"), [
    (["relative/file"], r"paths\[0\]: 'relative/file' is not an absolute path"),
    (["/etc/a", "/etc/a"], "each path may be given once: /etc/a"),
])
def test_bad_requests_are_refused(paths, message):
    with pytest.raises(NodeFilesReadError, match=message):
        check_paths(paths)
