"""What the sandbox looks like: state and cache locations, the bridge, the address range and the node list."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SandboxError

REPO_ROOT = Path(__file__).resolve().parents[2]
# RFC 2544 benchmarking range: never a real network, so nothing here can be mistaken for one.
DEFAULT_CIDR = "198.18.0.0/24"
DEFAULT_BRIDGE = "knbr0"
DEFAULT_CONTROL_PLANES = 1
DEFAULT_WORKERS = 3
DEFAULT_PREFIX = "kn"  # machine names: <prefix>-cp1, <prefix>-w1, ...
FIRST_NODE_HOST = 11  # nodes get .11, .12, ...; the host side of the bridge gets .1
AGENT_PORT = 7443
# Linux interface names are at most 15 characters; nspawn names the host end of a veth "vb-<machine>".
IFNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$")
MACHINE_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$")
# What every run on the sandbox's machines is told about their network (site, group or extra variables):
# nothing outside it may be reached, so names outside a cluster get NXDOMAIN at once; and the machines have no
# default route, from which a pod network would learn the MTU of their interface (the bridge's veths).
NETWORK_VARS = {"kubenest_dns_upstream": [], "kubenest_node_mtu": 1500}
# The image archives the sandbox's host gives each node at bootstrap; the host's own workloads run them without
# pulling. Every run that may return a node is told of them, so a returned node gets them again after its wipe.
HOST_NODE_IMAGES = ["pause", "echo", "coredns", "cilium", "cilium-operator"]
RETURN_VARS = {"node_promote_host_images": HOST_NODE_IMAGES}


@dataclass(frozen=True)
class Node:
    name: str
    ip: str
    role: str  # "control_plane" or "workers": the inventory group

    @property
    def veth(self) -> str:
        return f"vb-{self.name}"


@dataclass(frozen=True)
class Sandbox:
    state_dir: Path
    cache_dir: Path
    bridge: str = DEFAULT_BRIDGE
    cidr: str = DEFAULT_CIDR
    control_planes: int = DEFAULT_CONTROL_PLANES
    workers: int = DEFAULT_WORKERS
    prefix: str = DEFAULT_PREFIX
    nodes: tuple[Node, ...] = field(init=False)

    def __post_init__(self):
        if not IFNAME_RE.match(self.bridge):
            raise SandboxError(f"bridge name {self.bridge!r} is not a valid interface name (1-15 of [A-Za-z0-9_.-])")
        if self.control_planes < 1:
            raise SandboxError(f"need at least one control-plane node, got {self.control_planes}")
        if self.workers < 0:
            raise SandboxError(f"worker count must not be negative, got {self.workers}")
        net = self.network
        names = [f"{self.prefix}-cp{i}" for i in range(1, self.control_planes + 1)]
        names += [f"{self.prefix}-w{i}" for i in range(1, self.workers + 1)]
        hosts = list(net.hosts())
        if FIRST_NODE_HOST - 1 + len(names) > len(hosts):
            room = max(0, len(hosts) - FIRST_NODE_HOST + 1)
            raise SandboxError(f"{len(names)} nodes do not fit in {self.cidr}: it has room for {room} "
                               f"(nodes start at host number {FIRST_NODE_HOST})")
        for name in names:
            if not MACHINE_NAME_RE.match(name):
                raise SandboxError(f"machine name {name!r} is invalid: lower-case letters, digits and '-', "
                                   "at most 12 characters (its veth is named vb-<name>)")
        nodes = tuple(Node(name, str(hosts[FIRST_NODE_HOST - 1 + i]),
                           "control_plane" if name.startswith(f"{self.prefix}-cp") else "workers")
                      for i, name in enumerate(names))
        object.__setattr__(self, "nodes", nodes)

    @property
    def network(self) -> ipaddress.IPv4Network:
        try:
            net = ipaddress.ip_network(self.cidr, strict=True)
        except ValueError as exc:
            raise SandboxError(f"bad node CIDR {self.cidr!r}: {exc}") from None
        if net.version != 4:
            raise SandboxError(f"node CIDR {self.cidr!r} must be IPv4")
        return net

    @property
    def host_ip(self) -> str:
        return str(next(self.network.hosts()))

    @property
    def host_cidr(self) -> str:
        return f"{self.host_ip}/{self.network.prefixlen}"

    def node_cidr(self, node: Node) -> str:
        return f"{node.ip}/{self.network.prefixlen}"

    # Layout of the state directory (git-ignored, at the repo root by default).
    @property
    def machines_dir(self) -> Path:
        return self.state_dir / "machines"

    def machine_dir(self, name: str) -> Path:
        return self.machines_dir / name

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def inventory_path(self) -> Path:
        return self.state_dir / "inventory.yml"

    @property
    def cgroup_group(self) -> str:
        """Parent cgroup (below the booting process's own) of this sandbox's machines."""
        return f"kubenest-{self.bridge}"

    @property
    def settings_path(self) -> Path:
        return self.state_dir / "machines.json"

    def settings(self) -> dict:
        """What must not change under running machines (see cli.up)."""
        return {"bridge": self.bridge, "cidr": self.cidr, "prefix": self.prefix}


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise SandboxError(f"{name} must be an integer, got {value!r}") from None


def from_env(**overrides) -> Sandbox:
    """Settings from KUBENEST_* variables; explicit (non-None) overrides win."""
    values = {
        "state_dir": Path(os.environ.get("KUBENEST_SANDBOX_DIR") or REPO_ROOT / ".sandbox"),
        "cache_dir": Path(os.environ.get("KUBENEST_CACHE") or Path.home() / ".cache" / "kubenest"),
        "bridge": os.environ.get("KUBENEST_BRIDGE") or DEFAULT_BRIDGE,
        "cidr": os.environ.get("KUBENEST_NODE_CIDR") or DEFAULT_CIDR,
        "control_planes": _int_env("KUBENEST_CONTROL_PLANES", DEFAULT_CONTROL_PLANES),
        "workers": _int_env("KUBENEST_WORKERS", DEFAULT_WORKERS),
        "prefix": os.environ.get("KUBENEST_NODE_PREFIX") or DEFAULT_PREFIX,
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    values["state_dir"] = Path(values["state_dir"]).absolute()
    values["cache_dir"] = Path(values["cache_dir"]).absolute()
    return Sandbox(**values)
