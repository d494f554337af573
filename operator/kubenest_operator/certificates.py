"""A virtual cluster's certificates as its PKI Secrets hold them, and which of them are due for renewal."""

from __future__ import annotations

import base64
import datetime

from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

from .context import Context
from .kube import unless_gone

# The Secrets the etcd and control_plane roles keep a virtual cluster's certificates in.
PKI_SECRETS = ("{name}-pki", "{name}-etcd-pki")


def due_certificates(secrets: dict[str, dict[str, str]], renew_before: float,
                     now: datetime.datetime | None = None) -> list[str]:
    """`secret/key (expires in ...)` of every leaf certificate inside its renewal window, of base64 Secret data."""
    due = []
    for secret_name, data in sorted(secrets.items()):
        for key, value in sorted(data.items()):
            if not key.endswith(".crt"):
                continue
            try:
                cert = pki.load_certificate_pem(base64.b64decode(value))
            except ValueError:
                due.append(f"{secret_name}/{key} (unreadable)")
                continue
            if pki.certificate_spec(cert)["is_ca"]:
                continue  # a new CA is a planned rotation (promoted nodes trust the old one), not a routine run
            remaining = pki.renewal_due(cert, renew_before, now)
            if remaining is not None:
                left = max(0, int(remaining.total_seconds()))
                due.append(f"{secret_name}/{key} (expires in {left // 3600}h{left % 3600 // 60:02d}m)"
                           if left else f"{secret_name}/{key} (expired)")
    return due


def expiry_times(secrets: dict[str, dict[str, str]]) -> dict[tuple[str, str], float]:
    """(secret, key) -> when the certificate expires (a Unix time), for every readable certificate, CAs included."""
    times = {}
    for secret_name, data in secrets.items():
        for key, value in data.items():
            if key.endswith(".crt"):
                try:
                    cert = pki.load_certificate_pem(base64.b64decode(value))
                except ValueError:
                    continue
                times[(secret_name, key)] = pki.certificate_not_after(cert).timestamp()
    return times


async def pki_secrets(ctx: Context, namespace: str, name: str) -> dict[str, dict[str, str]]:
    secrets = {}
    for pattern in PKI_SECRETS:
        secret_name = pattern.format(name=name)
        data = await unless_gone(ctx.api.read_secret_data(namespace, secret_name))
        if data is not None:
            secrets[secret_name] = data
    return secrets
