# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Waiting for the operator to report a VirtualCluster Ready: what its status says, as a verdict and a line.

Pure: the action plugin reads the object, these judge and describe it. Only the status is looked at and
returned; the spec may carry the tenant's kubeconfig (`--spec-kubeconfig`).
"""

from __future__ import annotations

READY, FAILED, WAITING = "ready", "failed", "waiting"


def _status(vc):
    return (vc or {}).get("status") or {}


def ready_condition(vc):
    for cond in _status(vc).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond
    return {}


def verdict(vc):
    """READY when the operator took up the current spec (observedGeneration) and says Ready, FAILED when it gave
    up on it, WAITING otherwise."""
    status = _status(vc)
    if status.get("phase") == "Failed":
        return FAILED
    generation = ((vc or {}).get("metadata") or {}).get("generation")
    if status.get("observedGeneration") == generation and ready_condition(vc).get("status") == "True":
        return READY
    return WAITING


def progress_line(ref, vc):
    """One line a person waiting reads: phase, the run's progress, nodes, and why it is not Ready yet."""
    status = _status(vc)
    if not status:
        return "%s: no status yet (waiting for the operator to take it up)" % ref
    parts = [status.get("phase") or "no phase"]
    summary = (status.get("progress") or {}).get("summary")
    if summary:
        parts.append(summary)
    if status.get("nodesReady"):
        parts.append("nodes %s" % status["nodesReady"])
    ready = ready_condition(vc)
    if ready and ready.get("status") != "True" and (ready.get("reason") or ready.get("message")):
        parts.append("%s: %s" % (ready.get("reason") or "NotReady", ready.get("message") or ""))
    return "%s: %s" % (ref, ", ".join(p.strip() for p in parts))


def failure_message(ref, vc, timed_out):
    status = _status(vc)
    what = "is not Ready in time" if timed_out and status.get("phase") != "Failed" else "failed"
    details = " ".join(str(v) for v in (status.get("phase") or "no status yet", status.get("reason"),
                                        status.get("message")) if v)
    return "VirtualCluster %s %s: %s" % (ref, what, details)
