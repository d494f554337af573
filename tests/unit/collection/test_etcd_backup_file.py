"""The backup file: sealed and opened again, refused when damaged, encrypted only under its passphrase."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils.etcd_backup_file import (
    KIND,
    MAGIC,
    BackupFileError,
    seal,
    snapshot_is_whole,
    snapshot_of,
    unseal,
)


def fake_snapshot(size=4096) -> bytes:
    """As etcd streams one: the database (a multiple of its 512-byte pages here) and its SHA-256."""
    db = os.urandom(size)
    return db + hashlib.sha256(db).digest()


def document(snapshot=None) -> dict:
    snapshot = snapshot or fake_snapshot()
    return {"kind": KIND, "virtualCluster": {"name": "alpha", "namespace": "tenants", "spec": {"etcdMembers": 1}},
            "secrets": {"pki": {"ca.key": base64.b64encode(b"TENANT-CA-KEY").decode()}, "etcd-pki": {}},
            "etcd": {"sha256": hashlib.sha256(snapshot).hexdigest(), "snapshot": base64.b64encode(snapshot).decode()}}


def test_a_plain_backup_round_trips():
    doc = document()
    assert unseal(seal(doc)) == doc
    assert snapshot_is_whole(snapshot_of(doc))


def test_an_encrypted_backup_hides_its_secrets_and_needs_the_passphrase():
    doc = document()
    data = seal(doc, "correct horse")
    assert data.startswith(MAGIC)
    assert b"TENANT-CA-KEY" not in data and base64.b64encode(b"TENANT-CA-KEY") not in data
    assert b"alpha" not in data  # nothing of the document is in the clear
    assert unseal(data, "correct horse") == doc
    with pytest.raises(BackupFileError, match="passphrase does not open"):
        unseal(data, "wrong")
    with pytest.raises(BackupFileError, match="encrypted: give its passphrase"):
        unseal(data)
    with pytest.raises(BackupFileError, match="not encrypted"):
        unseal(seal(doc), "correct horse")


def test_two_encryptions_differ():
    doc = document()
    assert seal(doc, "p") != seal(doc, "p")  # fresh salt and nonce each time


@pytest.mark.parametrize("where", ["header", "body", "last"])
def test_a_changed_encrypted_file_is_refused(where):
    data = bytearray(seal(document(), "p"))
    index = {"header": len(MAGIC) + 5, "body": len(data) // 2, "last": len(data) - 1}[where]
    data[index] ^= 0x01
    with pytest.raises(BackupFileError):
        unseal(bytes(data), "p")


def test_a_cut_or_changed_snapshot_is_refused():
    snapshot = fake_snapshot()
    assert not snapshot_is_whole(snapshot[:-1]) and not snapshot_is_whole(snapshot[:1024])
    changed = bytes([snapshot[0] ^ 1]) + snapshot[1:]
    assert not snapshot_is_whole(changed)
    doc = document(snapshot)
    doc["etcd"]["snapshot"] = base64.b64encode(snapshot[:-32] + bytes(32)).decode()
    with pytest.raises(BackupFileError, match="snapshot is damaged"):
        unseal(seal(doc))


@pytest.mark.parametrize("data, message", [
    (b"", "not a kosmos.kubenest etcd backup"),
    (b"PK\x03\x04 zip", "not a kosmos.kubenest etcd backup"),
    (MAGIC + b"not json\n{}", "header is damaged"),
    (MAGIC + b'{"cipher": "rot13"}\n{}', "unknown cipher"),
    (MAGIC + b'{"cipher": "none"}\nnot json', "not JSON"),
    (MAGIC + b'{"cipher": "none"}\n{"kind": "Other"}', "does not hold"),
    (MAGIC + b'{"cipher": "none"}\n{"kind": "%s", "virtualCluster": {"name": "a"}}' % KIND.encode(), "spec"),
])
def test_what_is_not_a_backup_is_refused_with_what_is_wrong(data, message):
    with pytest.raises(BackupFileError, match=message):
        unseal(data)
