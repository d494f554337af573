"""What every handler shares: configuration, API access, the playbook runner and the run slots."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from .agent_audit import AgentAudit
from .agent_client import AgentClientIdentity
from .clears import NodeClears
from .extravars import load_site_vars
from .host_objects import HostObjects
from .kube import Api, host_connection
from .revision import desired_state_revision
from .runs import PlaybookRunner, RunDirs
from .settings import Config, collections_path
from .shards import ShardGuard
from .slots import ObjectLocks, RunSlots


@dataclass
class Context:
    config: Config
    api: Api
    runner: PlaybookRunner
    slots: RunSlots  # --max-parallel runs at once, --max-parallel-per-namespace of one namespace
    locks: ObjectLocks  # one run at a time per VirtualCluster
    agent_identity: AgentClientIdentity  # the client pair runs use for the node agents
    agent_audit: AgentAudit  # where runs keep the agents' audit lines until they go to the operator's log
    revision: str = ""  # of the desired state the playbooks, roles and plugins give (revision.py)
    # Runs an upgrade of the collection causes, --max-parallel-upgrades at a time (handlers.py).
    upgrades: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))
    # What the looks read of each namespace, shared by its virtual clusters (health.py).
    host_objects: HostObjects = field(default_factory=lambda: HostObjects(0.0))
    # Held nodes being cleared, one run per node (clears.py).
    node_clears: NodeClears = field(default_factory=NodeClears)
    # No run in a namespace that another live shard serves too (shards.py); set once the replica joined its shard.
    shard_guard: ShardGuard = field(default_factory=ShardGuard)

    @classmethod
    def create(cls, config: Config) -> Context:
        api = Api(host_connection(config.kubeconfig))
        run_dirs = RunDirs(config.runs_dir, config.artifacts_keep)
        run_dirs.reap_orphans()  # a killed operator's playbook may still be in its last task
        run_dirs.prune()
        runner = PlaybookRunner(playbook_dir=config.playbook_dir, run_dirs=run_dirs,
                                collections_path=collections_path(), max_parallel=config.max_parallel,
                                timeout=config.run_timeout,
                                module_cache_dir=config.runs_dir.with_name(config.runs_dir.name + "-modules"))
        # A re-issue's predecessor is retired once every run that may have started with it has ended.
        identity = AgentClientIdentity(config.runs_dir.with_name(config.runs_dir.name + "-agent-client"),
                                       retire_after=float(config.run_timeout or 86400))
        audit = AgentAudit(config.runs_dir.with_name(config.runs_dir.name + "-agent-audit"))
        return cls(config, api, runner,
                   RunSlots(config.max_parallel, config.max_parallel_per_namespace), ObjectLocks(), identity, audit,
                   revision=desired_state_revision(config.playbook_dir.parent),
                   upgrades=asyncio.Semaphore(config.max_parallel_upgrades),
                   # A look sees the host at most this old: a small part of the interval between looks.
                   host_objects=HostObjects(min(5.0, config.resync_interval / 6)))

    def run_site_vars(self, logger: logging.Logger) -> dict[str, Any]:
        """The site variables of a run: the site's file, the agent client pair to use, the audit directory."""
        return self.agent_audit.site_vars(self.agent_identity.site_vars(load_site_vars(self.config.site_vars), logger))

    def close(self) -> None:
        self.runner.shutdown()
        self.api.close()
