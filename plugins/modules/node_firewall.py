#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_firewall
short_description: Keep the addresses of other clusters' nodes off a node, in one iptables chain
version_added: 1.4.0
description:
  - Run on a node. Keeps the chain O(chain) of the C(mangle) table, entered first from C(PREROUTING), at exactly
    the rules O(allow) and O(deny) give, so packets from the listed sources are judged before any NAT, for the
    node itself and for the pods and Services behind it alike.
  - Replies to connections already set up pass first; then each O(allow) entry lets its sources reach its TCP
    ports (at its destinations only, when it names some); then everything else from a O(deny) source is dropped.
    Other sources are not affected.
  - The chain is replaced in one C(iptables-restore) transaction, so there is no moment with half the rules.
    Idempotent; a chain that already holds the rules reports no change.
  - The chains outlive a reboot. With O(persist), each chain as it was put in force is also kept in
    C(/etc/kubenest/firewall/<chain>.v4) (and C(.v6)), which the unit C(kubenest-firewall.service) (written and
    enabled here, in C(sysinit.target)) restores at boot before the node's network, container runtime and
    kubelet start. A chain that is removed takes its file with it.
  - Runs on one node take turns, holding a lock file per chain under C(/run/lock) (or C(/run)). Runs that move
    several nodes at once, or runs of several virtual clusters, may judge the same node together; each then
    reads what the one before it left.
  - O(allow) and O(deny) are IPv4. IPv6 is closed instead of listed, since a root process on a tenant's node can
    give itself any IPv6 address on the link (a link-local one at the least). With O(ipv6_deny_unlisted), new
    IPv6 connections and datagrams that reach the node on its node-network interface (the one holding
    O(node_address)) are dropped unless they come from O(ipv6_allow); ICMPv6 (neighbour discovery) and DHCPv6
    answers pass. That part lives in a chain of the same name in C(ip6tables)' C(mangle) table, entered from
    C(PREROUTING) for that interface only, so the node's pods and its loopback are not affected.
  - A node whose kernel has no IPv6 needs no IPv6 rules; one with IPv6 but without C(ip6tables) is refused (fail
    closed) rather than left open.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  state:
    description: C(present) keeps the chain at the rules given; C(absent) removes it and its jump.
    type: str
    choices: [present, absent]
    default: present
  chain:
    description:
      - Name of the chain, C(KUBENEST-) and up to 19 capitals, digits, C(-) or C(_). Only this chain and its
        jump from C(PREROUTING) are ever changed.
    type: str
    default: KUBENEST-ISOLATION
  allow:
    description: Sources that may open TCP connections to some ports, before O(deny) applies.
    type: list
    elements: dict
    default: []
    suboptions:
      sources:
        description: IPv4 addresses or networks.
        type: list
        elements: str
        required: true
      tcp_ports:
        description: Destination ports (1-65535), at most 15 per entry.
        type: list
        elements: int
        required: true
      destinations:
        description:
          - IPv4 addresses or networks the packets must be sent to, as they arrive (before any NAT), such as a
            load balancer's address that the node takes traffic for. Empty for any destination.
        type: list
        elements: str
        default: []
        version_added: 1.4.0
  deny:
    description: IPv4 addresses or networks whose new connections and datagrams are dropped.
    type: list
    elements: str
    default: []
  ipv6_deny_unlisted:
    description:
      - Drop new IPv6 from anything not in O(ipv6_allow) on the node's node-network interface (see above). False
        removes the IPv6 chain, if there is one.
    type: bool
    default: false
    version_added: 1.4.0
  ipv6_allow:
    description: IPv6 addresses or networks still let in with O(ipv6_deny_unlisted), such as the host's own nodes
      and pod networks in a dual-stack host cluster.
    type: list
    elements: str
    default: []
    version_added: 1.4.0
  node_address:
    description: The node's IPv4 address on the node network (its InternalIP), which names the interface whose
      IPv6 O(ipv6_deny_unlisted) judges. Required with O(ipv6_deny_unlisted).
    type: str
    version_added: 1.4.0
  persist:
    description: Keep the chains for the next boot (see above). False leaves the files as they are.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reports whether the chain would change, and the diff, without changing it.
  diff_mode:
    support: full
    description: The chain's rules before and after.
"""

EXAMPLES = r"""
- name: The host's control-plane node keeps tenant nodes off, but for their own API server's NodePorts
  kosmos.kubenest.node_firewall:
    allow:
      - sources: [198.18.0.12]
        tcp_ports: [31443, 31132]
    deny: [198.18.0.12, 198.18.0.13]

- name: The same, with the tenant's API server behind a load balancer whose address this node answers for
  kosmos.kubenest.node_firewall:
    allow:
      - sources: [198.18.0.12]
        tcp_ports: [31443, 31132]
      - sources: [198.18.0.12]
        destinations: [198.18.0.250]
        tcp_ports: [6443, 8132]
    deny: [198.18.0.12, 198.18.0.13]

- name: And no IPv6 from anywhere on the node network but the host's own dual-stack addresses
  kosmos.kubenest.node_firewall:
    deny: [198.18.0.12, 198.18.0.13]
    ipv6_deny_unlisted: true
    node_address: 198.18.0.11
    ipv6_allow: [fd00:18::/64]
"""

RETURN = r"""
rules:
  description: The chain's rules as C(iptables -S) prints them (empty with O(state=absent)).
  returned: always
  type: list
  elements: str
rules6:
  description: The IPv6 chain's rules as C(ip6tables -S) prints them (empty without O(ipv6_deny_unlisted), or on a
    node whose kernel has no IPv6).
  returned: always
  type: list
  elements: str
interface:
  description: The node-network interface whose IPv6 is judged (none without O(ipv6_deny_unlisted)).
  returned: always
  type: str
"""

import contextlib
import fcntl
import ipaddress
import os
import re

from ansible.module_utils.basic import AnsibleModule

TABLE = "mangle"
HOOK = "PREROUTING"
MAX_PORTS = 15  # the multiport match's limit
CHAIN_NAME = re.compile(r"^KUBENEST-[A-Z0-9_-]{1,19}$")


class InvalidRule(ValueError):
    pass


def _network(value, what="sources", version=4):
    try:
        net = ipaddress.ip_network(str(value), strict=True)
    except ValueError:
        raise InvalidRule("%r is not an IP address or network" % (value,)) from None
    if net.version != version:
        raise InvalidRule("%s is IPv%d; only IPv%d %s are supported here" % (net, net.version, version, what))
    return str(net) if net.prefixlen != net.max_prefixlen else "%s/%d" % (net.network_address, net.max_prefixlen)


def _ports(values):
    ports = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
            raise InvalidRule("%r is not a TCP port" % (value,))
        if value not in ports:
            ports.append(value)
    if not ports or len(ports) > MAX_PORTS:
        raise InvalidRule("an allow entry needs 1 to %d ports, not %d" % (MAX_PORTS, len(ports)))
    return ports


def _check_chain(chain):
    if not CHAIN_NAME.match(chain):
        raise InvalidRule("%r is not a chain name of ours: KUBENEST- and up to 19 capitals, digits, - or _" % chain)


def chain_rules(chain, allow, deny):
    """The chain's rules, written as `iptables -S` prints them, so they compare equal to what it reads back."""
    _check_chain(chain)
    rules = ["-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN" % chain]
    for entry in allow:
        ports = ",".join(str(p) for p in _ports(entry.get("tcp_ports") or []))
        # iptables -S prints the destination after the source; no destination is written as none.
        destinations = [" -d %s" % _network(d, "destinations") for d in entry.get("destinations") or []] or [""]
        for source in entry.get("sources") or []:
            for destination in destinations:
                rules.append("-A %s -s %s%s -p tcp -m multiport --dports %s -j RETURN"
                             % (chain, _network(source), destination, ports))
    dropped = []
    for source in deny:
        source = _network(source)
        if source not in dropped:
            dropped.append(source)
            rules.append("-A %s -s %s -j DROP" % (chain, source))
    return rules


def chain_rules6(chain, allow):
    """The IPv6 chain, as `ip6tables -S` prints it: answers, neighbour discovery and DHCPv6 answers, the listed
    sources, and nothing else new. Entered only for the node-network interface (see Firewall.jump)."""
    _check_chain(chain)
    rules = ["-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN" % chain,
             "-A %s -p ipv6-icmp -j RETURN" % chain,
             "-A %s -s fe80::/10 -p udp -m udp --dport 546 -j RETURN" % chain]
    listed = []
    for source in allow:
        source = _network(source, "sources in ipv6_allow", version=6)
        if source not in listed:
            listed.append(source)
            rules.append("-A %s -s %s -j RETURN" % (chain, source))
    return rules + ["-A %s -j DROP" % chain]


def restore_script(chain, rules, jump=None):
    """iptables-restore --noflush input: declaring the chain empties it, so the transaction replaces it whole.
    `jump`: the jump rule's match and target (without -A/-I HOOK) to insert first in HOOK, if it is missing."""
    lines = ["*%s" % TABLE, ":%s - [0:0]" % chain] + rules
    if jump:
        lines.append("-I %s 1 %s" % (HOOK, jump))
    return "\n".join(lines + ["COMMIT", ""])


class Firewall:
    """One chain of ours in one family's mangle table and its jump from PREROUTING."""

    def __init__(self, module, chain, family="iptables", interface=None):
        self.module = module
        self.chain = chain
        self.family = family
        self.binary = module.get_bin_path(family, required=family == "iptables")
        # The jump as `iptables -S` prints it, without the "-A PREROUTING" in front.
        self.jump = ("-i %s -j %s" % (interface, chain)) if interface else "-j %s" % chain

    def _run(self, *args):
        return self.module.run_command([self.binary, "-w", "5", *args])

    def current(self):
        """The chain's rules now, or None when there is no such chain."""
        rc, out, _err = self._run("-t", TABLE, "-S", self.chain)
        if rc != 0:
            return None
        return [line for line in out.splitlines() if line.startswith("-A ")]

    def jumps(self):
        """Every jump to the chain from HOOK, as `-S` prints them (without "-A HOOK ")."""
        rc, out, _err = self._run("-t", TABLE, "-S", HOOK)
        if rc != 0:
            return []
        prefix = "-A %s " % HOOK
        return [line[len(prefix):] for line in out.splitlines()
                if line.startswith(prefix) and line.endswith("-j %s" % self.chain)]

    def jumped(self):
        return self.jump in self.jumps()

    def apply(self, rules):
        restore = self.module.get_bin_path(self.family + "-restore", required=True)
        script = restore_script(self.chain, rules, jump=None if self.jumped() else self.jump)
        rc, _out, err = self.module.run_command([restore, "-w", "5", "--noflush"], data=script)
        if rc != 0:
            self.module.fail_json(msg="%s-restore refused the chain %s: %s" % (self.family, self.chain, err.strip()),
                                  rules=rules)
        self._drop_jumps(keep=self.jump)

    def _drop_jumps(self, keep=None):
        for jump in self.jumps():
            if jump == keep:
                continue
            rc, _out, err = self._run("-t", TABLE, "-D", HOOK, *jump.split())
            if rc != 0:
                self.module.fail_json(msg="could not remove the jump to %s: %s" % (self.chain, err.strip()))

    def remove(self):
        self._drop_jumps()
        for op in ("-F", "-X"):
            rc, _out, err = self._run("-t", TABLE, op, self.chain)
            if rc != 0:
                self.module.fail_json(msg="could not remove the chain %s: %s" % (self.chain, err.strip()))

    def stale_jumps(self):
        return [jump for jump in self.jumps() if jump != self.jump]


def ipv6_enabled(interface=None):
    """Whether the kernel speaks IPv6 (on `interface`, when named)."""
    if not os.path.exists("/proc/net/if_inet6"):
        return False
    if interface is None:
        return True
    try:
        with open("/proc/sys/net/ipv6/conf/%s/disable_ipv6" % interface) as fh:
            return fh.read().strip() != "1"
    except OSError:
        return True  # unknown: judge it as open


def interface_of(module, address):
    """The interface holding IPv4 `address`, from `ip -o -4 addr show`."""
    ip = module.get_bin_path("ip", required=True)
    rc, out, err = module.run_command([ip, "-o", "-4", "addr", "show"])
    if rc != 0:
        module.fail_json(msg="could not list the node's addresses: %s" % err.strip())
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "inet" and fields[3].split("/")[0] == address:
            return fields[1].split("@")[0]
    module.fail_json(msg="no interface of this node holds %s (node_address): its IPv6 cannot be judged" % address)
    return None


def _ipv6(module, params):
    """(firewall for the IPv6 chain or None, its wanted rules or None to remove it, the interface judged)."""
    chain = params["chain"]
    if params["state"] != "present" or not params["ipv6_deny_unlisted"]:
        binary = module.get_bin_path("ip6tables")
        return (Firewall(module, chain, "ip6tables") if binary else None), None, ""
    address = params.get("node_address")
    if not address:
        raise InvalidRule("ipv6_deny_unlisted needs node_address, the node's IPv4 address on the node network")
    _network(address, "node_address")
    wanted = chain_rules6(chain, params["ipv6_allow"])
    interface = interface_of(module, address)
    if not ipv6_enabled():
        return None, [], interface  # a kernel without IPv6 takes none, and ip6tables would fail on it
    if not module.get_bin_path("ip6tables"):
        if ipv6_enabled(interface):
            module.fail_json(msg="IPv6 is on at %s but ip6tables is missing: the node would stay open to tenant "
                                 "nodes over IPv6; install ip6tables, or turn IPv6 off there" % interface)
        return None, [], interface
    return Firewall(module, chain, "ip6tables", interface), wanted, interface


PERSIST_DIR = "etc/kubenest/firewall"
UNIT_NAME = "kubenest-firewall.service"
# Runs the kept chains back in at boot; its own directory names where they are (a test runs it elsewhere).
RESTORE_SCRIPT = """#!/bin/sh
# Written by kosmos.kubenest.node_firewall: the node isolation chains as last put in force, back at boot.
set -e
dir=$(dirname "$0")
for file in "$dir"/*.v4; do
    [ -e "$file" ] || continue
    iptables-restore -w 5 --noflush < "$file"
done
for file in "$dir"/*.v6; do
    [ -e "$file" ] || continue
    ip6tables-restore -w 5 --noflush < "$file"
done
"""
UNIT = """[Unit]
Description=kosmos.kubenest node isolation chains, back before the node's services start
DefaultDependencies=no
After=local-fs.target systemd-modules-load.service
Before=network-pre.target containerd.service kubelet.service
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh /%s/restore

[Install]
WantedBy=sysinit.target
""" % PERSIST_DIR


def _write(path, content, mode=0o644):
    """Write `content` to `path` atomically; return whether it changed."""
    try:
        with open(path) as fh:
            if fh.read() == content:
                return False
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as fh:
        fh.write(content)
    os.chmod(tmp, mode)
    os.rename(tmp, path)
    return True


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def persist(root, chain, script4, script6, check_mode=False):
    """Keep the chains' restore input (None: no such chain) for the boot unit; return whether anything changed.
    `root` is "/" on a node."""
    directory = os.path.join(root, PERSIST_DIR)
    wanted = {os.path.join(directory, "%s.v4" % chain): script4, os.path.join(directory, "%s.v6" % chain): script6}
    unit = os.path.join(root, "etc/systemd/system", UNIT_NAME)
    link = os.path.join(root, "etc/systemd/system/sysinit.target.wants", UNIT_NAME)
    if check_mode:
        def same(path, content):
            try:
                with open(path) as fh:
                    return fh.read() == content
            except OSError:
                return content is None
        return not (all(same(path, content) for path, content in wanted.items())
                    and same(os.path.join(directory, "restore"), RESTORE_SCRIPT) and same(unit, UNIT)
                    and os.path.islink(link))
    changed = False
    for path, content in wanted.items():
        changed = (_write(path, content, 0o600) if content is not None else _remove(path)) or changed
    changed = _write(os.path.join(directory, "restore"), RESTORE_SCRIPT, 0o755) or changed
    changed = _write(unit, UNIT) or changed
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink("../%s" % UNIT_NAME, link)
        changed = True
    return changed


def lock_path(chain):
    directory = "/run/lock" if os.path.isdir("/run/lock") else "/run"
    return os.path.join(directory, "kubenest-firewall-%s.lock" % chain.lower())


@contextlib.contextmanager
def one_at_a_time(chain, path=None):
    """Hold the node's lock of `chain` (released when the process ends, however it ends)."""
    fd = os.open(path or lock_path(chain), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def run(module, lock=None, root="/"):
    """`lock`: the lock file's path, `root`: where the boot files go (tests); the node's own by default."""
    try:
        _check_chain(module.params["chain"])
    except InvalidRule as exc:
        module.fail_json(msg=str(exc))
    with one_at_a_time(module.params["chain"], lock):
        _converge(module, root)


def _converge(module, root):
    params = module.params
    try:
        wanted = chain_rules(params["chain"], params["allow"], params["deny"]) if params["state"] == "present" else []
        firewall6, wanted6, interface = _ipv6(module, params)
    except InvalidRule as exc:
        module.fail_json(msg=str(exc))
    firewall = Firewall(module, params["chain"])
    before = firewall.current()
    before6 = firewall6.current() if firewall6 else None
    if params["state"] == "absent":
        changed = before is not None or firewall.jumped()
        if changed and not module.check_mode:
            firewall.remove()
    else:
        changed = before != wanted or not firewall.jumped()
        if changed and not module.check_mode:
            firewall.apply(wanted)
    if firewall6 is not None:
        if wanted6 is None:
            changed6 = before6 is not None or bool(firewall6.jumps())
            if changed6 and not module.check_mode:
                firewall6.remove()
        else:
            changed6 = before6 != wanted6 or not firewall6.jumped() or bool(firewall6.stale_jumps())
            if changed6 and not module.check_mode:
                firewall6.apply(wanted6)
        changed = changed or changed6
    rules6 = wanted6 or []
    if params.get("persist", True):
        present = params["state"] == "present"
        script4 = restore_script(params["chain"], wanted, jump=firewall.jump) if present else None
        script6 = (restore_script(params["chain"], wanted6, jump=firewall6.jump)
                   if present and firewall6 is not None and wanted6 is not None else None)
        changed = persist(root, params["chain"], script4, script6, module.check_mode) or changed
    diff = {"before": "\n".join((before or []) + (before6 or [])) + "\n",
            "after": "\n".join(wanted + rules6) + "\n"}
    module.exit_json(changed=changed, rules=wanted, rules6=rules6, interface=interface, diff=diff)


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "chain": {"type": "str", "default": "KUBENEST-ISOLATION"},
            "allow": {"type": "list", "elements": "dict", "default": [], "options": {
                "sources": {"type": "list", "elements": "str", "required": True},
                "tcp_ports": {"type": "list", "elements": "int", "required": True},
                "destinations": {"type": "list", "elements": "str", "default": []},
            }},
            "deny": {"type": "list", "elements": "str", "default": []},
            "ipv6_deny_unlisted": {"type": "bool", "default": False},
            "ipv6_allow": {"type": "list", "elements": "str", "default": []},
            "node_address": {"type": "str"},
            "persist": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    run(module)


if __name__ == "__main__":
    main()
