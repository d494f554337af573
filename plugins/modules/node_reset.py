#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_reset
short_description: Remove every workload, pod network and credential of a cluster from a node
version_added: 1.1.0
description:
  - Run on a node before it joins another cluster. In order, it stops and disables the units O(stop_units),
    kills and deletes every container (pods and their sandboxes) in the containerd namespace
    O(containerd_namespace), deletes the pods' network namespaces, the pod bridge O(bridge) and the pod
    network's own devices O(links), removes the
    iptables chains kube-proxy made (C(kube-proxy --cleanup)) and the CNI plugins' chains, unmounts what the
    kubelet mounted, deletes O(paths), and restarts O(restart_units).
  - On a node without the O(kube_proxy) binary (kube-proxy ran as a DaemonSet, as on a kubeadm host), the
    C(KUBE-) chains it and the kubelet left are removed like the CNI plugins' chains, with the rules jumping
    into them.
  - C(kube-proxy --cleanup) starts as soon as the units are stopped and runs while containers and network
    namespaces are removed; the CNI plugins' chains are removed once it has ended.
  - Images stay, so the node does not fetch them again, unless O(remove_images) is set. Then every image of the
    containerd namespace but those named in O(keep_images) is removed with its content, once the containers
    are gone, so the next cluster neither reads the last one's images nor runs an image the last one put
    under a name the next one uses.
  - Idempotent; a clean node reports no change, unless O(restart_units) are given, as those are restarted on
    every run.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  stop_units:
    description:
      - systemd units stopped and disabled first (the kubelet and other node services), so nothing recreates
        what is removed afterwards. A unit that does not exist is skipped.
    type: list
    elements: str
    default: []
  paths:
    description:
      - Files and directories to delete (credentials, kubelet and CNI state, configuration). A path ending in
        C(/*) deletes what the directory holds and keeps the directory (containerd watches C(/etc/cni/net.d)
        only if it existed when containerd started).
    type: list
    elements: path
    default: []
  containerd_namespace:
    description: containerd namespace of the kubelet's containers.
    type: str
    default: k8s.io
  bridge:
    description: Pod bridge interface to delete.
    type: str
    default: cni0
  links:
    description: Further network devices of a pod network to delete (Cilium's host and tunnel devices, Calico's
      tunnel device).
    type: list
    elements: str
    default: [cilium_host, cilium_net, cilium_vxlan, vxlan.calico]
  kube_proxy:
    description: kube-proxy binary used for C(--cleanup); skipped when missing.
    type: path
    default: /usr/local/bin/kube-proxy
  mount_roots:
    description: Directories under which every mount is undone before O(paths) are deleted.
    type: list
    elements: path
    default: [/var/lib/kubelet, /run/containerd/io.containerd.grpc.v1.cri]
  remove_images:
    description: Remove the images of O(containerd_namespace) too, all but O(keep_images).
    type: bool
    default: false
    version_added: 1.4.0
  keep_images:
    description: Image names (as C(ctr images ls) lists them) that O(remove_images) keeps.
    type: list
    elements: str
    default: []
    version_added: 1.4.0
  restart_units:
    description:
      - systemd units restarted last, once everything is removed (containerd, so that it watches an emptied CNI
        configuration directory afresh). In the same module run, where a task of its own costs another round
        trip to the node. Not restarted in check mode; listed in RV(restarted) all the same.
    type: list
    elements: str
    default: []
    version_added: 1.4.0
attributes:
  check_mode:
    support: full
    description: Lists what would be removed without removing it.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
"""

EXAMPLES = r"""
- name: Forget the host cluster
  kosmos.kubenest.node_reset:
    stop_units: [kubelet, kube-proxy]
    paths:
      - /etc/kubernetes
      - /var/lib/kubelet
      - /var/lib/cni
      - /etc/cni/net.d/10-kubenest.conflist
"""

RETURN = r"""
stopped:
  description: Units that were running or enabled and are now stopped and disabled.
  returned: always
  type: list
  elements: str
containers:
  description: Containers deleted.
  returned: always
  type: list
  elements: str
netns:
  description: Pod network namespaces deleted.
  returned: always
  type: list
  elements: str
unmounted:
  description: Mount points undone.
  returned: always
  type: list
  elements: str
removed:
  description: Paths deleted.
  returned: always
  type: list
  elements: str
chains:
  description: iptables chains removed (table/chain), besides those C(kube-proxy --cleanup) removed.
  returned: always
  type: list
  elements: str
images:
  description: Images removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
restarted:
  description: Units restarted (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [containerd.service]
seconds:
  description: Time each stage took, in the order run, so a slow reset shows where it waited.
  returned: always
  type: dict
  sample: {units: 0.41, containers: 0.9, images: 0.2, network: 0.05, iptables: 0.3, mounts: 0.01, paths: 0.02,
           restart: 0.3}
"""

import os
import re
import shutil
import threading
import time

from ansible.module_utils.basic import AnsibleModule

NETNS_DIR = "/var/run/netns"
PROTECTED = ("/", "/etc", "/var", "/var/lib", "/usr", "/run", "/root", "/home")
# Chains the CNI plugins (portmap, bridge ipMasq), Cilium and Calico's Felix add; kube-proxy's own go through
# `kube-proxy --cleanup`, or with these where no kube-proxy program is on the node (it ran in a container).
CNI_CHAIN_PREFIXES = ("CNI-", "CILIUM_", "cali-")
KUBE_CHAIN_PREFIX = "KUBE-"


def removal_script(table, saved, chains):
    """iptables-restore input deleting `chains` of `table` and the rules that jump into them, from the rules as
    iptables-save printed them: restore reads its own quoting back (a CNI rule's comment holds quoted words,
    which splitting the line on spaces would break)."""
    jumps = [line for line in saved.splitlines() if line.startswith("-A ") and line.split()[1] not in chains
             and any((" -j %s " % c) in line + " " for c in chains)]
    lines = ["*%s" % table]
    lines += ["-D" + line[2:] for line in jumps]
    lines += ["-F %s" % c for c in chains] + ["-X %s" % c for c in chains] + ["COMMIT", ""]
    return "\n".join(lines)


def unit_names(names):
    """systemd unit names, a bare name taken as a service."""
    return [n if "." in n else n + ".service" for n in names]


def saved_tables(saved):
    """[(table, its part of iptables-save's output)], in the order saved."""
    tables, current, lines = [], None, []
    for line in saved.splitlines():
        if line.startswith("*"):
            current, lines = line[1:].strip(), [line]
        elif current is not None:
            lines.append(line)
            if line.strip() == "COMMIT":
                tables.append((current, "\n".join(lines) + "\n"))
                current = None
    return tables


class Reset:
    def __init__(self, module):
        self.module = module
        self.check = module.check_mode
        self.result = dict(stopped=[], containers=[], images=[], netns=[], unmounted=[], removed=[], chains=[],
                           kube_proxy_cleanup=False, restarted=[])
        self.cleanup = None  # kube-proxy's cleanup, once started in the background

    def run(self, argv, check_rc=True, data=None):
        rc, out, err = self.module.run_command(argv, data=data, binary_data=data is not None)
        if rc != 0 and check_rc:
            self.module.fail_json(msg="%s failed (rc %d): %s" % (" ".join(argv), rc, err.strip() or out.strip()),
                                  **self.result)
        return rc, out

    def units(self, names):
        """One `systemctl show` for all units, one `systemctl disable --now` for those still up."""
        if not names:
            return
        systemctl = self.module.get_bin_path("systemctl", required=True)
        _rc, out = self.run([systemctl, "show", "--property=Id,LoadState,ActiveState,UnitFileState", "--"]
                            + unit_names(names))
        up = []
        for block in out.strip().split("\n\n"):
            props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
            if props.get("LoadState") != "loaded":
                continue
            if props.get("ActiveState") not in ("inactive", "failed") or props.get("UnitFileState") == "enabled":
                up.append(props["Id"])
        self.result["stopped"] = up
        if up and not self.check:
            self.run([systemctl, "disable", "--now", "--"] + up)

    def restart(self, names):
        """One `systemctl restart` for all units."""
        if not names:
            return
        units = unit_names(names)
        self.result["restarted"] = units
        if not self.check:
            self.run([self.module.get_bin_path("systemctl", required=True), "restart", "--"] + units)

    def containers(self, namespace):
        ctr = self.module.get_bin_path("ctr")
        if ctr is None or not os.path.exists("/run/containerd/containerd.sock"):
            return
        _rc, out = self.run([ctr, "-n", namespace, "containers", "ls", "-q"])
        ids = out.split()
        self.result["containers"] = ids
        if self.check:
            return
        if not ids:
            return
        # All at once first (each ctr call costs a process start): a forced task delete kills the task, and
        # containerd goes on past a container that is gone meanwhile. Whatever is still listed after that
        # goes one by one.
        self.run([ctr, "-n", namespace, "tasks", "delete", "-f", "--"] + ids, check_rc=False)
        self.run([ctr, "-n", namespace, "containers", "delete", "--"] + ids, check_rc=False)
        _rc, out = self.run([ctr, "-n", namespace, "containers", "ls", "-q"])
        for cid in [c for c in out.split() if c in ids]:
            # A task may be gone already; what matters is that the container is deleted at the end.
            self.run([ctr, "-n", namespace, "tasks", "kill", "-a", "-s", "SIGKILL", cid], check_rc=False)
            self.run([ctr, "-n", namespace, "tasks", "delete", "-f", cid], check_rc=False)
            rc, _out = self.run([ctr, "-n", namespace, "containers", "delete", cid], check_rc=False)
            if rc != 0:
                # containerd may remove it meanwhile (a sandbox's containers go with it): gone is what counts.
                listed, _out = self.run([ctr, "-n", namespace, "containers", "info", cid], check_rc=False)
                if listed == 0:
                    self.run([ctr, "-n", namespace, "containers", "delete", cid])

    def images(self, namespace, keep):
        ctr = self.module.get_bin_path("ctr")
        if ctr is None or not os.path.exists("/run/containerd/containerd.sock"):
            return
        _rc, out = self.run([ctr, "-n", namespace, "images", "ls", "-q"])
        names = [name for name in out.split() if name not in set(keep)]
        self.result["images"] = names
        if names and not self.check:
            # --sync: the content is gone when the call returns, not at containerd's next collection.
            self.run([ctr, "-n", namespace, "images", "rm", "--sync", "--"] + names)

    def network(self, bridge, links=()):
        ip = self.module.get_bin_path("ip", required=True)
        if os.path.isdir(NETNS_DIR):
            names = sorted(n for n in os.listdir(NETNS_DIR) if n.startswith("cni-"))
            self.result["netns"] = names
            if not self.check:
                for name in names:
                    self.run([ip, "netns", "delete", name], check_rc=False)
                    path = os.path.join(NETNS_DIR, name)
                    if os.path.exists(path):  # a namespace file left without its mount
                        os.unlink(path)
        _rc, out = self.run([ip, "-o", "link", "show"])
        present = set(re.findall(r"^\d+: ([^:@\s]+)", out, re.M))
        for link in [bridge, *links]:
            if link in present:
                self.result["removed"].append("link:%s" % link)
                if not self.check:
                    self.run([ip, "link", "delete", link], check_rc=False)

    def start_kube_proxy_cleanup(self, kube_proxy):
        """kube-proxy's cleanup of its chains (about a second of iptables calls on a host node), started once
        the units are stopped so that it runs while the containers and the pod network go; iptables() waits."""
        save = self.module.get_bin_path("iptables-save")
        if self.check or save is None:
            return
        rc, out = self.run([save], check_rc=False)
        if rc == 0 and ":KUBE-" in out and os.path.exists(kube_proxy):
            self.result["kube_proxy_cleanup"] = True
            # Exit code is 1 when some mode (ipvs, nftables) has nothing to clean: not an error.
            self.cleanup = threading.Thread(target=self.run, args=([kube_proxy, "--cleanup"],),
                                            kwargs=dict(check_rc=False), daemon=True)
            self.cleanup.start()

    def iptables(self, kube_proxy):
        save = self.module.get_bin_path("iptables-save")
        restore = self.module.get_bin_path("iptables-restore")
        if save is None:
            return
        if self.cleanup is not None:
            self.cleanup.join()
            self.cleanup = None
            rc, out = self.run([save], check_rc=False)
            if rc == 0:
                self._cni_chains(out, restore)
            return
        # Every table in one save, and one restore for all of them: each iptables process costs a start.
        rc, out = self.run([save], check_rc=False)
        if rc == 0 and ":KUBE-" in out and os.path.exists(kube_proxy):
            self.result["kube_proxy_cleanup"] = True
            if self.check:
                return self._cni_chains(out, None)
            # Exit code is 1 when some mode (ipvs, nftables) has nothing to clean: not an error.
            self.run([kube_proxy, "--cleanup"], check_rc=False)
            rc, out = self.run([save], check_rc=False)
        if rc == 0:
            prefixes = CNI_CHAIN_PREFIXES if os.path.exists(kube_proxy) else CNI_CHAIN_PREFIXES + (KUBE_CHAIN_PREFIX,)
            self._cni_chains(out, restore, prefixes)

    def _cni_chains(self, saved, restore, prefixes=CNI_CHAIN_PREFIXES):
        """Delete the chains named with `prefixes` found in `saved` (all tables) with one restore (none: only
        report)."""
        script = []
        for table, text in saved_tables(saved):
            chains = [line[1:].split()[0] for line in text.splitlines()
                      if line.startswith(":") and line[1:].startswith(prefixes)]
            self.result["chains"].extend("%s/%s" % (table, c) for c in chains)
            if chains:
                script.append(removal_script(table, text, chains))
        if script and restore is not None and not self.check:
            self.run([restore, "--noflush"], data="".join(script))

    def mounts(self, roots):
        roots = [r.rstrip("/") for r in roots]
        with open("/proc/self/mountinfo") as fh:
            points = [line.split()[4] for line in fh]
        points = [p.replace("\\040", " ") for p in points]
        under = sorted({p for p in points for r in roots if p == r or p.startswith(r + "/")},
                       key=lambda p: p.count("/"), reverse=True)
        self.result["unmounted"] = under
        if self.check:
            return
        umount = self.module.get_bin_path("umount", required=True)
        for point in under:
            self.run([umount, "--lazy", point], check_rc=False)

    def paths(self, paths):
        expanded = []
        for path in paths:
            if path.endswith("/*"):
                parent = path[:-2]
                if os.path.isdir(parent):
                    expanded.extend(os.path.join(parent, n) for n in sorted(os.listdir(parent)))
            else:
                expanded.append(path)
        for path in expanded:
            if not (os.path.lexists(path)):
                continue
            self.result["removed"].append(path)
            if self.check:
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            stop_units=dict(type="list", elements="str", default=[]),
            paths=dict(type="list", elements="path", default=[]),
            containerd_namespace=dict(type="str", default="k8s.io"),
            bridge=dict(type="str", default="cni0"),
            links=dict(type="list", elements="str",
                       default=["cilium_host", "cilium_net", "cilium_vxlan", "vxlan.calico"]),
            kube_proxy=dict(type="path", default="/usr/local/bin/kube-proxy"),
            mount_roots=dict(type="list", elements="path",
                             default=["/var/lib/kubelet", "/run/containerd/io.containerd.grpc.v1.cri"]),
            remove_images=dict(type="bool", default=False),
            keep_images=dict(type="list", elements="str", default=[]),
            restart_units=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for path in p["paths"]:
        if os.path.normpath(path[:-2] if path.endswith("/*") else path) in PROTECTED:
            module.fail_json(msg="paths: refusing to delete %s" % path)
    reset = Reset(module)
    seconds = {}

    def units():
        reset.units(p["stop_units"])
        reset.start_kube_proxy_cleanup(p["kube_proxy"])

    for stage, run in (("units", units),
                       ("containers", lambda: reset.containers(p["containerd_namespace"])),
                       ("images", lambda: p["remove_images"] and reset.images(p["containerd_namespace"],
                                                                              p["keep_images"])),
                       ("network", lambda: reset.network(p["bridge"], p["links"])),
                       ("iptables", lambda: reset.iptables(p["kube_proxy"])),
                       ("mounts", lambda: reset.mounts(p["mount_roots"])),
                       ("paths", lambda: reset.paths(p["paths"])),
                       ("restart", lambda: reset.restart(p["restart_units"]))):
        started = time.monotonic()
        run()
        seconds[stage] = round(time.monotonic() - started, 3)
    r = reset.result
    changed = bool(r["stopped"] or r["containers"] or r["images"] or r["netns"] or r["unmounted"] or r["removed"]
                   or r["chains"] or r["kube_proxy_cleanup"] or r["restarted"])
    module.exit_json(changed=changed, seconds=seconds, **r)


if __name__ == "__main__":
    main()
