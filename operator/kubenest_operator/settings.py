"""Operator configuration (from the command line) and the kopf settings derived from it."""

from __future__ import annotations

import importlib
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import kopf
from ansible_collections.kosmos.kubenest.plugins.module_utils.run_result import RETRY_ANNOTATION

from .shards import Shard

DEFAULT_PEERING = "kubenest"
PLAYBOOK = "virtualcluster.yml"
# Prefix of the operator's annotations and finalizer on VirtualClusters.
ANNOTATION_PREFIX = "kubenest.kosmos.io"
FINALIZER = f"{ANNOTATION_PREFIX}/finalizer"


def installed_collection_dir() -> Path | None:
    """Where the kosmos.kubenest collection is installed (the venv links this checkout there)."""
    try:
        package = importlib.import_module("ansible_collections.kosmos.kubenest")
    except ImportError:
        return None
    paths = list(getattr(package, "__path__", []))
    return Path(paths[0]) if paths else None


def collections_path() -> str | None:
    """The directory that holds ansible_collections/, so ANSIBLE_COLLECTIONS_PATH resolves kosmos.kubenest."""
    collection = installed_collection_dir()
    return str(collection.parents[2]) if collection else None


def default_playbook_dir() -> Path:
    collection = installed_collection_dir()
    if collection is not None and (collection / "playbooks").is_dir():
        return collection / "playbooks"
    # Running from a checkout without the collection installed: operator/kubenest_operator -> repo root.
    return Path(__file__).resolve().parents[2] / "playbooks"


def default_runs_dir() -> Path:
    """Under the user's runtime directory when there is one; otherwise a per-user name in the temp dir
    (RunDirs refuses it unless this user owns it and nobody else may write to it)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "kubenest-operator-runs"
    return Path(tempfile.gettempdir()) / f"kubenest-operator-runs-{os.getuid()}"


@dataclass(frozen=True)
class Config:
    kubeconfig: str | None  # None: in-cluster
    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    # Nodes, GlobalNodes, clears and vanished virtual clusters' reservations: one shard's work (shards.py).
    cluster_scoped: bool = True
    playbook_dir: Path = field(default_factory=default_playbook_dir)
    playbook: str = PLAYBOOK
    max_parallel: int = 4
    # Of those, at most this many for VirtualClusters of one namespace.
    max_parallel_per_namespace: int = 2
    # Of those, runs that an upgrade of the collection causes (handlers.py): one tenant at a time by default.
    max_parallel_upgrades: int = 1
    peering: str | None = DEFAULT_PEERING  # None: standalone
    priority: int | None = None  # None: by seniority, see peering.py
    peering_settle: float = 3.0
    artifacts_keep: int = 10
    runs_dir: Path = field(default_factory=default_runs_dir)
    run_timeout: int | None = 3600
    progress_interval: float = 2.0
    backoff_base: float = 10.0
    backoff_max: float = 300.0
    watch_timeout: int = 300
    liveness: str | None = None
    # Seconds between looks at a virtual cluster that waits for free or Ready nodes.
    node_wait_interval: float = 15.0
    # Seconds between looks at a restored virtual cluster whose restore has not handed over yet.
    restore_wait_interval: float = 3.0
    # Seconds between looks at a namespace where the operator has no rights yet (kubenest-binder grants them).
    rights_wait_interval: float = 3.0
    # Seconds between full passes over host Nodes and GlobalNodes.
    resync_interval: float = 30.0
    # Seconds between looks at a virtual cluster's certificates (renewed when inside their window).
    cert_check_interval: float = 3600.0
    # Seconds between passes that write the agents' audit lines taken by runs to the operator's log.
    agent_audit_interval: float = 10.0
    # YAML file of site variables given to every run (agent client credentials, images directory, ...).
    site_vars: Path | None = None
    # Registries (host[:port]) control-plane images may come from; empty: any.
    allowed_registries: tuple[str, ...] = ()
    # Compatibility with the reference design: also keep the admin kubeconfig in spec.kubeconfig.
    spec_kubeconfig: bool = False

    @property
    def shard(self) -> Shard:
        return Shard(self.namespaces, self.cluster_scoped)


# Where the retry annotation's value goes in the diff base: not under metadata.annotations, whose keys with the
# operator's prefix kopf takes for its own progress records and leaves out of every diff.
RETRY_FIELD = "retry"


class SpecAndRetryDiffBase(kopf.AnnotationsDiffBaseStorage):
    """The spec, and of the metadata only the retry annotation: a person changes it to have a spec that failed
    permanently run again once they fixed the cause elsewhere, and kopf then sees a change to handle."""

    def build(self, *, body, extra_fields=None):
        essence = super().build(body=body, extra_fields=extra_fields)
        retry = (body.get("metadata", {}).get("annotations") or {}).get(RETRY_ANNOTATION)
        if retry is not None:
            essence = dict(essence, **{RETRY_FIELD: retry})
        return essence


def apply_kopf_settings(settings: kopf.OperatorSettings, config: Config) -> None:
    # Our own names, and progress/diff-base in annotations: the status schema has no room for kopf's fields.
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX, v1=False)
    # The diff base is the spec only, without spec.kubeconfig: writing the kubeconfig back is no change
    # to act on (no reconcile loop), it never lands in an annotation, and label or annotation edits
    # do not start playbook runs.
    settings.persistence.diffbase_storage = SpecAndRetryDiffBase(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration", v1=False,
        ignored_fields=["spec.kubeconfig", "metadata"])

    # A watch stream that died silently (a dropped connection without FIN) is noticed and re-established.
    settings.watching.server_timeout = int(config.watch_timeout)  # the API wants an integer
    settings.watching.client_timeout = config.watch_timeout + 30
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 30

    # Peering is always cluster-wide, also for a namespaced operator: it also serves Nodes and GlobalNodes.
    settings.peering.clusterwide = True
    settings.posting.level = logging.INFO
