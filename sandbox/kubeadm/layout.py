"""Addresses of the kubeadm host: each machine's fixed pod range, the routes to the others', the DNS address."""

from __future__ import annotations

import ipaddress

from sandbox.cluster.layout import POD_SUBNET_PREFIX
from sandbox.machines.config import Sandbox
from sandbox.machines.errors import SandboxError

# kubeadm's choice: the cluster DNS Service takes the tenth address of the service range.
DNS_HOST_INDEX = 10


def pod_ranges(sb: Sandbox, pod_cidr: str) -> dict[str, str]:
    """Machine name -> its /24 of the pod range, in machine order. Fixed per machine rather than handed out per
    Node object, so a node that leaves the cluster and joins again keeps its range and every route stays true."""
    subnets = ipaddress.ip_network(pod_cidr).subnets(new_prefix=POD_SUBNET_PREFIX)
    ranges = {}
    for node in sb.nodes:
        try:
            ranges[node.name] = str(next(subnets))
        except StopIteration:
            raise SandboxError(f"pod range {pod_cidr} has no /{POD_SUBNET_PREFIX} left for {node.name}") from None
    return ranges


def routes_for(sb: Sandbox, ranges: dict[str, str], name: str) -> dict[str, str]:
    """Pod range -> next hop, for every machine but `name`."""
    return {ranges[n.name]: n.ip for n in sb.nodes if n.name != name}


def dns_ip(service_cidr: str) -> str:
    return str(ipaddress.ip_network(service_cidr)[DNS_HOST_INDEX])
