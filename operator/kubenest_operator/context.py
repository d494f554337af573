"""What every handler shares: configuration, API access, the playbook runner and the run slots."""

from __future__ import annotations

from dataclasses import dataclass

import kubernetes

from .agent_client import AgentClientIdentity
from .kube import Api, load_configuration
from .runs import PlaybookRunner, RunDirs
from .settings import Config, collection_revision, collections_path
from .slots import ObjectLocks, RunSlots


@dataclass
class Context:
    config: Config
    configuration: kubernetes.client.Configuration
    api: Api
    runner: PlaybookRunner
    slots: RunSlots  # --max-parallel runs at once, --max-parallel-per-namespace of one namespace
    locks: ObjectLocks  # one run at a time per VirtualCluster
    agent_identity: AgentClientIdentity  # the client pair runs use for the node agents
    revision: str = ""  # digest of the playbooks, roles and plugins runs use (see drift.py)

    @classmethod
    def create(cls, config: Config) -> Context:
        configuration = load_configuration(config.kubeconfig)
        run_dirs = RunDirs(config.runs_dir, config.artifacts_keep)
        run_dirs.reap_orphans()  # a killed operator's playbook may still be in its last task
        run_dirs.prune()
        runner = PlaybookRunner(playbook_dir=config.playbook_dir, run_dirs=run_dirs,
                                collections_path=collections_path(), max_parallel=config.max_parallel,
                                timeout=config.run_timeout,
                                module_cache_dir=config.runs_dir.with_name(config.runs_dir.name + "-modules"))
        identity = AgentClientIdentity(config.runs_dir.with_name(config.runs_dir.name + "-agent-client"))
        return cls(config, configuration, Api(configuration), runner,
                   RunSlots(config.max_parallel, config.max_parallel_per_namespace), ObjectLocks(), identity,
                   collection_revision(config.playbook_dir))

    def close(self) -> None:
        self.runner.shutdown()
        self.api.close()
