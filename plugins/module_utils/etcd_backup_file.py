# Copyright: kosmos.kubenest maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The file a virtual cluster's backup lives in, and its encryption.

A backup holds the tenant's CAs and every tenant Secret (in the etcd snapshot): it is written with mode 0600,
and encrypted (AES-256-GCM under a scrypt-derived key) when a passphrase is given. Layout: one line naming
the format, one JSON line saying how the rest is sealed, then the body: the backup document as JSON, in the
clear or as ciphertext.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os

try:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
except ImportError:
    HAS_CRYPTOGRAPHY = False
else:
    HAS_CRYPTOGRAPHY = True

# The VirtualCluster API and how a restore hands a snapshot to the operator and the etcd role.
VC_GROUP = "kosmos.io"
VC_VERSION = "v1alpha1"
VC_PLURAL = "virtualclusters"
RESTORE_ANNOTATION = "kubenest.kosmos.io/etcd-restore"
# A snapshot reaches a restoring member as Secrets of at most CHUNK_BYTES each (an object stays well under the
# API's 1 MiB limit); MAX_CHUNKS of them bound what a restore may carry.
CHUNK_BYTES = 512 * 1024
MAX_CHUNKS = 256

MAGIC = b"kosmos.kubenest/etcd-backup/v1\n"
KIND = "VirtualClusterBackup"
# scrypt cost: about 0.1 s and 32 MiB per derivation; the parameters are stored, so they may grow later.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2 ** 15, 8, 1
SNAPSHOT_HASH_BYTES = 32


class BackupFileError(Exception):
    """The file is not a backup, is damaged, or cannot be opened with the passphrase given."""


def restore_chunk_names(vc_name, chunks):
    """The Secrets that carry a snapshot into a restoring etcd, in order."""
    return ["%s-etcd-restore-%03d" % (vc_name, i) for i in range(int(chunks))]


def snapshot_is_whole(snapshot):
    """etcd appends the SHA-256 of the database to every snapshot it streams: a cut stream fails this."""
    body, trailer = snapshot[:-SNAPSHOT_HASH_BYTES], snapshot[-SNAPSHOT_HASH_BYTES:]
    return (len(snapshot) > SNAPSHOT_HASH_BYTES and len(snapshot) % 512 == SNAPSHOT_HASH_BYTES
            and hashlib.sha256(body).digest() == trailer)


def _key(passphrase, salt, n, r, p):
    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode("utf-8"))


def seal(document, passphrase=None):
    """The bytes of a backup file holding `document` (a JSON-serialisable dict)."""
    body = json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8")
    if not passphrase:
        return MAGIC + json.dumps({"cipher": "none"}).encode() + b"\n" + body
    if not HAS_CRYPTOGRAPHY:
        raise BackupFileError("encrypting a backup needs the Python library cryptography")
    salt, nonce = os.urandom(16), os.urandom(12)
    header = {"cipher": "AES-256-GCM", "kdf": "scrypt", "n": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P,
              "salt": base64.b64encode(salt).decode(), "nonce": base64.b64encode(nonce).decode()}
    header_line = json.dumps(header, sort_keys=True).encode()
    # The header is authenticated too: changing the parameters breaks the seal rather than the key.
    sealed = AESGCM(_key(passphrase, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)).encrypt(nonce, body, MAGIC + header_line)
    return MAGIC + header_line + b"\n" + sealed


def unseal(data, passphrase=None):
    """The document of a backup file's bytes."""
    if not data.startswith(MAGIC):
        raise BackupFileError("not a kosmos.kubenest etcd backup (no %r header)" % MAGIC.strip().decode())
    header_line, sep, body = data[len(MAGIC):].partition(b"\n")
    try:
        header = json.loads(header_line) if sep else None
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise BackupFileError("the backup's header is damaged")
    cipher = header.get("cipher")
    if cipher == "none":
        if passphrase:
            raise BackupFileError("the backup is not encrypted, but a passphrase was given")
    elif cipher == "AES-256-GCM":
        if not passphrase:
            raise BackupFileError("the backup is encrypted: give its passphrase")
        if not HAS_CRYPTOGRAPHY:
            raise BackupFileError("decrypting a backup needs the Python library cryptography")
        try:
            salt, nonce = base64.b64decode(header["salt"]), base64.b64decode(header["nonce"])
            key = _key(passphrase, salt, int(header["n"]), int(header["r"]), int(header["p"]))
            body = AESGCM(key).decrypt(nonce, body, MAGIC + header_line)
        except InvalidTag:
            raise BackupFileError("the passphrase does not open this backup, or the file was changed") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise BackupFileError("the backup's encryption header is damaged: %s" % exc) from None
    else:
        raise BackupFileError("the backup uses an unknown cipher %r" % (cipher,))
    try:
        document = json.loads(body)
    except ValueError:
        raise BackupFileError("the backup's body is not JSON: the file is damaged") from None
    return check_document(document)


def check_document(document):
    """The document, when it has everything a restore needs; else BackupFileError naming what is wrong."""
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise BackupFileError("the backup does not hold a %s" % KIND)
    vc = document.get("virtualCluster")
    if not isinstance(vc, dict) or not isinstance(vc.get("spec"), dict) or not vc.get("name"):
        raise BackupFileError("the backup names no virtual cluster spec")
    secrets = document.get("secrets")
    if not isinstance(secrets, dict) or not all(isinstance(v, dict) for v in secrets.values()):
        raise BackupFileError("the backup's secrets are damaged")
    etcd = document.get("etcd")
    if not isinstance(etcd, dict):
        raise BackupFileError("the backup holds no etcd snapshot")
    try:
        snapshot = base64.b64decode(etcd.get("snapshot") or "", validate=True)
    except (TypeError, ValueError):
        raise BackupFileError("the backup's etcd snapshot is not base64") from None
    if hashlib.sha256(snapshot).hexdigest() != etcd.get("sha256") or not snapshot_is_whole(snapshot):
        raise BackupFileError("the backup's etcd snapshot is damaged (its digest does not match)")
    return document


def snapshot_of(document):
    return base64.b64decode(document["etcd"]["snapshot"])
