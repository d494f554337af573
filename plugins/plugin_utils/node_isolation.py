# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Who may reach whom on the node network, from the host cluster's own objects.

A tenant's admin can get root on its nodes, so the host keeps them off everything it runs on its own nodes
(its API server, kubelets, etcd, pods, the VXLAN port of its pod network) but for the NodePorts of that
tenant's own API server (recorded on the GlobalNodes), and every tenant node keeps other tenants' nodes off
itself. Each node holds its part of this in one chain (the node_firewall module); this module works out every
node's part.

A node is on a tenant's side while its GlobalNode carries the ports annotation and names a virtual cluster,
and the host has no Node of that name. The annotation is set when the node has left the host, before it joins
the tenant (step Isolate), and removed once a returning node is wiped, before its kubelet dials the host's API
server: so every run, of any virtual cluster, sees a node move sides at the same moments. A tenant whose API
server is behind a load balancer that the host's nodes answer for themselves also records that address and its
ports; the host's nodes then let the tenant's nodes reach exactly those pairs too.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.kosmos.kubenest.plugins.module_utils.globalnodes import agent_pins_of

OWNED_STATES = ("reserved", "occupied", "returning", "held")
# Set on a GlobalNode while its node is on a tenant's side: the NodePorts of that virtual cluster's API server
# (API, Konnectivity). Kept on the cluster-scoped GlobalNode, so a run for one virtual cluster knows every other
# tenant's ports without reading other namespaces.
PORTS_ANNOTATION = "kosmos.io/tenant-api-ports"
# Beside it, for an API server Service of type LoadBalancer whose address the host's nodes take traffic for
# themselves (MetalLB, kube-vip, ipMode VIP): that address and the Service ports (API, Konnectivity), as
# `address:port,...`. Those packets reach a host node at the load balancer's address, not at a NodePort.
ENDPOINTS_ANNOTATION = "kosmos.io/tenant-api-endpoints"
MAX_PORTS = 15  # node_firewall's limit per entry; more than that is not ours and counts as none
MAX_ENDPOINTS = 8  # a Service's addresses, a few of each family at most; more is not ours and counts as none


def _internal_ips(node: Mapping[str, Any]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    found = []
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP" and address.get("address"):
            try:
                found.append(ipaddress.ip_address(str(address["address"])))
            except ValueError:
                continue
    return found


def _internal_ip(node: Mapping[str, Any]) -> str | None:
    """The node's IPv4 InternalIP: the node network the filters are written for (a dual-stack node lists both)."""
    return next((str(ip) for ip in _internal_ips(node) if ip.version == 4), None)


def _host_ipv6(host_nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """What a dual-stack host cluster sends over IPv6 between its nodes: their IPv6 InternalIPs, and the IPv6 pod
    networks they route (a network that is not one counts as none)."""
    networks = set()
    for node in host_nodes:
        networks.update(ipaddress.ip_network(ip) for ip in _internal_ips(node) if ip.version == 6)
        for cidr in (node.get("spec") or {}).get("podCIDRs") or []:
            try:
                network = ipaddress.ip_network(str(cidr), strict=True)
            except ValueError:
                continue
            if network.version == 6:
                networks.add(network)
    return [str(n) for n in sorted(networks)]


def recorded_ports(global_node: Mapping[str, Any]) -> list[int]:
    """The ports recorded on a GlobalNode; anything that is not a port list counts as none (fail closed)."""
    value = ((global_node.get("metadata") or {}).get("annotations") or {}).get(PORTS_ANNOTATION) or ""
    try:
        ports = sorted({int(part) for part in str(value).split(",") if part.strip()})
    except ValueError:
        return []
    return ports if all(0 < port < 65536 for port in ports) else []


def recorded_endpoints(global_node: Mapping[str, Any]) -> tuple[list[str], list[int]]:
    """The load-balancer addresses and ports recorded on a GlobalNode, as (addresses, ports); anything that is not
    a list of IPv4 `address:port` counts as none (fail closed)."""
    value = ((global_node.get("metadata") or {}).get("annotations") or {}).get(ENDPOINTS_ANNOTATION) or ""
    addresses, ports = set(), set()
    parts = [part.strip() for part in str(value).split(",") if part.strip()]
    if len(parts) > MAX_ENDPOINTS:
        return [], []
    for part in parts:
        address, _sep, port = part.rpartition(":")
        try:
            ip, number = ipaddress.IPv4Address(address), int(port)
        except ValueError:
            return [], []
        if not 0 < number < 65536 or ip.is_unspecified or ip.is_loopback:
            return [], []
        addresses.add(str(ip))
        ports.add(number)
    return sorted(addresses, key=ipaddress.IPv4Address), sorted(ports)


def load_balancer_endpoints(service: Mapping[str, Any], port_names: Iterable[str]) -> str:
    """The value of ENDPOINTS_ANNOTATION for a tenant's API server Service: every address its load balancer gives
    that the host's nodes take traffic for (an ingress IP whose ipMode is not Proxy), at each Service port named in
    port_names; empty for any other Service."""
    spec, status = service.get("spec") or {}, service.get("status") or {}
    if spec.get("type") != "LoadBalancer":
        return ""
    names = set(port_names)
    service_ports = sorted({int(p["port"]) for p in spec.get("ports") or [] if p.get("name") in names})
    addresses = []
    for ingress in (status.get("loadBalancer") or {}).get("ingress") or []:
        # ipMode Proxy: the load balancer connects to the NodePorts from its own address, which needs no rule.
        if ingress.get("ip") and ingress.get("ipMode", "VIP") != "Proxy" and ingress["ip"] not in addresses:
            addresses.append(str(ingress["ip"]))
    return ",".join("%s:%d" % (address, port) for address in addresses for port in service_ports)


def plan(host_nodes: Iterable[Mapping[str, Any]], global_nodes: Iterable[Mapping[str, Any]]
         ) -> dict[str, dict[str, Any]]:
    """Node name -> {address, side ('host' or namespace/name of its virtual cluster), allow, deny,
    ipv6_deny_unlisted, ipv6_allow, node_address, agentCertificates}: the node_firewall arguments of every node the
    host knows of, in name order, and the agent certificates its GlobalNode records (the run that applies them pins
    the node's agent to those).

    IPv6 is closed rather than listed wherever a node has someone to keep off (a root process on a tenant's node can
    take any IPv6 address on the link): only the host's own IPv6 addresses and pod networks reach its nodes, and
    nothing reaches a tenant's node over IPv6 from the node network."""
    global_nodes, host_nodes = list(global_nodes), list(host_nodes)
    host_ipv6 = _host_ipv6(host_nodes)
    pins = {str((gnode.get("metadata") or {}).get("name") or ""): agent_pins_of(gnode) for gnode in global_nodes}
    in_host = {}
    for node in host_nodes:
        name, address = (node.get("metadata") or {}).get("name"), _internal_ip(node)
        if name and address:
            in_host[str(name)] = address
    tenants: dict[str, dict[str, str]] = {}  # virtual cluster -> node name -> address
    ports: dict[str, set[int]] = {}
    balanced: dict[str, tuple[set[str], set[int]]] = {}  # virtual cluster -> load-balancer addresses, ports
    for gnode in global_nodes:
        name = str((gnode.get("metadata") or {}).get("name") or "")
        status, address = gnode.get("status") or {}, (gnode.get("spec") or {}).get("nodeIP")
        owner = status.get("virtualCluster")
        annotations = (gnode.get("metadata") or {}).get("annotations") or {}
        if not name or not address or name in in_host or PORTS_ANNOTATION not in annotations:
            continue
        if owner and status.get("state") in OWNED_STATES:
            tenants.setdefault(str(owner), {})[name] = str(address)
            ports.setdefault(str(owner), set()).update(recorded_ports(gnode))
            addresses, service_ports = recorded_endpoints(gnode)
            if addresses:
                entry = balanced.setdefault(str(owner), (set(), set()))
                entry[0].update(addresses)
                entry[1].update(service_ports)
    tenant_addresses = sorted({a for members in tenants.values() for a in members.values()})
    allow = []
    for owner, members in sorted(tenants.items()):
        sources = sorted(members.values())
        if 0 < len(ports.get(owner, ())) <= MAX_PORTS:
            allow.append({"sources": sources, "tcp_ports": sorted(ports[owner])})
        addresses, service_ports = balanced.get(owner, (set(), set()))
        if addresses and len(service_ports) <= MAX_PORTS:
            allow.append({"sources": sources, "destinations": sorted(addresses, key=ipaddress.IPv4Address),
                          "tcp_ports": sorted(service_ports)})
    host_filter = {"allow": allow, "deny": tenant_addresses}
    result: dict[str, dict[str, Any]] = {}
    for name, address in in_host.items():
        result[name] = {"address": address, "side": "host", **host_filter}
    for owner, members in tenants.items():
        others = [a for a in tenant_addresses if a not in members.values()]
        for name, address in members.items():
            result[name] = {"address": address, "side": owner, "allow": [], "deny": others}
    for name, entry in result.items():
        entry["ipv6_deny_unlisted"] = bool(entry["deny"])
        entry["ipv6_allow"] = host_ipv6 if entry["side"] == "host" and entry["deny"] else []
        entry["node_address"] = entry["address"]
        entry["agentCertificates"] = pins.get(name, [])
    return dict(sorted(result.items()))
