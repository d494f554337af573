"""node_reset removes the CNI plugins' chains and the rules jumping into them from real iptables, in a network
namespace of the test's own: a rule whose comment holds quoted words (the bridge plugin's masquerade rule) is
deleted too, and the chain with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest
from ansible_collections.kosmos.kubenest.plugins.modules.node_reset import Reset

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("iptables") is None,
                                reason="needs root and iptables")
CHAIN = "CNI-04f617d3bc040b850231434f"
COMMENT = 'name: "kubenest-tenant" id: "db608c2647e0bb7a7007929e2a720bb57254ec5e2dd8d844df0e5a1e48604b0b"'


class NamespacedModule:
    """Runs the module's commands for real, inside the namespace."""

    check_mode = False

    def __init__(self, netns):
        self.netns = netns

    def get_bin_path(self, name, required=False):
        return shutil.which(name)

    def run_command(self, argv, data=None, binary_data=False):
        proc = subprocess.run(["ip", "netns", "exec", self.netns, *argv], input=data, capture_output=True,
                              text=True, timeout=60, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs)


@pytest.fixture
def netns():
    name = "knreset-" + uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", name], check=True)
    yield name
    subprocess.run(["ip", "netns", "delete", name], check=False)


def _iptables(netns, *argv):
    subprocess.run(["ip", "netns", "exec", netns, "iptables", *argv], check=True, capture_output=True, timeout=60)


def _saved(netns):
    return subprocess.run(["ip", "netns", "exec", netns, "iptables-save"], check=True, capture_output=True,
                          text=True, timeout=60).stdout


def test_cni_masquerade_rule_with_a_quoted_comment_and_its_chain_go_away(netns):
    _iptables(netns, "-t", "nat", "-N", CHAIN)
    _iptables(netns, "-t", "nat", "-A", CHAIN, "-d", "198.18.64.0/24", "-m", "comment", "--comment", COMMENT,
              "-j", "ACCEPT")
    _iptables(netns, "-t", "nat", "-A", "POSTROUTING", "-s", "198.18.64.2/32", "-m", "comment", "--comment",
              COMMENT, "-j", CHAIN)
    _iptables(netns, "-t", "nat", "-A", "POSTROUTING", "-s", "10.1.0.0/16", "-j", "MASQUERADE")  # not ours
    _iptables(netns, "-t", "filter", "-N", "CNI-FORWARD")
    _iptables(netns, "-t", "filter", "-A", "FORWARD", "-m", "comment", "--comment",
              "CNI firewall plugin rules", "-j", "CNI-FORWARD")
    assert COMMENT.split()[0] in _saved(netns)

    reset = Reset(NamespacedModule(netns))
    reset.iptables("/nonexistent/kube-proxy")
    saved = _saved(netns)
    assert "CNI-" not in saved and "198.18.64" not in saved, saved
    assert "-A POSTROUTING -s 10.1.0.0/16 -j MASQUERADE" in saved
    assert sorted(reset.result["chains"]) == ["filter/CNI-FORWARD", f"nat/{CHAIN}"]

    again = Reset(NamespacedModule(netns))
    again.iptables("/nonexistent/kube-proxy")
    assert again.result["chains"] == []  # nothing left to find: a clean node reports no change


def test_cilium_chains_in_every_table_and_their_feeder_rules_go_away(netns):
    """Cilium's chains live in raw, mangle, nat and filter, fed by commented jumps from the built-in chains."""
    chains = (("raw", "PREROUTING", "CILIUM_PRE_raw"), ("raw", "OUTPUT", "CILIUM_OUTPUT_raw"),
              ("mangle", "PREROUTING", "CILIUM_PRE_mangle"), ("nat", "POSTROUTING", "CILIUM_POST_nat"),
              ("filter", "FORWARD", "CILIUM_FORWARD"))
    for table, builtin, chain in chains:
        _iptables(netns, "-t", table, "-N", chain)
        _iptables(netns, "-t", table, "-A", chain, "-m", "comment", "--comment", "cilium: NOTRACK for tunnel traffic",
                  "-j", "ACCEPT")
        _iptables(netns, "-t", table, "-A", builtin, "-m", "comment", "--comment", f"cilium-feeder: {chain}",
                  "-j", chain)
    reset = Reset(NamespacedModule(netns))
    reset.iptables("/nonexistent/kube-proxy")
    saved = _saved(netns)
    assert "CILIUM" not in saved and "cilium" not in saved, saved
    assert "raw/CILIUM_OUTPUT_raw" in reset.result["chains"] and len(reset.result["chains"]) == 5


def test_calicos_chains_that_jump_into_each_other_and_their_feeder_rules_go_away(netns):
    """Felix's chains (cali-*) feed each other below one jump from each built-in chain, marked cali:<hash>."""
    for table, builtin, top, below in (("filter", "FORWARD", "cali-FORWARD", "cali-from-wl-dispatch"),
                                       ("nat", "POSTROUTING", "cali-POSTROUTING", "cali-nat-outgoing"),
                                       ("mangle", "PREROUTING", "cali-PREROUTING", "cali-from-host-endpoint"),
                                       ("raw", "PREROUTING", "cali-PREROUTING", "cali-rpf-skip")):
        for chain in (top, below):
            _iptables(netns, "-t", table, "-N", chain)
        _iptables(netns, "-t", table, "-A", below, "-m", "comment", "--comment", "cali:Ir_z2t1P", "-j", "RETURN")
        _iptables(netns, "-t", table, "-A", top, "-m", "comment", "--comment", "cali:vjrMJCRp", "-j", below)
        _iptables(netns, "-t", table, "-A", builtin, "-m", "comment", "--comment", "cali:6gwbT8clXdHdC1b1",
                  "-j", top)
    reset = Reset(NamespacedModule(netns))
    reset.iptables("/nonexistent/kube-proxy")
    saved = _saved(netns)
    assert "cali" not in saved, saved
    assert len(reset.result["chains"]) == 8 and "nat/cali-nat-outgoing" in reset.result["chains"]


def test_kube_proxys_chains_go_away_where_it_ran_as_a_daemonset_and_left_no_program(netns):
    """A kubeadm host's kube-proxy runs in a container: the node has no kube-proxy to run --cleanup with, and its
    chains (and the kubelet's) would stay behind on a node that another cluster then owns."""
    for table, builtin, chain in (("nat", "PREROUTING", "KUBE-SERVICES"), ("nat", "OUTPUT", "KUBE-SERVICES"),
                                  ("nat", "POSTROUTING", "KUBE-POSTROUTING"), ("filter", "FORWARD", "KUBE-FORWARD"),
                                  ("mangle", None, "KUBE-KUBELET-CANARY")):
        if f":{chain} " not in _saved(netns):
            _iptables(netns, "-t", table, "-N", chain)
        if builtin:
            _iptables(netns, "-t", table, "-A", builtin, "-m", "comment", "--comment", "kubernetes service portals",
                      "-j", chain)
    _iptables(netns, "-t", "nat", "-N", "KUBE-SVC-TCOU7JCQXEZGVUNU")
    _iptables(netns, "-t", "nat", "-A", "KUBE-SERVICES", "-d", "10.96.0.10/32", "-p", "udp", "--dport", "53",
              "-j", "KUBE-SVC-TCOU7JCQXEZGVUNU")
    _iptables(netns, "-t", "filter", "-A", "FORWARD", "-s", "10.1.0.0/16", "-j", "ACCEPT")  # not ours
    reset = Reset(NamespacedModule(netns))
    reset.iptables("/nonexistent/kube-proxy")
    saved = _saved(netns)
    assert "KUBE-" not in saved and "10.96.0.10" not in saved, saved
    assert "-A FORWARD -s 10.1.0.0/16 -j ACCEPT" in saved
    assert sorted(reset.result["chains"]) == ["filter/KUBE-FORWARD", "mangle/KUBE-KUBELET-CANARY",
                                              "nat/KUBE-POSTROUTING", "nat/KUBE-SERVICES",
                                              "nat/KUBE-SVC-TCOU7JCQXEZGVUNU"]


def test_the_pod_networks_devices_go_away(netns):
    subprocess.run(["ip", "-n", netns, "link", "add", "cilium_host", "type", "veth", "peer", "name", "cilium_net"],
                   check=True, timeout=60)
    subprocess.run(["ip", "-n", netns, "link", "add", "cilium_vxlan", "type", "vxlan", "external", "dstport", "8472"],
                   check=True, timeout=60)
    subprocess.run(["ip", "-n", netns, "link", "add", "vxlan.calico", "type", "vxlan", "id", "4096", "dstport",
                    "4789"], check=True, timeout=60)
    reset = Reset(NamespacedModule(netns))
    reset.network("cni0", ["cilium_host", "cilium_net", "cilium_vxlan", "vxlan.calico"])
    links = subprocess.run(["ip", "-n", netns, "-o", "link"], capture_output=True, text=True, check=True,
                           timeout=60).stdout
    assert "cilium_" not in links and "calico" not in links, links
    assert sorted(reset.result["removed"]) == ["link:cilium_host", "link:cilium_net", "link:cilium_vxlan",
                                               "link:vxlan.calico"]


class CountingModule(NamespacedModule):
    def __init__(self, netns, check_mode=False):
        super().__init__(netns)
        self.check_mode, self.calls = check_mode, []

    def run_command(self, argv, data=None, binary_data=False):
        self.calls.append(os.path.basename(argv[0]))
        return super().run_command(argv, data, binary_data)


def _kube_proxy_and_cni_rules(netns, tmp_path, delay=0):
    """kube-proxy's chain and a CNI chain in nat; a stand-in kube-proxy whose --cleanup removes its own, after
    `delay` seconds, and leaves a file named cleanup-ended."""
    _iptables(netns, "-t", "nat", "-N", "KUBE-POSTROUTING")
    _iptables(netns, "-t", "nat", "-A", "POSTROUTING", "-j", "KUBE-POSTROUTING")
    _iptables(netns, "-t", "nat", "-N", CHAIN)
    _iptables(netns, "-t", "nat", "-A", "POSTROUTING", "-s", "198.18.64.2/32", "-j", CHAIN)
    kube_proxy = tmp_path / "kube-proxy"
    kube_proxy.write_text(f"#!/bin/sh\n[ \"$1\" = --cleanup ] || exit 2\nsleep {delay}\n"
                          "iptables -w -t nat -D POSTROUTING -j KUBE-POSTROUTING"
                          " && iptables -w -t nat -X KUBE-POSTROUTING"
                          f" && touch {tmp_path / 'cleanup-ended'}\n")
    kube_proxy.chmod(0o755)
    return str(kube_proxy)


def test_kube_proxys_cleanup_runs_then_the_pod_networks_chains_go_in_one_restore(netns, tmp_path):
    kube_proxy = _kube_proxy_and_cni_rules(netns, tmp_path)
    module = CountingModule(netns)
    reset = Reset(module)
    reset.iptables(kube_proxy)
    saved = _saved(netns)
    assert "KUBE-" not in saved and "CNI-" not in saved, saved
    assert reset.result["kube_proxy_cleanup"] is True and reset.result["chains"] == [f"nat/{CHAIN}"]
    # One save to look, kube-proxy's own cleanup, one save of what is left, one restore for every table.
    assert module.calls == ["iptables-save", "kube-proxy", "iptables-save", "iptables-restore"]


def test_check_mode_reports_both_and_changes_nothing(netns, tmp_path):
    kube_proxy = _kube_proxy_and_cni_rules(netns, tmp_path)
    before = _saved(netns)
    module = CountingModule(netns, check_mode=True)
    reset = Reset(module)
    reset.iptables(kube_proxy)
    assert reset.result["kube_proxy_cleanup"] is True and reset.result["chains"] == [f"nat/{CHAIN}"]
    assert module.calls == ["iptables-save"]
    after = _saved(netns)
    assert [line for line in after.splitlines() if not line.startswith("#")] == \
        [line for line in before.splitlines() if not line.startswith("#")]


def test_kube_proxys_cleanup_runs_beside_the_other_stages_and_is_waited_for(netns, tmp_path):
    """Started once the units stop, ended before the CNI chains go: its chains and the CNI's are all gone."""
    fake = _kube_proxy_and_cni_rules(netns, tmp_path, delay=0.5)
    reset = Reset(NamespacedModule(netns))
    reset.start_kube_proxy_cleanup(fake)
    assert reset.result["kube_proxy_cleanup"] and reset.cleanup is not None
    reset.iptables(fake)
    assert (tmp_path / "cleanup-ended").exists() and reset.cleanup is None
    saved = _saved(netns)
    assert "KUBE-" not in saved and "CNI-" not in saved, saved
    assert reset.result["chains"] == [f"nat/{CHAIN}"]


def test_no_cleanup_starts_without_kube_proxys_chains_or_in_check_mode(netns, tmp_path):
    fake = tmp_path / "kube-proxy"
    fake.write_text("#!/bin/sh\ntouch %s\n" % (tmp_path / "ran"))
    fake.chmod(0o755)
    reset = Reset(NamespacedModule(netns))
    reset.start_kube_proxy_cleanup(str(fake))
    assert reset.cleanup is None and not reset.result["kube_proxy_cleanup"]
    _iptables(netns, "-t", "nat", "-N", "KUBE-SERVICES")
    checking = Reset(CountingModule(netns, check_mode=True))
    checking.start_kube_proxy_cleanup(str(fake))
    assert checking.cleanup is None and not (tmp_path / "ran").exists()
