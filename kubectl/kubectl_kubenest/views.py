"""What the plugin prints, built from VirtualCluster and GlobalNode objects as plain dicts: no API calls here."""

from __future__ import annotations

import datetime


class RefError(ValueError):
    pass


def parse_ref(ref: str, default_namespace: str) -> tuple[str, str]:
    """NAMESPACE/NAME, or NAME in the default namespace."""
    namespace, sep, name = ref.partition("/")
    if not sep:
        namespace, name = default_namespace, ref
    if not namespace or not name or "/" in name:
        raise RefError(f"{ref!r} names no virtual cluster: give NAMESPACE/NAME, or NAME with -n NAMESPACE")
    return namespace, name


def age(timestamp: str | None, now: datetime.datetime) -> str:
    """kubectl's way: the largest unit, 90s, 5m, 3h, 2d."""
    if not timestamp:
        return "-"
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:  # 119s, then 2m ... 119m, then 2h
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def condition(obj: dict, type_: str) -> dict:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return cond
    return {}


def progress_text(progress: dict | None) -> str:
    """The running reconcile in a few words: its task and tasks done of the total."""
    if not progress or not progress.get("runID"):
        return "-"
    if progress.get("summary"):  # what `kubectl get vc` shows in its Progress column
        return progress["summary"]
    task = progress.get("currentTask") or progress.get("playbook") or "starting"
    done, total = progress.get("tasksDone"), progress.get("tasksTotal")
    counted = f" ({done}/{total})" if isinstance(done, int) and isinstance(total, int) and total else ""
    return f"{task}{counted}"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = ["   ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in [headers, *rows]]
    return "\n".join(lines)


def virtualcluster_rows(items: list[dict], now: datetime.datetime, all_namespaces: bool) -> str:
    headers = ["NAME", "PHASE", "READY", "NODES", "PROGRESS", "AGE"]
    rows = []
    for vc in sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])):
        status = vc.get("status") or {}
        row = [vc["metadata"]["name"], status.get("phase") or "-", condition(vc, "Ready").get("status") or "-",
               status.get("nodesReady") or "-", progress_text(status.get("progress")),
               age(vc["metadata"].get("creationTimestamp"), now)]
        rows.append([vc["metadata"].get("namespace", ""), *row] if all_namespaces else row)
    return table(["NAMESPACE", *headers] if all_namespaces else headers, rows)


def virtualcluster_detail(vc: dict, now: datetime.datetime) -> str:
    """What `kubectl kubenest status NS/NAME` prints: where the virtual cluster stands and why."""
    meta, spec, status = vc["metadata"], vc.get("spec") or {}, vc.get("status") or {}
    ref = f"{meta.get('namespace')}/{meta['name']}"
    lines = [f"VirtualCluster {ref}",
             f"  Phase:       {status.get('phase') or 'not reconciled yet'}",
             f"  Endpoint:    {status.get('endpoint') or '-'}",
             f"  Kubernetes:  {status.get('kubernetesVersion') or spec.get('kubernetesVersion') or '-'}",
             f"  Nodes:       {status.get('nodesReady') or '-'}",
             f"  Progress:    {progress_text(status.get('progress'))}"]
    if status.get("observedGeneration") not in (None, meta.get("generation")):
        lines.append(f"  Spec:        generation {meta.get('generation')} not reconciled yet "
                     f"(last: {status.get('observedGeneration')})")
    if status.get("waitingSince"):
        lines.append(f"  Waiting:     for free nodes since {status['waitingSince']}")
    nodes = status.get("nodes") or []
    if nodes:
        lines += ["", table(["NODE", "ADDRESS", "READY"],
                            [[n.get("name", "?"), n.get("ip") or "-", "True" if n.get("ready") else "False"]
                             for n in nodes])]
    conditions = status.get("conditions") or []
    if conditions:
        lines += ["", table(["CONDITION", "STATUS", "REASON", "AGE", "MESSAGE"],
                            [[c.get("type", "?"), c.get("status", "?"), c.get("reason") or "-",
                              age(c.get("lastTransitionTime"), now), c.get("message") or ""]
                             for c in conditions])]
    secret = status.get("kubeconfigSecretRef") or {}
    if secret.get("name"):
        lines += ["", f"Kubeconfig: Secret {meta.get('namespace')}/{secret['name']} (key {secret.get('key')}); "
                      f"kubectl kubenest kubeconfig {ref} -o {meta['name']}.kubeconfig"]
    return "\n".join(lines)


def globalnode_rows(items: list[dict], now: datetime.datetime, asked: str = "", failed: str = "") -> str:
    """One row per GlobalNode; CLEAR says whether a held node was asked to be cleared (annotation `asked`) or why
    its last clear failed (annotation `failed`), as the operator wrote it."""
    rows = []
    for node in sorted(items, key=lambda o: o["metadata"]["name"]):
        status, annotations = node.get("status") or {}, node["metadata"].get("annotations") or {}
        clear = "asked" if asked in annotations else (f"failed: {annotations[failed]}" if failed in annotations
                                                      else "-")
        rows.append([node["metadata"]["name"], status.get("state") or "-", status.get("virtualCluster") or "-",
                     age(status.get("stateSince"), now), clear])
    return table(["NAME", "STATE", "VIRTUAL CLUSTER", "SINCE", "CLEAR"], rows)
