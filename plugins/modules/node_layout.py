#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_layout
short_description: Read how a node runs its kubelet and kube-proxy, and what node promotion cannot handle
version_added: 1.4.0
description:
  - Reads, on the node, the systemd units of the kubelet and of kube-proxy (C(systemctl show)), the command lines
    of their running processes and the files in O(cni_conf_dir), and returns them as RV(layout).
  - RV(problems) names each reason node promotion must leave the node alone, before anything on it is touched
    - the kubelet is not run by the systemd unit O(kubelet_unit), or does not run;
    - the kubelet runs without C(--config), C(--kubeconfig) or C(--bootstrap-kubeconfig) (a returned node
      bootstraps its host credentials anew);
    - a file or directory the kubelet or kube-proxy reads (C(--config), C(--kubeconfig),
      C(--bootstrap-kubeconfig), C(--cert-dir), C(--root-dir)) lies outside O(cleared_paths), so a host
      credential would stay on the node after its reset;
    - the kubelet's unit has drop-ins but O(cleared_paths) does not clear the unit's drop-in directory in
      C(/etc/systemd/system), where promotion masks them;
    - kube-proxy's unit has drop-ins.
  - The kubelet unit's drop-ins (on a node set up by kubeadm's packages, C(10-kubeadm.conf), which reads
    C(kubeadm-flags.env)) would also apply to the tenant's kubelet unit of the same name; the C(masks) of
    RV(layout.kubelet) name the same-name drop-ins in C(/etc/systemd/system) that mask them for the tenant.
  - RV(layout.keep) lists the files of the host's node configuration that a reset clears and the return needs
    back, never a kubeconfig or a certificate.
  - kube-proxy as a unit is optional; a node whose kube-proxy runs as a DaemonSet has no such unit.
  - Reads only; nothing on the node changes.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  kubelet_unit:
    description: systemd unit that runs the host's kubelet.
    type: str
    default: kubelet.service
  kube_proxy_unit:
    description: systemd unit that runs the host's kube-proxy, where it runs as one.
    type: str
    default: kube-proxy.service
  cni_conf_dir:
    description: Directory of the node's CNI configuration.
    type: path
    default: /etc/cni/net.d
  cni_bin_dirs:
    description:
      - Directories of the node's CNI plugin programs. A CNI configuration whose plugin lies under
        O(cleared_paths) belongs to a pod network agent that writes it again, and is not in RV(layout.keep).
    type: list
    elements: path
    default: [/opt/cni/bin, /usr/lib/cni]
  cleared_paths:
    description:
      - Paths a reset of the node deletes (files, directories, or a directory's contents as C(DIR/*)); the
        files the kubelet and kube-proxy read must lie under them.
    type: list
    elements: path
    required: true
extends_documentation_fragment:
  - kosmos.kubenest.attributes.read_only
"""

EXAMPLES = r"""
- name: Read the node's layout
  kosmos.kubenest.node_layout:
    cleared_paths: [/etc/kubernetes, /var/lib/kubelet, /etc/systemd/system/kubelet.service]
  register: layout

- name: Refuse a node promotion cannot handle, naming what was found
  ansible.builtin.assert:
    that: layout.problems | length == 0
    fail_msg: "{{ inventory_hostname }}: {{ layout.problems | join('; ') }}"
"""

RETURN = r"""
layout:
  description: What the node runs.
  returned: success
  type: dict
  contains:
    kubelet:
      description:
        - The kubelet's unit (C(name), C(loaded), C(active), C(state), C(fragment), C(drop_ins),
          C(environment_files), C(masks), C(pid)) and its process (C(program), C(args), C(flags) with the path
          flags given).
      type: dict
    kube_proxy:
      description: The same for kube-proxy's unit; null when no such unit is loaded.
      type: dict
    cni_files:
      description: Names of the files in O(cni_conf_dir).
      type: list
      elements: str
    keep:
      description:
        - Files a reset clears that the host's node needs back at return - the kubelet's C(--config) file, its
          environment files and drop-ins, the CNI configuration.
      type: list
      elements: str
  sample:
    kubelet:
      name: kubelet.service
      loaded: true
      active: true
      state: active/running
      fragment: /etc/systemd/system/kubelet.service
      drop_ins: []
      environment_files: []
      masks: []
      pid: 812
      program: /usr/local/bin/kubelet
      args: [--config=/var/lib/kubelet/config.yaml, --kubeconfig=/etc/kubernetes/kubelet.conf]
      flags: {config: /var/lib/kubelet/config.yaml, kubeconfig: /etc/kubernetes/kubelet.conf}
    kube_proxy: null
    cni_files: [10-kubenest.conflist]
    keep: [/etc/cni/net.d/10-kubenest.conflist, /var/lib/kubelet/config.yaml]
problems:
  description: Each reason promotion must leave the node alone; empty when it can promote the node.
  returned: success
  type: list
  elements: str
  sample:
    - "the kubelet runs without --bootstrap-kubeconfig: a returned node could not bootstrap its host credentials"
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kosmos.kubenest.plugins.module_utils.node_layout import (
    UNIT_PROPERTIES,
    assess,
    cni_plugin_types,
    main_pid,
    parse_show,
)


def show(module, unit):
    argv = ["systemctl", "show", "--no-pager"] + ["--property=%s" % p for p in UNIT_PROPERTIES] + ["--", unit]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg="systemctl show %s failed (status %d): %s" % (unit, rc, err.strip()))
    return parse_show(out)


def command_line(pid):
    """The argv of a running process; empty when it is gone or has none (a kernel thread)."""
    if pid <= 0:
        return []
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0") if part]


def cni_types(path):
    """The plugin types of a CNI configuration file; None when it cannot be read."""
    try:
        with open(path) as handle:
            return cni_plugin_types(handle.read(1 << 20))
    except (OSError, UnicodeDecodeError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kubelet_unit=dict(type="str", default="kubelet.service"),
            kube_proxy_unit=dict(type="str", default="kube-proxy.service"),
            cni_conf_dir=dict(type="path", default="/etc/cni/net.d"),
            cni_bin_dirs=dict(type="list", elements="path", default=["/opt/cni/bin", "/usr/lib/cni"]),
            cleared_paths=dict(type="list", elements="path", required=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    kubelet = show(module, p["kubelet_unit"])
    proxy = show(module, p["kube_proxy_unit"])
    try:
        cni_files = [name for name in os.listdir(p["cni_conf_dir"])
                     if os.path.isfile(os.path.join(p["cni_conf_dir"], name))]
    except FileNotFoundError:
        cni_files = []
    except OSError as exc:
        module.fail_json(msg="cannot list %s: %s" % (p["cni_conf_dir"], exc))
    layout, problems = assess(kubelet, command_line(main_pid(kubelet)), proxy, command_line(main_pid(proxy)),
                              cni_files, p["cleared_paths"], kubelet_unit=p["kubelet_unit"],
                              kube_proxy_unit=p["kube_proxy_unit"], cni_conf_dir=p["cni_conf_dir"],
                              cni_types={name: cni_types(os.path.join(p["cni_conf_dir"], name)) for name in cni_files},
                              cni_bin_dirs=p["cni_bin_dirs"])
    module.exit_json(changed=False, layout=layout, problems=problems)


if __name__ == "__main__":
    main()
