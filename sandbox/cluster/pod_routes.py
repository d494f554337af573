"""Routes from the sandbox host to the host cluster's pods, like a router on the node network would have.

The controller-manager hands each Node its pod subnet (spec.podCIDR); a node that leaves for a virtual cluster
and comes back may get another one, so the routes follow the Node objects, and routes into the pod range that
no Node holds any more are removed.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess


def _nodes(kubeconfig) -> dict[str, tuple[str, str]]:
    """Node name -> (InternalIP, pod subnet), for the Nodes that have both."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    api = k8s_config.new_client_from_config(str(kubeconfig))
    found = {}
    for node in k8s.CoreV1Api(api).list_node().items:
        ips = [a.address for a in node.status.addresses or [] if a.type == "InternalIP"]
        if ips and node.spec.pod_cidr:
            found[node.metadata.name] = (ips[0], node.spec.pod_cidr)
    return found


def refresh(sb, pod_cidr: str) -> dict[str, str]:
    """Route every Node's pod subnet via that node; drop routes into `pod_cidr` that no Node holds. Returns
    subnet -> node address as routed."""
    wanted = {subnet: ip for ip, subnet in _nodes(sb.state_dir / "kubeconfig").values()}
    pod_range = ipaddress.ip_network(pod_cidr)
    listed = subprocess.run(["ip", "-j", "route", "show", "dev", sb.bridge], check=True, capture_output=True,
                            text=True).stdout
    for route in json.loads(listed or "[]"):
        dst = route.get("dst", "")
        try:
            inside = "/" in dst and ipaddress.ip_network(dst).subnet_of(pod_range)
        except ValueError:
            inside = False
        if inside and wanted.get(dst) != route.get("gateway"):
            subprocess.run(["ip", "route", "del", dst, "dev", sb.bridge], check=False)
    for subnet, ip in wanted.items():
        subprocess.run(["ip", "route", "replace", subnet, "via", ip, "dev", sb.bridge], check=True)
    return wanted
