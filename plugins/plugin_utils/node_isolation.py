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
server: so every run, of any virtual cluster, sees a node move sides at the same moments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.kosmos.kubenest.plugins.module_utils.globalnodes import agent_pins_of

OWNED_STATES = ("reserved", "occupied", "returning", "held")
# Set on a GlobalNode while its node is on a tenant's side: the NodePorts of that virtual cluster's API server
# (API, Konnectivity). Kept on the cluster-scoped GlobalNode, so a run for one virtual cluster knows every other
# tenant's ports without reading other namespaces.
PORTS_ANNOTATION = "kosmos.io/tenant-api-ports"
MAX_PORTS = 15  # node_firewall's limit per entry; more than that is not ours and counts as none


def _internal_ip(node: Mapping[str, Any]) -> str | None:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP" and address.get("address"):
            return str(address["address"])
    return None


def recorded_ports(global_node: Mapping[str, Any]) -> list[int]:
    """The ports recorded on a GlobalNode; anything that is not a port list counts as none (fail closed)."""
    value = ((global_node.get("metadata") or {}).get("annotations") or {}).get(PORTS_ANNOTATION) or ""
    try:
        ports = sorted({int(part) for part in str(value).split(",") if part.strip()})
    except ValueError:
        return []
    return ports if all(0 < port < 65536 for port in ports) else []


def plan(host_nodes: Iterable[Mapping[str, Any]], global_nodes: Iterable[Mapping[str, Any]]
         ) -> dict[str, dict[str, Any]]:
    """Node name -> {address, side ('host' or namespace/name of its virtual cluster), allow, deny,
    agentCertificates}: the node_firewall arguments of every node the host knows of, in name order, and the agent
    certificates its GlobalNode records (the run that applies them pins the node's agent to those)."""
    global_nodes = list(global_nodes)
    pins = {str((gnode.get("metadata") or {}).get("name") or ""): agent_pins_of(gnode) for gnode in global_nodes}
    in_host = {}
    for node in host_nodes:
        name, address = (node.get("metadata") or {}).get("name"), _internal_ip(node)
        if name and address:
            in_host[str(name)] = address
    tenants: dict[str, dict[str, str]] = {}  # virtual cluster -> node name -> address
    ports: dict[str, set[int]] = {}
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
    tenant_addresses = sorted({a for members in tenants.values() for a in members.values()})
    host_filter = {
        "allow": [{"sources": sorted(members.values()), "tcp_ports": sorted(ports[owner])}
                  for owner, members in sorted(tenants.items())
                  if 0 < len(ports.get(owner, ())) <= MAX_PORTS],
        "deny": tenant_addresses,
    }
    result: dict[str, dict[str, Any]] = {}
    for name, address in in_host.items():
        result[name] = {"address": address, "side": "host", **host_filter}
    for owner, members in tenants.items():
        others = [a for a in tenant_addresses if a not in members.values()]
        for name, address in members.items():
            result[name] = {"address": address, "side": owner, "allow": [], "deny": others}
    for name, entry in result.items():
        entry["agentCertificates"] = pins.get(name, [])
    return dict(sorted(result.items()))
