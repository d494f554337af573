"""Who set which field of an object the collection applied, from its managedFields.

The collection writes a control plane with server-side apply under one field manager, so the API server
records which fields it set. Whoever changes one of them afterwards (`kubectl scale`, `kubectl edit`, `kubectl
set image`, a merge patch) takes that field over: it leaves the collection's set, and mostly appears under a
manager of its own (a write through the scale subresource records none). Either is drift from what the
collection wants, whatever the new value is, and the next run's forced apply takes the field back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

# The collection's field manager (plugins/module_utils/kube_api.FIELD_MANAGER); the operator's own writes
# (status, annotations) are its too.
COLLECTION = "kosmos.kubenest"
OPERATOR = "kubenest-operator"
OURS = frozenset({COLLECTION, OPERATOR})

# What another manager may own without it being drift: metadata (labels, annotations, owner references,
# written by many tools), status (controllers) and a pod template's annotations (`kubectl rollout restart`).
TOLERATED_PREFIXES = (("metadata",), ("status",), ("spec", "template", "metadata", "annotations"))
# Subresources whose writes change what the collection applied; `status` is the controllers'.
SPEC_SUBRESOURCES = ("", "scale")


def _step(key: str) -> str | None:
    """One fieldsV1 key as a readable path step: f:name -> name, k:{"name":"x"} -> [name=x], v:... -> [value]."""
    if key == ".":
        return None
    kind, rest = key.split(":", 1) if ":" in key else (key, "")
    if kind == "f":
        return rest
    if kind == "k":
        try:
            fields = json.loads(rest)
        except ValueError:
            return f"[{rest}]"
        return "[" + ",".join(f"{k}={v}" for k, v in sorted(fields.items())) + "]"
    if kind == "v":
        return f"[{rest}]"
    if kind == "i":
        return f"[{rest}]"
    return key


def leaf_paths(fields: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every path that ends in a leaf of a fieldsV1 tree (a set field, or a list entry as a whole)."""
    paths = []
    for key, child in fields.items():
        step = _step(key)
        if step is None:
            continue
        path = (*prefix, step)
        if isinstance(child, Mapping) and any(k != "." for k in child):
            paths.extend(leaf_paths(child, path))
        else:
            paths.append(path)
    return paths


def _tolerated(path: tuple[str, ...]) -> bool:
    return any(path[:len(prefix)] == prefix for prefix in TOLERATED_PREFIXES)


def render(path: Iterable[str]) -> str:
    text = ""
    for step in path:
        text += step if step.startswith("[") or not text else f".{step}"
    return text


def changed_by_others(obj: Mapping[str, Any]) -> dict[str, list[str]]:
    """{manager: [field, ...]} of the fields someone other than the collection and the operator set on `obj`
    (a plain dict as the API returns it), outside metadata, status and pod-template annotations."""
    found: dict[str, list[str]] = {}
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        manager = entry.get("manager") or "an unnamed manager"
        if manager in OURS or (entry.get("subresource") or "") not in SPEC_SUBRESOURCES:
            continue
        paths = [render(path) for path in leaf_paths(entry.get("fieldsV1") or {}) if not _tolerated(path)]
        if paths:
            found.setdefault(manager, []).extend(sorted(paths))
    return found


def collection_fields(obj: Mapping[str, Any]) -> list[str]:
    """The fields the collection's field manager holds on `obj` (outside what others may own too)."""
    paths = set()
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == COLLECTION:
            paths.update(render(path) for path in leaf_paths(entry.get("fieldsV1") or {}) if not _tolerated(path))
    return sorted(paths)


def fields_digest(obj: Mapping[str, Any]) -> str:
    """A short digest of collection_fields: it changes when someone takes a field over, even where the API
    server records no new manager for it (a write through the scale subresource)."""
    return hashlib.sha256("\n".join(collection_fields(obj)).encode()).hexdigest()[:16]


def applied_by_collection(obj: Mapping[str, Any]) -> bool:
    """Whether the collection's field manager set anything on `obj`."""
    return any(entry.get("manager") == COLLECTION for entry in (obj.get("metadata") or {}).get("managedFields") or [])


def describe(kind: str, name: str, changed: Mapping[str, list[str]], limit: int = 3) -> str:
    """One line: `Deployment x: spec.replicas changed by kubectl`."""
    parts = []
    for manager, paths in sorted(changed.items()):
        shown = ", ".join(paths[:limit]) + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
        parts.append(f"{shown} changed by {manager}")
    return f"{kind} {name}: {'; '.join(parts)}"
