"""A rotation of every CA of a VirtualCluster (spec.caRotation) as a series of runs, one step each.

`trust` adds new CAs and keys beside the old ones, `sign` lets them sign; both together prepare the rotation, after
which every client that reads a CA once (copies of the kubeconfig, pods) has to take up the new bundle. `finish`,
taken once spec.caRotation.complete is true, removes the old ones. Each run's step is the one after the last step
status.caRotation records for the same id, so a rotation resumes where it stopped, and the roles make a repeated
step a no-op (pki_secrets' rotation_id).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STEPS = ("trust", "sign", "finish")
PHASES = {"trust": "Preparing", "sign": "Prepared", "finish": "Completed"}


def next_step(spec: Mapping[str, Any] | None, status: Mapping[str, Any] | None) -> str | None:
    """The step the next run takes, or None when the rotation asked for (if any) is as far as it should go."""
    asked = (spec or {}).get("caRotation") or {}
    rotation_id = asked.get("id")
    if not rotation_id:
        return None
    done = (status or {}).get("caRotation") or {}
    last = done.get("step") if done.get("id") == rotation_id and done.get("step") in STEPS else None
    wanted = STEPS if asked.get("complete") else STEPS[:2]
    after = STEPS.index(last) + 1 if last else 0
    return wanted[after] if after < len(wanted) else None


def extravars(spec: Mapping[str, Any] | None, status: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The playbook's `virtualcluster.ca_rotation`: {id, step}, or None."""
    step = next_step(spec, status)
    return {"id": str(spec["caRotation"]["id"]), "step": step} if step else None


def status_entry(reported: Mapping[str, Any], now: str) -> dict[str, Any] | None:
    """status.caRotation after a run that took the step it reports (its result's caRotation)."""
    step = reported.get("step")
    if step not in STEPS or not reported.get("id"):
        return None
    return {"id": str(reported["id"]), "step": step, "phase": PHASES[step], "lastStepTime": now}


def describe(entry: Mapping[str, Any], following: str | None) -> str:
    """What an event says about a step done."""
    if entry["step"] == "sign" and following is None:
        return (f"CA rotation {entry['id']} prepared: fetch the kubeconfig again and restart the pods that talk to "
                "the API, then set spec.caRotation.complete to true")
    if entry["step"] == "finish":
        return f"CA rotation {entry['id']} completed: the old CAs and service-account key are no longer trusted"
    return f"CA rotation {entry['id']}: step {entry['step']} done, {following} next"
