# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: apiserver_endpoint
short_description: Where a virtual cluster's API server is reached, by its users and by the operator
version_added: 1.4.0
description:
  - From the host Service in front of a virtual cluster's API server and the host nodes its control plane may
    run on (its placement), works out the endpoint its kubeconfig names, the address its readiness is checked at,
    the addresses its serving certificate must name and the port Konnectivity agents dial.
  - C(NodePort) Service, the endpoint is O(external_ip), else O(endpoint_address), else the first Ready
    placement node, at the NodePort. Every placement node answers there and is named by the certificate, so a
    user may use any of them.
  - C(LoadBalancer) Service, the endpoint is O(external_ip), else O(endpoint_address), else the load balancer's
    address, at the Service port (6443). A load balancer given only a host name is named by the certificate.
  - The readiness check goes to the first Ready placement node at the NodePort (a C(LoadBalancer) Service has
    one too), whatever the endpoint says; an external address or a load balancer's VIP may not be reachable
    from where the operator runs (no hairpin). Without any placement node it goes to the endpoint.
  - Fails with what is missing when there is no address to give users (no placement node, no load-balancer
    address yet).
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The API server's Service, as read back after it is applied (C(spec.type), C(spec.ports),
      C(spec.clusterIP), C(status.loadBalancer)).
    type: dict
    required: true
  nodes:
    description: The host Node objects the control plane's placement selects.
    type: list
    elements: dict
    required: true
  external_ip:
    description: The VirtualCluster's C(externalIP).
    type: str
    default: ""
  endpoint_address:
    description: The site's address for every tenant endpoint (C(control_plane_hosted_endpoint_address)).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Choose the tenants' endpoint
  ansible.builtin.set_fact:
    endpoint: "{{ service.result | kosmos.kubenest.apiserver_endpoint(nodes.resources, external_ip='') }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    endpoint:
      description: The URL clients use (C(https://address:port)).
      type: str
    check_url:
      description: The C(/readyz) URL the operator checks readiness at.
      type: str
    ip_addresses:
      description: IP addresses the serving certificate names (besides the Service ranges).
      type: list
      elements: str
    dns_names:
      description: Host names the serving certificate names (a load balancer's).
      type: list
      elements: str
    node_addresses:
      description: The placement nodes' addresses, Ready first, each in name order.
      type: list
      elements: str
    konnectivity_port:
      description: The port Konnectivity agents dial at the endpoint's address (0 without a Konnectivity port).
      type: int
"""

import ipaddress

from ansible.errors import AnsibleFilterError

SERVICE_PORT = 6443
KONNECTIVITY_PORT = 8132


def _ready(node):
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _internal_ip(node):
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP" and address.get("address"):
            return address["address"]
    return ""


def node_addresses(nodes):
    """InternalIPs of the nodes, Ready ones first and each group in name order: the first is a stable choice
    that moves only when its node stops being Ready."""
    ordered = sorted(nodes or [], key=lambda n: (not _ready(n), (n.get("metadata") or {}).get("name") or ""))
    return [ip for ip in (_internal_ip(n) for n in ordered) if ip]


def _url(address, port, path=""):
    host = f"[{address}]" if ":" in address else address
    return f"https://{host}:{port}{path}"


def _is_ip(value):
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _node_port(ports, name):
    for port in ports:
        if port.get("name") == name:
            return int(port.get("nodePort") or 0)
    return 0


def apiserver_endpoint(service, nodes, external_ip="", endpoint_address=""):
    spec = (service or {}).get("spec") or {}
    metadata = (service or {}).get("metadata") or {}
    name = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
    kind = spec.get("type") or "ClusterIP"
    ports = spec.get("ports") or []
    if kind not in ("NodePort", "LoadBalancer"):
        raise AnsibleFilterError(f"Service {name} is of type {kind}: the API server needs NodePort or LoadBalancer")
    node_port = _node_port(ports, "https")
    if not node_port:
        raise AnsibleFilterError(f"Service {name} has no NodePort for its https port")
    addresses = node_addresses(nodes)
    chosen = external_ip or endpoint_address
    dns_names = []
    has_konnectivity = any(p.get("name") == "konnectivity" for p in ports)
    if kind == "LoadBalancer":
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        balancer = (ingress[0].get("ip") or ingress[0].get("hostname") or "") if ingress else ""
        if not balancer:
            raise AnsibleFilterError(f"Service {name} of type LoadBalancer has no load-balancer address yet")
        if not _is_ip(balancer):
            dns_names.append(balancer)
        chosen = chosen or balancer
        port = SERVICE_PORT
        konnectivity_port = KONNECTIVITY_PORT if has_konnectivity else 0
    else:
        balancer = ""
        if not chosen and not addresses:
            raise AnsibleFilterError(
                "no host node matches the control plane's placement (control_plane_hosted_node_selector) and no "
                "externalIP or control_plane_hosted_endpoint_address is given: there is no address for the NodePort")
        chosen = chosen or addresses[0]
        port = node_port
        konnectivity_port = _node_port(ports, "konnectivity")
    ips = [a for a in addresses + [spec.get("clusterIP") or "", "127.0.0.1", external_ip, endpoint_address, balancer]
           if a and _is_ip(a)]
    return {
        "endpoint": _url(chosen, port),
        "check_url": _url(addresses[0], node_port, "/readyz") if addresses else _url(chosen, port, "/readyz"),
        "ip_addresses": list(dict.fromkeys(ips)),
        "dns_names": dns_names,
        "node_addresses": addresses,
        "konnectivity_port": konnectivity_port,
    }


class FilterModule:
    def filters(self):
        return {"apiserver_endpoint": apiserver_endpoint}
