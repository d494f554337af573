"""A VirtualCluster created by a restore (playbooks/etcd_restore.yml) says so in one annotation.

`pending` while the restore still writes the new cluster's PKI and snapshot Secrets: no run may start then,
or it would issue a fresh PKI. Then `<sha256>/<chunks>`: the etcd role starts each member from that snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .settings import ANNOTATION_PREFIX

RESTORE_ANNOTATION = f"{ANNOTATION_PREFIX}/etcd-restore"
PENDING = "pending"
_HANDED_OVER = re.compile(r"([0-9a-f]{64})/([1-9][0-9]{0,2})")
MAX_CHUNKS = 256  # as the etcd role allows (plugins/plugin_utils/hosted_etcd.py)


class BadRestore(ValueError):
    """The annotation is neither pending nor a snapshot digest and chunk count."""


def restore_of(metadata: Mapping[str, Any]) -> str | dict[str, Any] | None:
    """None (not restored), PENDING, or {'sha256': ..., 'chunks': ...} for the etcd role."""
    value = (metadata.get("annotations") or {}).get(RESTORE_ANNOTATION)
    if value is None:
        return None
    if value == PENDING:
        return PENDING
    match = _HANDED_OVER.fullmatch(str(value))
    if match is None or int(match.group(2)) > MAX_CHUNKS:
        raise BadRestore(f"annotation {RESTORE_ANNOTATION} must be '{PENDING}' or '<sha256>/<chunks>', "
                         f"got {str(value)[:80]!r}")
    return {"sha256": match.group(1), "chunks": int(match.group(2))}
