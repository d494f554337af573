"""node_firewall on real iptables and real traffic: a "node" network namespace with two "tenant nodes" wired to it.

The first tenant node may reach one port, which a DNAT rule (as kube-proxy makes for a NodePort) sends to a
listener on another port: the chain judges the packet before NAT. Everything else from both is dropped, while
connections the node opens itself still get their answers. The node also answers for a load balancer's address
(as a MetalLB or kube-vip node does), which kube-proxy's rule sends on the same way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from ansible_collections.kosmos.kubenest.plugins.modules import node_firewall

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("iptables") is None,
                                reason="needs root and iptables")
CHAIN = "KUBENEST-ISOLATION"
NODE_PORT, LISTENER, OTHER = 31001, 8080, 31002
VIP, VIP_PORT = "10.77.9.9", 6443
LISTEN = """
import socket, sys
servers = []
for port in map(int, sys.argv[1:]):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", port))
    s.listen(16); s.setblocking(False); servers.append(s)
import selectors
sel = selectors.DefaultSelector()
for s in servers:
    sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        conn, _ = key.fileobj.accept(); conn.close()
"""

# The same on IPv6 only (beside the IPv4 listeners on the same ports).
LISTEN6 = (LISTEN.replace("socket.socket()", "socket.socket(socket.AF_INET6)").replace('"0.0.0.0"', '"::"')
           .replace("s.bind(", "s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1); s.bind("))


class Done(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


class NamespacedModule:
    """The module's interface, running its commands for real inside the namespace."""

    def __init__(self, netns, check_mode=False, **params):
        self.netns, self.check_mode = netns, check_mode
        # The boot files are the last test's: the others leave the machine's /etc alone.
        self.params = {"state": "present", "chain": CHAIN, "allow": [], "deny": [], "ipv6_deny_unlisted": False,
                       "ipv6_allow": [], "node_address": None, "persist": False, **params}

    def get_bin_path(self, name, required=False):
        return shutil.which(name)

    def run_command(self, argv, data=None):
        proc = subprocess.run(["ip", "netns", "exec", self.netns, *argv], input=data, capture_output=True,
                              text=True, timeout=60, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    def exit_json(self, **result):
        raise Done(result)

    def fail_json(self, **result):
        raise AssertionError(result)


def _module(netns, **kwargs):
    try:
        node_firewall.run(NamespacedModule(netns, **kwargs))
    except Done as done:
        return done.result
    raise AssertionError("the module did not exit")


def _ns(netns, *argv, check=True):
    return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True, timeout=60,
                          check=check)


def _connects(netns, address, port) -> bool:
    probe = f"import socket; socket.create_connection(({address!r}, {port}), 1).close()"
    return _ns(netns, sys.executable, "-c", probe, check=False).returncode == 0


@pytest.fixture
def wired():
    """node <-veth-> tenant1 (10.77.1.0/24), node <-veth-> tenant2 (10.77.2.0/24); listeners on all three."""
    tag = uuid.uuid4().hex[:6]
    names = {"node": f"knfw-n-{tag}", "t1": f"knfw-a-{tag}", "t2": f"knfw-b-{tag}"}
    listeners = []
    try:
        for name in names.values():
            subprocess.run(["ip", "netns", "add", name], check=True)
            _ns(name, "ip", "link", "set", "lo", "up")
        for i, tenant in ((1, "t1"), (2, "t2")):
            here, there = f"kfw{i}n{tag}", f"kfw{i}t{tag}"
            subprocess.run(["ip", "link", "add", here, "netns", names["node"], "type", "veth", "peer", "name", there,
                            "netns", names[tenant]], check=True)
            _ns(names["node"], "ip", "addr", "add", f"10.77.{i}.1/24", "dev", here)
            _ns(names["node"], "ip", "link", "set", here, "up")
            _ns(names[tenant], "ip", "addr", "add", f"10.77.{i}.2/24", "dev", there)
            _ns(names[tenant], "ip", "link", "set", there, "up")
            _ns(names[tenant], "ip", "route", "add", f"{VIP}/32", "via", f"10.77.{i}.1")
        # A NodePort the kube-proxy way: the port tenants dial is sent on to the listener before routing.
        _ns(names["node"], "iptables", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", str(NODE_PORT),
            "-j", "REDIRECT", "--to-ports", str(LISTENER))
        # A load balancer's address the node takes traffic for, and kube-proxy's rule for its Service port.
        _ns(names["node"], "ip", "addr", "add", f"{VIP}/32", "dev", "lo")
        _ns(names["node"], "iptables", "-t", "nat", "-A", "PREROUTING", "-d", f"{VIP}/32", "-p", "tcp", "--dport",
            str(VIP_PORT), "-j", "REDIRECT", "--to-ports", str(LISTENER))
        for name, ports in ((names["node"], [LISTENER, OTHER]), (names["t1"], [9000]), (names["t2"], [9000])):
            listeners.append(subprocess.Popen(["ip", "netns", "exec", name, sys.executable, "-c", LISTEN,
                                               *map(str, ports)]))
        assert all(_wait_listening(names[n], p) for n, p in (("node", LISTENER), ("t1", 9000), ("t2", 9000)))
        yield names
    finally:
        for proc in listeners:
            proc.kill()
            proc.wait(10)
        for name in names.values():
            subprocess.run(["ip", "netns", "delete", name], check=False)


def _wait_listening(netns, port) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if _connects(netns, "127.0.0.1", port):
            return True
        time.sleep(0.1)
    return False


def test_the_chain_lets_a_tenant_node_reach_only_its_port_and_keeps_the_rest_out(wired):
    node, t1, t2 = wired["node"], wired["t1"], wired["t2"]
    assert _connects(t1, "10.77.1.1", NODE_PORT) and _connects(t2, "10.77.2.1", OTHER)  # open before

    allow = [{"sources": ["10.77.1.2"], "tcp_ports": [NODE_PORT]}]
    deny = ["10.77.1.2", "10.77.2.2"]
    planned = _module(node, check_mode=True, allow=allow, deny=deny)
    assert planned["changed"] and _ns(node, "iptables", "-t", "mangle", "-S", CHAIN, check=False).returncode != 0

    applied = _module(node, allow=allow, deny=deny)
    assert applied["changed"]
    listed = _ns(node, "iptables", "-t", "mangle", "-S", CHAIN).stdout.splitlines()
    assert [line for line in listed if line.startswith("-A")] == applied["rules"]
    prerouting = _ns(node, "iptables", "-t", "mangle", "-S", "PREROUTING").stdout.splitlines()
    assert prerouting[1] == f"-A PREROUTING -j {CHAIN}"  # first, before anything else judges the packet

    assert _connects(t1, "10.77.1.1", NODE_PORT)  # judged on the port it dialled, before the DNAT
    assert not _connects(t1, "10.77.1.1", OTHER)
    assert not _connects(t1, "10.77.1.1", LISTENER)
    assert not _connects(t2, "10.77.2.1", NODE_PORT)
    assert not _connects(t2, "10.77.2.1", OTHER)
    assert _connects(node, "10.77.1.2", 9000) and _connects(node, "10.77.2.2", 9000)  # answers come back

    assert _module(node, allow=allow, deny=deny)["changed"] is False  # idempotent
    narrowed = _module(node, allow=[], deny=["10.77.2.2"])  # the first tenant node went back to the host
    assert narrowed["changed"] and _connects(t1, "10.77.1.1", OTHER) and not _connects(t2, "10.77.2.1", OTHER)

    assert _module(node, state="absent")["changed"]
    assert _connects(t2, "10.77.2.1", OTHER)
    assert f"-j {CHAIN}" not in _ns(node, "iptables", "-t", "mangle", "-S").stdout
    assert _module(node, state="absent")["changed"] is False


def test_a_chain_emptied_behind_its_back_is_filled_again(wired):
    node, t2 = wired["node"], wired["t2"]
    _module(node, deny=["10.77.2.2"])
    _ns(node, "iptables", "-t", "mangle", "-F", CHAIN)
    _ns(node, "iptables", "-t", "mangle", "-D", "PREROUTING", "-j", CHAIN)
    assert _connects(t2, "10.77.2.1", OTHER)
    assert _module(node, deny=["10.77.2.2"])["changed"]
    assert not _connects(t2, "10.77.2.1", OTHER)


def test_a_tenant_node_reaches_its_load_balancers_address_at_its_port_and_nothing_else_there(wired):
    node, t1, t2 = wired["node"], wired["t1"], wired["t2"]
    assert _connects(t1, VIP, VIP_PORT) and _connects(t2, VIP, VIP_PORT)  # open before
    allow = [{"sources": ["10.77.1.2"], "tcp_ports": [NODE_PORT]},
             {"sources": ["10.77.1.2"], "destinations": [VIP], "tcp_ports": [VIP_PORT]}]
    deny = ["10.77.1.2", "10.77.2.2"]
    applied = _module(node, allow=allow, deny=deny)
    listed = _ns(node, "iptables", "-t", "mangle", "-S", CHAIN).stdout.splitlines()
    assert [line for line in listed if line.startswith("-A")] == applied["rules"]
    assert _module(node, allow=allow, deny=deny)["changed"] is False  # reads back as written

    assert _connects(t1, VIP, VIP_PORT)  # at the address, judged before kube-proxy's NAT
    assert not _connects(t1, "10.77.1.1", VIP_PORT)  # the same port at the node's own address
    assert not _connects(t1, VIP, OTHER)  # another port at the address
    assert not _connects(t2, VIP, VIP_PORT)  # another tenant's node at the address
    assert _connects(t1, "10.77.1.1", NODE_PORT)

    # Without the pair (the rules before load balancers were known), the tenant node is kept off its API server.
    _module(node, allow=allow[:1], deny=deny)
    assert not _connects(t1, VIP, VIP_PORT)


def _connects_from(netns, address, port, source=None) -> bool:
    bind = f", source_address=({source!r}, 0)" if source else ""
    probe = f"import socket; socket.create_connection(({address!r}, {port}), 1{bind}).close()"
    return _ns(netns, sys.executable, "-c", probe, check=False).returncode == 0


@pytest.mark.skipif(shutil.which("ip6tables") is None, reason="needs ip6tables")
def test_a_tenant_node_gets_nothing_in_over_ipv6_even_from_an_address_it_gave_itself(wired):
    """The attacker is root on the first tenant node: it can put any IPv6 address on the link, a link-local one
    at the least, which no IPv4 rule names."""
    node, t1 = wired["node"], wired["t1"]
    link, peer = _holder(node, "10.77.1.1"), _holder(t1, "10.77.1.2")
    for netns, dev, addresses in ((node, link, ["fe80::1/64", "fd77:1::1/64"]),
                                  (t1, peer, ["fe80::2/64", "fd77:1::2/64"])):
        _ns(netns, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=0")
        for address in addresses:
            _ns(netns, "ip", "-6", "addr", "add", address, "dev", dev, "nodad")
    # The listed one, deprecated so that only a connection bound to it takes it as its source.
    _ns(t1, "ip", "-6", "addr", "add", "fd77:1::3/64", "dev", peer, "nodad", "preferred_lft", "0")
    _ns(node, "ip", "-6", "addr", "add", "::1/128", "dev", "lo", check=False)
    listeners = [subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", LISTEN6, str(port)])
                 for netns, port in ((node, OTHER), (t1, 9000))]
    try:
        _judge_ipv6(node, t1, link, peer)
    finally:
        for proc in listeners:
            proc.kill()
            proc.wait(10)


def _holder(netns, address):
    for line in _ns(netns, "ip", "-o", "-4", "addr", "show").stdout.splitlines():
        if f" {address}/" in line:
            return line.split()[1].split("@")[0]
    raise AssertionError(f"no interface holds {address} in {netns}")


def _judge_ipv6(node, t1, link, peer):
    deadline = time.monotonic() + 10
    while not _connects_from(t1, f"fe80::1%{peer}", OTHER) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _connects_from(t1, f"fe80::1%{peer}", OTHER)  # open before: the IPv4 rules never see this
    assert _connects_from(t1, "fd77:1::1", OTHER)

    params = {"deny": ["10.77.1.2"], "ipv6_deny_unlisted": True, "node_address": "10.77.1.1",
              "ipv6_allow": ["fd77:1::3"]}
    applied = _module(node, **params)
    assert applied["changed"] and applied["interface"] == link
    listed = _ns(node, "ip6tables", "-t", "mangle", "-S", CHAIN).stdout.splitlines()
    assert [line for line in listed if line.startswith("-A")] == applied["rules6"]
    assert f"-A PREROUTING -i {link} -j {CHAIN}" in _ns(node, "ip6tables", "-t", "mangle", "-S", "PREROUTING").stdout
    assert _module(node, **params)["changed"] is False  # reads back as written

    assert not _connects_from(t1, f"fe80::1%{peer}", OTHER)  # link-local
    assert not _connects_from(t1, "fd77:1::1", OTHER)
    assert not _connects_from(t1, "fd77:1::1", OTHER, source="fd77:1::2")
    assert _connects_from(t1, "fd77:1::1", OTHER, source="fd77:1::3")  # listed (say, a dual-stack host node)
    assert _connects_from(node, "fd77:1::2", 9000)  # what the node opens itself gets its answers
    assert _connects_from(node, "::1", OTHER)  # loopback is not judged
    assert not _connects_from(t1, "10.77.1.1", OTHER)  # and IPv4 as before

    # Without a node_address the IPv6 part cannot be placed: refused, nothing changed.
    with pytest.raises(AssertionError, match="needs node_address"):
        _module(node, deny=["10.77.1.2"], ipv6_deny_unlisted=True)
    with pytest.raises(AssertionError, match="no interface of this node holds 10.77.9.1"):
        _module(node, deny=["10.77.1.2"], ipv6_deny_unlisted=True, node_address="10.77.9.1")
    assert not _connects_from(t1, "fd77:1::1", OTHER)

    # No tenant node any more: the IPv6 chain goes with the IPv4 one.
    assert _module(node, deny=[])["changed"]
    assert _ns(node, "ip6tables", "-t", "mangle", "-S", CHAIN, check=False).returncode != 0
    assert _connects_from(t1, "fd77:1::1", OTHER)
    assert _module(node, state="absent")["changed"]
    assert _module(node, state="absent")["changed"] is False


def _remove_at_once(node, lock, barrier, outcomes):
    barrier.wait()
    try:
        node_firewall.run(NamespacedModule(node, state="absent"), lock=lock)
    except Done as done:
        outcomes.append(("done", done.result["changed"]))
    except AssertionError as exc:
        outcomes.append(("failed", str(exc)))


def test_runs_that_judge_the_same_node_at_once_take_turns(wired, tmp_path):
    """Two nodes returned together each put the plan in force on every node (and runs of other virtual clusters
    may too): on one node their reads and writes of the chain used to interleave, and the second removal of a
    jump found it gone ("Bad rule"), failing the return. With the node's lock each reads what the one before
    left."""
    import threading

    node, lock = wired["node"], str(tmp_path / "firewall.lock")
    for _round in range(5):
        try:
            node_firewall.run(NamespacedModule(node, deny=["10.77.1.2"]), lock=lock)
        except Done as done:
            assert done.result["rules"]
        barrier, outcomes = threading.Barrier(4), []
        threads = [threading.Thread(target=_remove_at_once, args=(node, lock, barrier, outcomes))
                   for _thread in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sorted(outcomes) == [("done", False)] * 3 + [("done", True)], outcomes
        assert _ns(node, "iptables", "-t", "mangle", "-S", CHAIN, check=False).returncode != 0


def test_the_chains_come_back_after_a_reboot_from_what_the_last_run_kept(wired, tmp_path):
    """A reboot empties the kernel's tables. What the run put in force is kept for the boot unit, whose script
    (run here in a fresh namespace, as at boot) puts it back: the first tenant node is kept out again."""
    node, t1 = wired["node"], wired["t1"]
    root, lock = tmp_path / "root", str(tmp_path / "firewall.lock")
    params = {"deny": ["10.77.1.2"], "allow": [{"sources": ["10.77.1.2"], "tcp_ports": [NODE_PORT]}],
              "persist": True}

    def run(netns, **extra):
        try:
            node_firewall.run(NamespacedModule(netns, **{**params, **extra}), lock=lock, root=str(root))
        except Done as done:
            return done.result
        raise AssertionError("the module did not exit")

    first = run(node)
    assert first["changed"] and not _connects(t1, "10.77.1.1", OTHER)
    kept = root / "etc/kubenest/firewall"
    assert (kept / f"{CHAIN}.v4").read_text().startswith("*mangle\n")
    unit = (root / "etc/systemd/system/kubenest-firewall.service").read_text()
    assert "ExecStart=/bin/sh /etc/kubenest/firewall/restore" in unit and "Before=network-pre.target" in unit
    assert (root / "etc/systemd/system/sysinit.target.wants/kubenest-firewall.service").resolve() == \
        (root / "etc/systemd/system/kubenest-firewall.service")
    assert run(node)["changed"] is False  # kept as it is in force
    (kept / f"{CHAIN}.v4").unlink()  # a node whose chain predates keeping it
    try:
        node_firewall.run(NamespacedModule(node, check_mode=True, **params), lock=lock, root=str(root))
    except Done as done:
        assert done.result["changed"] and not (kept / f"{CHAIN}.v4").exists()  # check mode writes nothing
    assert run(node)["changed"] and (kept / f"{CHAIN}.v4").exists()

    # "Reboot": the node's tables emptied, as a fresh boot has them; the boot unit's script restores them.
    _ns(node, "iptables", "-t", "mangle", "-D", "PREROUTING", "-j", CHAIN)
    _ns(node, "iptables", "-t", "mangle", "-F", CHAIN)
    _ns(node, "iptables", "-t", "mangle", "-X", CHAIN)
    assert _connects(t1, "10.77.1.1", OTHER)  # open: what a rebooted node was until now
    _ns(node, "sh", str(kept / "restore"))
    assert not _connects(t1, "10.77.1.1", OTHER) and _connects(t1, "10.77.1.1", NODE_PORT)
    assert run(node)["changed"] is False  # exactly what the run puts in force, jump included

    # Removed: the kept chain goes too, so a reboot brings back nothing.
    assert run(node, state="absent")["changed"]
    assert not (kept / f"{CHAIN}.v4").exists()
    _ns(node, "sh", str(kept / "restore"))
    assert _ns(node, "iptables", "-t", "mangle", "-S", CHAIN, check=False).returncode != 0
