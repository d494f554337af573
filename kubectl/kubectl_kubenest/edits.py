"""`promote` and `return` as edits of a VirtualCluster's spec, planned from the object as read: no API calls here.

Nodes move only because the spec says so, and the operator moves them: the plugin edits `promoteResources.nodes`
and nothing else. The patch carries the resourceVersion it was planned from, so an edit made meanwhile by
someone else makes the API server refuse it instead of being overwritten.
"""

from __future__ import annotations


class EditError(ValueError):
    pass


def _asked(vc: dict) -> list[str]:
    return list(((vc.get("spec") or {}).get("promoteResources") or {}).get("nodes") or [])


def _refuse_policies(vc: dict, verb: str) -> None:
    spec = vc.get("spec") or {}
    if spec.get("promotePolicies"):
        meta = vc["metadata"]
        raise EditError(
            f"{meta.get('namespace')}/{meta['name']} chooses its nodes by promotePolicies (labels and a count), "
            f"not by name: to {verb} nodes change a policy's nodeCount "
            f"(kubectl -n {meta.get('namespace')} edit virtualcluster {meta['name']})")


def _patch(vc: dict, nodes: list[str]) -> dict:
    return {"metadata": {"resourceVersion": vc["metadata"]["resourceVersion"]},
            "spec": {"promoteResources": {"nodes": nodes}}}


def promote(vc: dict, nodes: list[str]) -> tuple[dict | None, list[str]]:
    """(patch or None when nothing changes, the nodes newly asked for)."""
    _refuse_policies(vc, "promote")
    asked = _asked(vc)
    new = [n for i, n in enumerate(nodes) if n not in asked and n not in nodes[:i]]
    return (_patch(vc, asked + new) if new else None), new


def give_back(vc: dict, nodes: list[str]) -> tuple[dict | None, list[str]]:
    """(patch or None when nothing changes, the nodes no longer asked for); a node the spec does not name is an
    error, as it is either a typo or a node held through another virtual cluster."""
    _refuse_policies(vc, "return")
    asked = _asked(vc)
    unknown = [n for n in nodes if n not in asked]
    if unknown:
        meta = vc["metadata"]
        raise EditError(f"{meta.get('namespace')}/{meta['name']} does not ask for {', '.join(unknown)} "
                        f"(it asks for: {', '.join(asked) or 'no node by name'})")
    kept = [n for n in asked if n not in nodes]
    gone = [n for n in asked if n in nodes]
    return (_patch(vc, kept) if gone else None), gone
