"""Operator-wide kopf activities: credentials, settings, shutdown."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from .kube import connection_info
from .looks import QuietTimer
from .settings import apply_kopf_settings


@kopf.on.login()
def login(memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
    # The same kubeconfig (or service account) as the operator's own client and the playbooks.
    return connection_info(memo.ctx.api.connection)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    apply_kopf_settings(settings, memo.ctx.config)
    logging.getLogger("kopf.objects").addFilter(QuietTimer())


@kopf.on.cleanup()
def close(memo: kopf.Memo, **_: Any) -> None:
    memo.ctx.close()
