"""The sandbox's load balancer: Services of type LoadBalancer get an address on the sandbox's bridge, and TCP
connections to it are forwarded to the Service's NodePort on the host's Ready nodes, as a cloud's network load
balancer does (cloud-provider-kind runs a proxy per Service the same way).

With --mode vip it works as kube-vip's ARP mode (and MetalLB's layer 2 mode) do instead: the address goes on the
interface of one Ready host node (the first by name that is not excluded; moved when that node stops being one),
which answers ARP for it, the ingress says ipMode VIP, and kube-proxy on that node takes the traffic for the
Service port itself. Packets from other machines then reach a host node at the load balancer's address and port,
never at a NodePort.

A stand-in for the load-balancer controller a platform's host cluster has (a cloud's, MetalLB, kube-vip), named
so where it is used: tests/e2e/test_placement.py starts it and checks that it keeps the contract Kubernetes and
clients rely on — the address appears in the Service's status.loadBalancer.ingress (ipMode Proxy: in-cluster
clients go through it too; ipMode VIP: kube-proxy takes it on every node), a connection to it reaches the
Service's pods, nodes that are not Ready or carry node.kubernetes.io/exclude-from-external-load-balancers get no
traffic, and the address goes away with the Service.

    python -m sandbox.loadbalancer [--kubeconfig PATH] [--pool CIDR] [--mode proxy|vip]
    (runs until SIGTERM or SIGINT)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from sandbox.machines.config import Sandbox, from_env
from sandbox.machines.errors import SandboxError
from sandbox.machines.machine import Machine

log = logging.getLogger("sandbox.loadbalancer")
EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
POOL_SIZE = 15  # the top of the sandbox's node range; machines are numbered from the bottom
CONNECT_TIMEOUT = 1.0


def default_pool(sb: Sandbox) -> list[str]:
    return [str(ip) for ip in list(sb.network.hosts())[-POOL_SIZE:]]


def _ready(node: k8s.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def backend_nodes(nodes: list[k8s.V1Node]) -> list[tuple[str, str]]:
    """(name, InternalIP) of the nodes a load balancer sends traffic to, in name order."""
    result = []
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        if not _ready(node) or EXCLUDE_LABEL in (node.metadata.labels or {}):
            continue
        result += [(node.metadata.name, a.address) for a in (node.status.addresses or [])
                   if a.type == "InternalIP"][:1]
    return result


def backends(nodes: list[k8s.V1Node]) -> list[str]:
    """InternalIPs of the nodes a load balancer sends traffic to."""
    return [ip for _name, ip in backend_nodes(nodes)]


def holder(candidates: list[str], current: str | None) -> str | None:
    """The node that answers for an address in VIP mode: the one that does, while it may; else the first."""
    if current in candidates:
        return current
    return candidates[0] if candidates else None


@dataclass
class Balanced:
    """One Service's address and its listeners."""
    key: str
    ip: str
    ports: tuple[tuple[int, int], ...]  # (port, nodePort)
    servers: list[asyncio.AbstractServer] = field(default_factory=list)
    holder: str | None = None  # VIP mode: the node whose interface has the address


class LoadBalancer:
    def __init__(self, api: k8s.ApiClient, bridge: str, pool: list[str], mode: str = "proxy",
                 sb: Sandbox | None = None):
        if mode not in ("proxy", "vip") or (mode == "vip" and sb is None):
            raise ValueError(f"mode {mode!r} (proxy, or vip with the sandbox its nodes run in)")
        self.core = k8s.CoreV1Api(api)
        self.bridge, self.pool, self.mode, self.sb = bridge, pool, mode, sb
        self.balanced: dict[str, Balanced] = {}  # by Service UID
        self.backends: list[str] = []
        self.backend_names: list[str] = []
        self.turn = 0

    async def run(self, stop: asyncio.Event, interval: float = 1.0) -> None:
        try:
            while not stop.is_set():
                try:
                    await self.sync()
                except Exception as exc:  # the API may be briefly away; the next pass tries again
                    log.warning("sync failed: %s", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval)
        finally:
            for uid in list(self.balanced):
                await self.release(uid, clear_status=True)

    async def sync(self) -> None:
        nodes = await asyncio.to_thread(self.core.list_node)
        chosen = backend_nodes(nodes.items)
        self.backends, self.backend_names = [ip for _n, ip in chosen], [name for name, _ip in chosen]
        services = await asyncio.to_thread(self.core.list_service_for_all_namespaces)
        wanted = {s.metadata.uid: s for s in services.items
                  if s.spec.type == "LoadBalancer" and not s.spec.load_balancer_class}
        for uid in [u for u in self.balanced if u not in wanted]:
            await self.release(uid)
        for uid, service in wanted.items():
            ports = tuple((p.port, p.node_port) for p in service.spec.ports or [] if p.protocol in (None, "TCP")
                          and p.node_port)
            entry = self.balanced.get(uid)
            if entry is not None and entry.ports != ports:
                await self.release(uid)
                entry = None
            if entry is None:
                entry = await self.assign(uid, service, ports)
                if entry is None:
                    continue
            if self.mode == "vip":
                await asyncio.to_thread(self.place, entry)
            ingress = (service.status.load_balancer.ingress or []) if service.status.load_balancer else []
            ip_mode = "VIP" if self.mode == "vip" else "Proxy"
            if [(i.ip, i.ip_mode) for i in ingress] != [(entry.ip, ip_mode)]:
                await asyncio.to_thread(
                    self.core.patch_namespaced_service_status, service.metadata.name, service.metadata.namespace,
                    {"status": {"loadBalancer": {"ingress": [{"ip": entry.ip, "ipMode": ip_mode}]}}})
                log.info("%s: %s (%s)", entry.key, entry.ip, ip_mode)

    def place(self, entry: Balanced) -> None:
        """VIP mode: the address on the interface of the node that answers for it, and on no other."""
        wanted = holder(self.backend_names, entry.holder)
        if wanted == entry.holder:
            return
        if entry.holder is not None:
            self._node_address("del", entry.holder, entry.ip)
        entry.holder = None
        if wanted is not None:
            self._node_address("add", wanted, entry.ip)
            entry.holder = wanted
        self._forget_neighbour(entry.ip)
        log.info("%s: %s on %s", entry.key, entry.ip, wanted or "no node")

    def _forget_neighbour(self, ip: str) -> None:
        """What kube-vip's gratuitous ARP does: every machine on the bridge asks again who has the address."""
        subprocess.run(["ip", "neigh", "flush", "to", ip, "dev", self.bridge], capture_output=True, check=False)
        for node in self.sb.nodes:
            with contextlib.suppress(SandboxError, subprocess.TimeoutExpired):
                Machine(self.sb, node).nsenter(["ip", "neigh", "flush", "to", ip], timeout=10, check=False)

    def _node_address(self, action: str, name: str, ip: str) -> None:
        node = next((n for n in self.sb.nodes if n.name == name), None)
        if node is None:
            log.warning("%s is not a machine of the sandbox; %s stays off it", name, ip)
            return
        try:
            proc = Machine(self.sb, node).nsenter(["ip", "addr", action, f"{ip}/32", "dev", "host0"], check=False)
        except (SandboxError, subprocess.TimeoutExpired) as exc:  # a machine that is down has no address to drop
            log.warning("ip addr %s %s on %s: %s", action, ip, name, exc)
            return
        if proc.returncode != 0 and "File exists" not in proc.stderr and "Cannot assign" not in proc.stderr:
            raise RuntimeError(f"ip addr {action} {ip} on {name}: {proc.stderr.strip()}")

    async def assign(self, uid: str, service: k8s.V1Service, ports) -> Balanced | None:
        key = f"{service.metadata.namespace}/{service.metadata.name}"
        used = {b.ip for b in self.balanced.values()}
        free = [ip for ip in self.pool if ip not in used]
        if not free:
            log.warning("%s: the pool is exhausted", key)
            return None
        entry = Balanced(key, free[0], ports)
        if self.mode == "vip":
            self.balanced[uid] = entry
            return entry  # put on a node by sync; nothing listens here
        _address("add", entry.ip, self.bridge)
        for port, node_port in ports:
            entry.servers.append(await asyncio.start_server(
                lambda r, w, np=node_port: self.forward(r, w, np), entry.ip, port))
        self.balanced[uid] = entry
        return entry

    async def release(self, uid: str, clear_status: bool = False) -> None:
        entry = self.balanced.pop(uid)
        for server in entry.servers:
            server.close()
            await server.wait_closed()
        if entry.holder is not None:
            await asyncio.to_thread(self._node_address, "del", entry.holder, entry.ip)
        if self.mode == "proxy":
            _address("del", entry.ip, self.bridge)
        if clear_status:
            namespace, name = entry.key.split("/", 1)
            with contextlib.suppress(Exception):  # already gone
                await asyncio.to_thread(self.core.patch_namespaced_service_status, name, namespace,
                                        {"status": {"loadBalancer": {"ingress": None}}})
        log.info("%s: %s released", entry.key, entry.ip)

    async def forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, node_port: int) -> None:
        """One client connection, to the first backend that accepts, in turn."""
        upstream = None
        targets = list(self.backends)
        self.turn += 1
        for i in range(len(targets)):
            target = targets[(self.turn + i) % len(targets)]
            try:
                upstream = await asyncio.wait_for(asyncio.open_connection(target, node_port), CONNECT_TIMEOUT)
                break
            except (OSError, TimeoutError):
                continue
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, ConnectionError):
        pass
    finally:
        with contextlib.suppress(OSError, ConnectionError):
            writer.close()


def _address(action: str, ip: str, bridge: str) -> None:
    proc = subprocess.run(["ip", "addr", action, f"{ip}/32", "dev", bridge], capture_output=True, text=True,
                          check=False)
    # Adding an address that is there already, or deleting one that is gone: the state is as wanted.
    if proc.returncode != 0 and "File exists" not in proc.stderr and "Cannot assign" not in proc.stderr:
        raise RuntimeError(f"ip addr {action} {ip} dev {bridge}: {proc.stderr.strip()}")


def main(argv: list[str] | None = None) -> int:
    sb = from_env()
    parser = argparse.ArgumentParser(prog="python -m sandbox.loadbalancer",
                                     description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--kubeconfig", type=Path, default=sb.state_dir / "kubeconfig")
    parser.add_argument("--pool", help="addresses to give out (a CIDR on the sandbox's bridge); default: the top "
                        f"{POOL_SIZE} of {sb.cidr}")
    parser.add_argument("--mode", choices=("proxy", "vip"), default="proxy",
                        help="proxy: listen on the bridge and connect to the NodePorts (ipMode Proxy, a cloud's "
                        "network load balancer); vip: put the address on a host node (ipMode VIP, kube-vip)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    pool = [str(ip) for ip in ipaddress.ip_network(args.pool).hosts()] if args.pool else default_pool(sb)
    if not all(ipaddress.ip_address(ip) in sb.network for ip in pool):
        parser.error(f"--pool must lie in the sandbox's node range {sb.cidr}, where its machines reach it")
    api = k8s_config.new_client_from_config(config_file=str(args.kubeconfig))
    balancer = LoadBalancer(api, sb.bridge, pool, args.mode, sb)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await balancer.run(stop)

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
