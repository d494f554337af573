"""Events a person reads with `kubectl describe`: each phase a VirtualCluster enters, each node it gains or gives
back, and each state a GlobalNode moves to.

A VirtualCluster's events come from where the operator writes its status, compared with the status it read
before. A GlobalNode's states are written by the playbooks (the claim protocol), so its events come from the
watch: the state the operator saw last against the state it sees now. Nothing secret goes into a message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from .errors import summarize
from .extravars import plain
from .kube import GLOBALNODES, GROUP, VERSION
from .shards import cluster_scoped_here

REASONS_AS_WARNINGS = frozenset({"Failed"})


def _names(entries: Iterable[Mapping[str, Any]] | None) -> set[str]:
    return {str(entry["name"]) for entry in entries or () if isinstance(entry, Mapping) and entry.get("name")}


def phase(body: kopf.Body, old: str | None, new: str | None, message: str) -> None:
    """The VirtualCluster went from phase `old` to `new` (nothing when they are the same)."""
    if not new or new == old:
        return
    post = kopf.warn if new in REASONS_AS_WARNINGS else kopf.info
    post(body, reason=new, message=summarize(f"{old or 'new'} -> {new}: {message}" if message else
                                             f"{old or 'new'} -> {new}"))


def nodes(body: kopf.Body, entries: Iterable[Mapping[str, Any]] | None) -> None:
    """Nodes the VirtualCluster gained or gave back, against the status.nodes it had."""
    before, after = _names((body.get("status") or {}).get("nodes")), _names(entries)
    for name in sorted(after - before):
        kopf.info(body, reason="NodePromoted", message=f"{name} joined the virtual cluster")
    for name in sorted(before - after):
        kopf.info(body, reason="NodeReturned", message=f"{name} left the virtual cluster")


def readiness(body: kopf.Body, entries: Iterable[Mapping[str, Any]]) -> None:
    """A promoted node that turned NotReady or Ready again in the tenant, between runs."""
    was = {entry.get("name"): entry.get("ready") for entry in (body.get("status") or {}).get("nodes") or []}
    for entry in entries:
        if entry.get("name") in was and bool(was[entry["name"]]) != bool(entry.get("ready")):
            if entry.get("ready"):
                kopf.info(body, reason="NodeReady", message=f"{entry['name']} is Ready in the virtual cluster")
            else:
                kopf.warn(body, reason="NodeNotReady", message=f"{entry['name']} is not Ready in the virtual cluster")


def globalnode_transition(old: str | None, body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of a GlobalNode that moved from state `old`, or None when it did not."""
    status = plain(body.get("status") or {})
    new = status.get("state")
    if not new or new == old:
        return None
    claimed = next((c for c in status.get("conditions") or [] if c.get("type") == "Claimed"), {})
    owner = f" for {status['virtualCluster']}" if status.get("virtualCluster") else ""
    # The claim protocol moves the Claimed condition with the state; a condition left from another state says
    # nothing about this move.
    current = claimed.get("message") and claimed.get("status") == ("False" if new == "free" else "True")
    why = f" ({claimed.get('reason')}: {claimed['message']})" if current else ""
    return new[:1].upper() + new[1:], summarize(f"{old or 'new'} -> {new}{owner}{why}")


@kopf.on.event(GROUP, VERSION, GLOBALNODES, when=cluster_scoped_here)
def globalnode_moved(type: str | None, body: kopf.Body, memo: kopf.Memo, logger: logging.Logger,
                     **_: Any) -> None:
    # kopf's memo is per object here; the first sight (the operator's start) only records the state.
    state = (body.get("status") or {}).get("state")
    if type is not None and "state" in memo and type != "DELETED":
        moved = globalnode_transition(memo.state, body)
        if moved is not None:
            kopf.info(body, reason=moved[0], message=moved[1])
            logger.debug(f"GlobalNode {moved[1]}")
    memo.state = state
