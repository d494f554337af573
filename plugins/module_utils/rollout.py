# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether a Deployment, StatefulSet or DaemonSet is rolled out, and what keeps its pods from starting (plain
dicts)."""

from __future__ import annotations

# Waiting reasons that no amount of waiting cures: the image, or the pod's own configuration, is wrong.
STUCK_WAITING = ("ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError",
                 "ErrImageNeverPull")
MESSAGE_LIMIT = 300


def wanted_pods(workload):
    """How many pods the workload asks for: its replicas, or for a DaemonSet the nodes its controller chose."""
    if workload.get("kind") == "DaemonSet":
        return (workload.get("status") or {}).get("desiredNumberScheduled", 0)
    return (workload.get("spec") or {}).get("replicas", 1)


def ready_pods(workload):
    status = (workload or {}).get("status") or {}
    return status.get("numberReady" if (workload or {}).get("kind") == "DaemonSet" else "readyReplicas", 0)


def rolled_out(workload):
    """The controller has seen the latest spec, every replica runs it and is ready (available, for a
    Deployment); no pod of an older template still answers. A DaemonSet: a ready pod of the latest template on
    every node its controller chose."""
    if not workload:
        return False
    status = workload.get("status") or {}
    wanted = wanted_pods(workload)
    if status.get("observedGeneration", 0) < (workload.get("metadata") or {}).get("generation", 0):
        return False
    if workload.get("kind") == "DaemonSet":
        return status.get("numberReady", 0) == wanted and status.get("updatedNumberScheduled", 0) == wanted
    if workload.get("kind") == "StatefulSet":
        current = status.get("updateRevision") and status.get("currentRevision") == status.get("updateRevision")
        updated = current or status.get("updatedReplicas", 0) >= wanted
        return status.get("readyReplicas", 0) >= wanted and bool(updated)
    return (status.get("availableReplicas", 0) >= wanted and status.get("updatedReplicas", 0) == wanted
            and status.get("replicas", 0) == wanted)


def _short(text):
    line = " ".join(str(text or "").split())
    return line if len(line) <= MESSAGE_LIMIT else line[:MESSAGE_LIMIT - 1] + "…"


def pod_problem(pod, crash_restarts=2, unschedulable_after=15.0, now=None, since=None):
    """The reason a pod cannot start, as `Reason: message`, or None while it may still come up.

    Unschedulable counts once it has lasted `unschedulable_after` seconds (`since`: when it was first seen;
    a node may be joining); a crash loop once a container restarted `crash_restarts` times."""
    status = pod.get("status") or {}
    blocked = unschedulable(pod)
    if blocked and since is not None and now is not None and now - since >= unschedulable_after:
        return "Unschedulable: %s" % _short(blocked.get("message"))
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in STUCK_WAITING:
            return "%s: %s" % (reason, _short(waiting.get("message") or container.get("image")))
        if reason == "CrashLoopBackOff" and container.get("restartCount", 0) >= crash_restarts:
            last = (container.get("lastState") or {}).get("terminated") or {}
            detail = last.get("message") or last.get("reason") or "exit code %s" % last.get("exitCode", "?")
            return "CrashLoopBackOff: container %s restarted %d times (%s)" % (
                container.get("name"), container.get("restartCount", 0), _short(detail))
    return None


def pod_ready(pod):
    """The pod is Ready and not on its way out."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def unschedulable(pod):
    """The pod's PodScheduled condition when the scheduler found no place for it, else None."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (cond.get("type"), cond.get("status"), cond.get("reason")) == ("PodScheduled", "False", "Unschedulable"):
            return cond
    return None


# Taints that keep a pod off a node; PreferNoSchedule only steers.
KEEPING_EFFECTS = ("NoSchedule", "NoExecute")
TAINTS_NAMED = 6


def _tolerates(toleration, taint):
    """The scheduler's rule: an empty key with Exists tolerates every taint; an empty effect every effect."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taints(pod, nodes):
    """`node key[=value]:Effect` for each taint that keeps the pod off a node its nodeSelector allows: what the
    scheduler counts only as "node(s) had untolerated taint(s)". A disk under pressure shows as
    node.kubernetes.io/disk-pressure, a control-plane node as node-role.kubernetes.io/control-plane."""
    spec = pod.get("spec") or {}
    tolerations, selector = spec.get("tolerations") or [], spec.get("nodeSelector") or {}
    found = []
    for node in sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name") or ""):
        labels = (node.get("metadata") or {}).get("labels") or {}
        if any(labels.get(key) != value for key, value in selector.items()):
            continue
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in KEEPING_EFFECTS and not any(_tolerates(t, taint) for t in tolerations):
                value = "=%s" % taint["value"] if taint.get("value") else ""
                found.append("%s %s%s:%s" % (node["metadata"]["name"], taint.get("key"), value, taint["effect"]))
    return found


def name_taints(problem, pod, nodes):
    """An Unschedulable problem that blames taints, with the taints named."""
    if not problem.startswith("Unschedulable:") or "taint" not in problem:
        return problem
    taints = untolerated_taints(pod, nodes)
    if not taints:
        return problem
    more = " and %d more" % (len(taints) - TAINTS_NAMED) if len(taints) > TAINTS_NAMED else ""
    return "%s (untolerated: %s%s)" % (problem, ", ".join(taints[:TAINTS_NAMED]), more)
