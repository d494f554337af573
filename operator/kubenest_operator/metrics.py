"""The operator's Prometheus metrics, served at --metrics-address (docs/metrics.md lists them with queries).

Counters and histograms are recorded where things happen (runs, slot waits, promotion and return steps); the
objects' state (VirtualClusters by phase and condition, GlobalNodes by state) is read from the API when scraped,
at most once per CACHE_SECONDS, so a metric never disagrees with `kubectl get` for longer than that. Certificate
expiry comes from the certificate checks (health.py). Nothing secret is a label: names of
objects, phases, reasons and steps only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry()
CACHE_SECONDS = 10.0
# A create takes tens of seconds, a run with promotions minutes; deletes and no-op runs seconds.
RUN_BUCKETS = (2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 3600)
STEP_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
WAIT_BUCKETS = (0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)

RUNS = Counter("kubenest_runs", "Playbook runs ended, by playbook, phase (Creating, Updating, Deleting) and "
               "ansible-runner's outcome", ["playbook", "phase", "outcome"], registry=REGISTRY)
RUN_SECONDS = Histogram("kubenest_run_duration_seconds", "How long a playbook run took, by playbook, phase and "
                        "outcome", ["playbook", "phase", "outcome"], buckets=RUN_BUCKETS, registry=REGISTRY)
FAILURES = Counter("kubenest_run_failures", "Runs that did not succeed, by the reason the Ready condition gives",
                   ["reason"], registry=REGISTRY)
SLOT_WAIT = Histogram("kubenest_run_slot_wait_seconds", "How long a run waited for a free run slot "
                      "(--max-parallel, --max-parallel-per-namespace)", buckets=WAIT_BUCKETS, registry=REGISTRY)
WAITING = Gauge("kubenest_runs_waiting", "Runs waiting for a free run slot", registry=REGISTRY)
RUNNING = Gauge("kubenest_runs_running", "Runs holding a run slot", registry=REGISTRY)
NODE_STEPS = Histogram("kubenest_node_step_duration_seconds", "How long one node spent in a step of its promotion "
                       "or return (docs/node-promotion.md names the steps)", ["step"], buckets=STEP_BUCKETS,
                       registry=REGISTRY)

# (namespace, name) -> {(secret, key): notAfter as a Unix time}, written by the certificate checks, and when.
_certificates: dict[tuple[str, str], dict[tuple[str, str], float]] = {}
_certificates_set: dict[tuple[str, str], float] = {}
_certificates_lock = threading.Lock()


def record_run(playbook: str, phase: str, outcome: str, seconds: float) -> None:
    RUNS.labels(playbook, phase, outcome).inc()
    RUN_SECONDS.labels(playbook, phase, outcome).observe(seconds)


def record_failure(reason: str) -> None:
    FAILURES.labels(reason).inc()


def record_steps(durations: Iterable[tuple[str, float]]) -> None:
    for step, seconds in durations:
        NODE_STEPS.labels(step).observe(seconds)


def set_certificates(namespace: str, name: str, expiry: dict[tuple[str, str], float] | None) -> None:
    """The certificates of one VirtualCluster and when each expires; None forgets them (the object is gone)."""
    with _certificates_lock:
        if expiry is None:
            _certificates.pop((namespace, name), None)
            _certificates_set.pop((namespace, name), None)
        else:
            _certificates[(namespace, name)] = dict(expiry)
            _certificates_set[(namespace, name)] = time.monotonic()


class ObjectsCollector(Collector):
    """VirtualClusters and GlobalNodes as they are, from `list_objects()` -> (virtualclusters, globalnodes)."""

    def __init__(self, list_objects: Callable[[], tuple[list[dict[str, Any]], list[dict[str, Any]]]]):
        self.list_objects = list_objects
        self._lock = threading.Lock()
        self._cached: tuple[float, tuple[list, list]] | None = None

    def _objects(self) -> tuple[float, tuple[list, list]] | None:
        with self._lock:
            if self._cached is None or time.monotonic() - self._cached[0] > CACHE_SECONDS:
                try:
                    self._cached = (time.monotonic(), self.list_objects())
                except Exception as exc:  # a scrape must still answer: without these families, and said why
                    log.warning("metrics: could not list VirtualClusters and GlobalNodes: %s", exc)
                    return None
            return self._cached

    def collect(self):
        listed = self._objects()
        if listed is not None:
            listed_at, (virtualclusters, globalnodes) = listed
            _forget_certificates_but(virtualclusters, listed_at)
            yield from _virtualcluster_families(virtualclusters)
            states = GaugeMetricFamily("kubenest_globalnodes", "GlobalNodes by state (free, reserved, in use, ...)",
                                       labels=["state"])
            for state, count in sorted(Tally(_state(g) for g in globalnodes).items()):
                states.add_metric([state], count)
            yield states
        expiry = GaugeMetricFamily("kubenest_certificate_expiry_timestamp_seconds", "When a certificate of a "
                                   "VirtualCluster's control plane expires (its PKI Secrets), as a Unix time",
                                   labels=["namespace", "virtualcluster", "secret", "certificate"])
        with _certificates_lock:
            for (namespace, name), certificates in sorted(_certificates.items()):
                for (secret, key), not_after in sorted(certificates.items()):
                    expiry.add_metric([namespace, name, secret, key], not_after)
        yield expiry


def _forget_certificates_but(virtualclusters: list[dict[str, Any]], listed_at: float) -> None:
    """Drop the certificates of VirtualClusters that were gone when listed (a deletion forced past the operator's
    finalizer); not those set since, which a listing older than the VirtualCluster would miss."""
    present = {((vc.get("metadata") or {}).get("namespace"), (vc.get("metadata") or {}).get("name"))
               for vc in virtualclusters}
    with _certificates_lock:
        for key in [key for key, at in _certificates_set.items() if key not in present and at < listed_at]:
            del _certificates[key], _certificates_set[key]


def _state(globalnode: dict[str, Any]) -> str:
    return str((globalnode.get("status") or {}).get("state") or "Unknown")


def _virtualcluster_families(virtualclusters: list[dict[str, Any]]):
    phases = GaugeMetricFamily("kubenest_virtualclusters", "VirtualClusters by phase", labels=["phase"])
    for phase, count in sorted(Tally(str((vc.get("status") or {}).get("phase") or "Pending")
                                     for vc in virtualclusters).items()):
        phases.add_metric([phase], count)
    yield phases
    conditions = GaugeMetricFamily("kubenest_virtualcluster_condition", "1 for each condition of a VirtualCluster "
                                   "with its status and reason (Ready, NodesReady, AddonsReady, ...)",
                                   labels=["namespace", "virtualcluster", "condition", "status", "reason"])
    for vc in virtualclusters:
        meta = vc.get("metadata") or {}
        for found in (vc.get("status") or {}).get("conditions") or []:
            conditions.add_metric([str(meta.get("namespace")), str(meta.get("name")), str(found.get("type")),
                                   str(found.get("status")), str(found.get("reason") or "")], 1)
    yield conditions


def serve(address: str, list_objects) -> None:
    """Serve the metrics at host:port (an empty host: every address) from a thread of their own."""
    host, _colon, port = address.rpartition(":")
    REGISTRY.register(ObjectsCollector(list_objects))
    start_http_server(int(port), addr=host.strip("[]") or "0.0.0.0", registry=REGISTRY)
    log.info("metrics at http://%s:%s/metrics", host or "0.0.0.0", port)
