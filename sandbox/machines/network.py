"""The sandbox bridge on the host. Machines attach with nspawn's --network-bridge (a veth "vb-<machine>" each).

The host takes the first address of the range and nothing is forwarded or NATed: machines reach the host and
each other on the bridge, and nothing else.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import shutil
import subprocess

from .config import Sandbox
from .errors import SandboxError


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    if shutil.which("ip") is None:
        raise SandboxError("the 'ip' command is missing: install the Debian package 'iproute2'")
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise SandboxError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def link(name: str) -> dict | None:
    proc = _ip("-j", "-d", "addr", "show", "dev", name, check=False)
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout or "[]")
    return data[0] if data else None


def bridge_mac(name: str) -> str:
    """A locally administered unicast MAC derived from the bridge name."""
    digest = hashlib.sha256(name.encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


def _check_no_overlap(sb: Sandbox) -> None:
    """Refuse a range that a real network on this host already uses: traffic must not leak into it."""
    net = sb.network
    for route in json.loads(_ip("-j", "route", "show").stdout or "[]"):
        dst = route.get("dst", "")
        if dst in ("", "default") or route.get("dev") == sb.bridge:
            continue
        try:
            other = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            continue
        if other.version == 4 and other.overlaps(net):
            raise SandboxError(f"node range {sb.cidr} overlaps the host route {dst} on {route.get('dev')}; "
                               "choose another KUBENEST_NODE_CIDR")


def ensure_bridge(sb: Sandbox) -> bool:
    """Create and address the bridge if needed; returns whether anything changed."""
    changed = False
    info = link(sb.bridge)
    if info is None:
        _check_no_overlap(sb)
        # A fixed address: a bridge otherwise takes the lowest MAC of its ports, so it changes as machines
        # join and the machines' ARP entries for the host go stale (connections time out for a while).
        _ip("link", "add", sb.bridge, "address", bridge_mac(sb.bridge), "type", "bridge")
        changed = True
        info = link(sb.bridge)
    kind = (info.get("linkinfo") or {}).get("info_kind")
    if kind != "bridge":
        raise SandboxError(f"interface {sb.bridge} exists but is a {kind or 'non-bridge'} link; "
                           "choose another KUBENEST_BRIDGE")
    addrs = {f"{a['local']}/{a['prefixlen']}" for a in info.get("addr_info", []) if a.get("family") == "inet"}
    if sb.host_cidr not in addrs:
        _ip("addr", "add", sb.host_cidr, "dev", sb.bridge)
        changed = True
    # No IPv6 at all on the bridge: no link-local chatter, no router solicitations.
    try:
        with open(f"/proc/sys/net/ipv6/conf/{sb.bridge}/disable_ipv6", "r+") as fh:
            if fh.read().strip() != "1":
                fh.write("1")
    except FileNotFoundError:
        pass
    if "UP" not in info.get("flags", []):
        _ip("link", "set", sb.bridge, "up")
        changed = True
    return changed


def delete_link(name: str) -> bool:
    if link(name) is None:
        return False
    _ip("link", "del", name)
    return True
