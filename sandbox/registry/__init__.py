"""The sandbox's OCI registry: Debian's docker-registry (distribution 2.8) on the machines' bridge, with TLS.

Every image the sandbox builds is pushed here with skopeo and pulled by the machines' containerd, which maps the
registry name in the images' references (`kubenest.local`) to this server through a hosts.toml that pins the
registry's own CA (the kubelet role's `kubelet_registry_hosts`). State (CA, certificate, configuration, blobs,
log, pid) lives in <state dir>/registry.
"""

from __future__ import annotations

import os

from sandbox.machines.config import Sandbox
from sandbox.machines.errors import SandboxError

from .server import DEFAULT_PORT, Registry

# The registry name the sandbox's images carry in their references; the machines' containerd maps it to the
# registry (hosts.toml), so references stay the same whether an image was imported or pulled.
NAME = "kubenest.local"


def of(sb: Sandbox) -> Registry:
    """The registry of a sandbox: in its state dir, on the host's address of its bridge."""
    value = os.environ.get("KUBENEST_REGISTRY_PORT") or str(DEFAULT_PORT)
    try:
        port = int(value)
    except ValueError:
        raise SandboxError(f"KUBENEST_REGISTRY_PORT must be a port number, got {value!r}") from None
    if not 0 < port < 65536:
        raise SandboxError(f"KUBENEST_REGISTRY_PORT must be a port number, got {port}")
    return Registry(sb.state_dir / "registry", sb.host_ip, port)


def hosts_vars(reg: Registry) -> list[dict]:
    """The kubelet role's kubelet_registry_hosts for this registry."""
    return [{"name": NAME, "endpoint": reg.endpoint, "ca_file": str(reg.ca_file)}]
