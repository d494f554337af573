"""Address plan of the sandbox cluster; RFC 2544 benchmarking space, like the node range."""

from __future__ import annotations

import ipaddress
import os

from sandbox.machines.errors import SandboxError

DEFAULT_POD_CIDR = "198.19.0.0/17"
DEFAULT_SERVICE_CIDR = "198.19.128.0/17"
# Each node gets a /24 of the pod range from the controller-manager.
POD_SUBNET_PREFIX = 24


def cidrs() -> tuple[str, str]:
    pod = os.environ.get("KUBENEST_POD_CIDR") or DEFAULT_POD_CIDR
    service = os.environ.get("KUBENEST_SERVICE_CIDR") or DEFAULT_SERVICE_CIDR
    try:
        pod_net, service_net = ipaddress.ip_network(pod), ipaddress.ip_network(service)
    except ValueError as exc:
        raise SandboxError(f"bad pod or service CIDR: {exc}") from None
    if pod_net.overlaps(service_net):
        raise SandboxError(f"pod range {pod} overlaps service range {service}")
    if pod_net.prefixlen > POD_SUBNET_PREFIX - 1:
        raise SandboxError(f"pod range {pod} must be larger than one /{POD_SUBNET_PREFIX} per node")
    return pod, service
