"""The node agents' audit lines, taken off the nodes by the operator's runs and written to the operator's log.

Runs give the connection plugin an audit directory next to the runs directory (never inside a run's
artifacts, which are pruned); the connection helper of each node appends the agent's lines there (see
plugins/plugin_utils/agent/audit_trail.py). Every few seconds the operator drains that directory into its own
log, one JSON line per entry on the `kubenest.agent-audit` logger, so the record ends where the host keeps its
pods' logs, out of reach of a tenant that holds root on a node. A site that sets `kubenest_agent_audit_dir`
itself keeps its own directory, and the operator leaves that alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

import kopf
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.audit_trail import drain

AUDIT_DIR_VAR = "kubenest_agent_audit_dir"
audit_log = logging.getLogger("kubenest.agent-audit")


class AgentAudit:
    def __init__(self, directory: Path):
        self.directory = directory

    def site_vars(self, site_vars: dict[str, Any]) -> dict[str, Any]:
        """`site_vars` with the audit directory runs are to use."""
        if site_vars.get(AUDIT_DIR_VAR):
            return site_vars
        return dict(site_vars, **{AUDIT_DIR_VAR: str(self.directory)})

    def ship(self) -> int:
        """Write every line kept since the last call to the operator's log; how many."""
        entries = drain(self.directory)
        for entry in entries:
            audit_log.info(json.dumps(entry, separators=(",", ":"), ensure_ascii=False, sort_keys=True))
        return len(entries)


async def ship_forever(audit: AgentAudit, interval: float, logger: logging.Logger) -> None:
    try:
        while True:
            await asyncio.sleep(interval)
            try:
                await asyncio.to_thread(audit.ship)
            except Exception:  # a damaged file must not stop the next pass
                logger.exception("shipping the agents' audit lines failed")
    finally:
        with contextlib.suppress(Exception):
            audit.ship()  # what the last runs took, before the operator exits


@kopf.on.startup()
async def start_shipping(memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    ctx = memo.ctx
    memo.agent_audit_task = asyncio.create_task(ship_forever(ctx.agent_audit, ctx.config.agent_audit_interval,
                                                             logger))


@kopf.on.cleanup()
async def stop_shipping(memo: kopf.Memo, **_: Any) -> None:
    task = memo.get("agent_audit_task")
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
