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
  - IPv4 only.
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
"""

RETURN = r"""
rules:
  description: The chain's rules as C(iptables -S) prints them (empty with O(state=absent)).
  returned: always
  type: list
  elements: str
"""

import ipaddress
import re

from ansible.module_utils.basic import AnsibleModule

TABLE = "mangle"
HOOK = "PREROUTING"
MAX_PORTS = 15  # the multiport match's limit
CHAIN_NAME = re.compile(r"^KUBENEST-[A-Z0-9_-]{1,19}$")


class InvalidRule(ValueError):
    pass


def _network(value, what="sources"):
    try:
        net = ipaddress.ip_network(str(value), strict=True)
    except ValueError:
        raise InvalidRule("%r is not an IP address or network" % (value,)) from None
    if net.version != 4:
        raise InvalidRule("%s is IPv6; only IPv4 %s are supported" % (net, what))
    return str(net) if net.prefixlen != 32 else "%s/32" % net.network_address


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


def chain_rules(chain, allow, deny):
    """The chain's rules, written as `iptables -S` prints them, so they compare equal to what it reads back."""
    if not CHAIN_NAME.match(chain):
        raise InvalidRule("%r is not a chain name of ours: KUBENEST- and up to 19 capitals, digits, - or _" % chain)
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


def restore_script(chain, rules, add_jump):
    """iptables-restore --noflush input: declaring the chain empties it, so the transaction replaces it whole."""
    lines = ["*%s" % TABLE, ":%s - [0:0]" % chain] + rules
    if add_jump:
        lines.append("-I %s 1 -j %s" % (HOOK, chain))
    return "\n".join(lines + ["COMMIT", ""])


class Firewall:
    def __init__(self, module, chain):
        self.module = module
        self.chain = chain
        self.iptables = module.get_bin_path("iptables", required=True)

    def _iptables(self, *args):
        return self.module.run_command([self.iptables, "-w", "5", *args])

    def current(self):
        """The chain's rules now, or None when there is no such chain."""
        rc, out, _err = self._iptables("-t", TABLE, "-S", self.chain)
        if rc != 0:
            return None
        return [line for line in out.splitlines() if line.startswith("-A ")]

    def jumped(self):
        rc, _out, _err = self._iptables("-t", TABLE, "-C", HOOK, "-j", self.chain)
        return rc == 0

    def apply(self, rules):
        restore = self.module.get_bin_path("iptables-restore", required=True)
        script = restore_script(self.chain, rules, add_jump=not self.jumped())
        rc, _out, err = self.module.run_command([restore, "-w", "5", "--noflush"], data=script)
        if rc != 0:
            self.module.fail_json(msg="iptables-restore refused the chain %s: %s" % (self.chain, err.strip()),
                                  rules=rules)

    def remove(self):
        while self.jumped():
            rc, _out, err = self._iptables("-t", TABLE, "-D", HOOK, "-j", self.chain)
            if rc != 0:
                self.module.fail_json(msg="could not remove the jump to %s: %s" % (self.chain, err.strip()))
        for op in ("-F", "-X"):
            rc, _out, err = self._iptables("-t", TABLE, op, self.chain)
            if rc != 0:
                self.module.fail_json(msg="could not remove the chain %s: %s" % (self.chain, err.strip()))


def run(module):
    params = module.params
    try:
        wanted = chain_rules(params["chain"], params["allow"], params["deny"]) if params["state"] == "present" else []
    except InvalidRule as exc:
        module.fail_json(msg=str(exc))
    firewall = Firewall(module, params["chain"])
    before = firewall.current()
    if params["state"] == "absent":
        changed = before is not None or firewall.jumped()
        if changed and not module.check_mode:
            firewall.remove()
    else:
        changed = before != wanted or not firewall.jumped()
        if changed and not module.check_mode:
            firewall.apply(wanted)
    diff = {"before": "\n".join(before or []) + "\n", "after": "\n".join(wanted) + "\n"}
    module.exit_json(changed=changed, rules=wanted, diff=diff)


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
        },
        supports_check_mode=True,
    )
    run(module)


if __name__ == "__main__":
    main()
