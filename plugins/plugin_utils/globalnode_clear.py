# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Clearing held GlobalNodes, as the globalnode_clear action sees it: which names may be asked for, when the wait
is over, and the line a person reads meanwhile."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as protocol

CLEARED, FAILED, WAITING = "cleared", "failed", "waiting"


def annotations_of(node):
    return (node.get("metadata") or {}).get("annotations") or {}


def verdict(node):
    """Where a node's clear is: done once it left the held state; failed once the operator answered without."""
    if node is None:
        return FAILED
    if protocol.state_of(node) != protocol.HELD:
        return CLEARED
    if protocol.CLEAR_ANNOTATION in annotations_of(node):
        return WAITING
    return FAILED


def failure(name, node):
    if node is None:
        return "%s: the GlobalNode was deleted" % name
    why = annotations_of(node).get(protocol.CLEAR_FAILED_ANNOTATION)
    return "%s: %s" % (name, why or "the request was withdrawn (the annotation removed) before the node was cleared")


def progress_line(name, node):
    if node is None:
        return "%s: gone" % name
    claimed = next((c for c in (node.get("status") or {}).get("conditions") or []
                    if c.get("type") == protocol.CONDITION), {})
    asked = ", clearing" if verdict(node) == WAITING else ""
    return "%s: %s%s%s" % (name, protocol.state_of(node), " (%s)" % claimed["reason"] if claimed.get("reason")
                           else "", asked)
