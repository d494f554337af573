# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How a host node runs its kubelet and kube-proxy, read from the node, and what node promotion cannot handle.

Promotion replaces the host's kubelet by the tenant's and puts the host's back at return. That is safe only on
a node whose layout it understands: a running kubelet of a systemd unit, started with its configuration file, its
kubeconfig and a bootstrap kubeconfig (a returned node bootstraps anew), and every file the kubelet and
kube-proxy read under the paths a reset clears (a host credential elsewhere would stay on a node that a tenant
then owns). The unit's drop-ins (kubeadm's 10-kubeadm.conf) would apply to the tenant's unit of the same name:
each is masked for the tenant by an empty drop-in of the same name in /etc, which a reset clears. What the reset
clears and the host needs back (the kubelet's configuration, its flag files, the CNI configuration, drop-ins in
/etc) is listed to be kept; kubelet credentials never are.

The functions here are pure: the module gathers `systemctl show` output and process command lines, these parse
and judge them.
"""

from __future__ import annotations

import json
import os

# systemctl show properties read for each unit.
UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "FragmentPath", "DropInPaths", "MainPID",
                   "EnvironmentFiles")
# Flags naming files or directories a component reads its identity and configuration from.
KUBELET_PATH_FLAGS = ("config", "kubeconfig", "bootstrap-kubeconfig", "cert-dir", "root-dir", "pod-manifest-path")
KUBE_PROXY_PATH_FLAGS = ("config", "kubeconfig")


def parse_show(text):
    """`systemctl show -p ...` output as {property: value}; a property printed on several lines (one per
    EnvironmentFiles entry) keeps every value, joined by newlines."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if props.get(key) and value:
            props[key] += "\n" + value
        elif not props.get(key):
            props[key] = value
    return props


def environment_files(value):
    """EnvironmentFiles as paths: systemctl prints each as `PATH (ignore_errors=yes|no)`."""
    files = []
    for entry in (value or "").splitlines():
        path = entry.rsplit(" (ignore_errors=", 1)[0].strip()
        if path:
            files.append(path)
    return files


def main_pid(props):
    """The unit's main process, 0 when none runs."""
    try:
        return int(props.get("MainPID") or 0)
    except ValueError:
        return 0


def unit_of(props, name):
    """The facts of one unit, from its parsed `systemctl show` properties."""
    pid = main_pid(props)
    return {
        "name": name,
        "loaded": props.get("LoadState") == "loaded",
        "active": props.get("ActiveState") == "active" and props.get("SubState") == "running" and pid > 0,
        "state": "%s/%s" % (props.get("ActiveState") or "unknown", props.get("SubState") or "unknown"),
        "fragment": props.get("FragmentPath") or "",
        "drop_ins": (props.get("DropInPaths") or "").split(),
        "environment_files": environment_files(props.get("EnvironmentFiles")),
        "pid": pid,
    }


def parse_flags(argv, names):
    """The values of the long flags `names` in a command line (`--flag=value` or `--flag value`); a flag given
    twice keeps its last value, as Go's flag package does."""
    flags, args = {}, list(argv[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--"):
            continue
        name, sep, value = arg[2:].partition("=")
        if name not in names:
            continue
        if not sep:
            if i >= len(args):
                continue
            value, i = args[i], i + 1
        flags[name] = value
    return flags


def is_cleared(path, cleared_paths):
    """Whether a reset that deletes `cleared_paths` removes `path`: an entry names a file or a directory
    (everything under it), and an entry ending in `/*` the contents of a directory."""
    path = os.path.normpath(path)
    for entry in cleared_paths:
        base = entry[:-2] if entry.endswith("/*") else entry
        base = os.path.normpath(base)
        if entry.endswith("/*"):
            if path.startswith(base.rstrip("/") + "/"):
                return True
        elif path == base or path.startswith(base.rstrip("/") + "/"):
            return True
    return False


def _component(unit, argv, flag_names):
    """A unit's facts with the program it runs and the path flags of its command line."""
    return dict(unit, program=argv[0] if argv else "", args=list(argv[1:]),
                flags=parse_flags(argv, flag_names) if argv else {})


def assess(kubelet_props, kubelet_argv, proxy_props, proxy_argv, cni_files, cleared_paths,
           kubelet_unit="kubelet.service", kube_proxy_unit="kube-proxy.service", cni_conf_dir="/etc/cni/net.d",
           cni_types=None, cni_bin_dirs=("/opt/cni/bin", "/usr/lib/cni")):
    """(layout, problems): what the node runs, and each reason promotion must leave it alone, in words that name
    what was found. Problems are empty for a layout promotion handles."""
    problems = []
    kubelet = _component(unit_of(kubelet_props, kubelet_unit), kubelet_argv, KUBELET_PATH_FLAGS)
    if not kubelet["loaded"]:
        problems.append("no systemd unit %s is loaded: the kubelet is not run by systemd under that name"
                        % kubelet_unit)
    elif not kubelet["active"]:
        problems.append("%s is %s, not running: a node is promoted from a running kubelet, whose command line "
                        "tells its files" % (kubelet_unit, kubelet["state"]))
    elif os.path.basename(kubelet["program"]) != "kubelet":
        problems.append("%s runs %r (pid %d), not a kubelet" % (kubelet_unit, kubelet["program"], kubelet["pid"]))
    else:
        for flag, why in (("config", ""), ("kubeconfig", ""),
                          ("bootstrap-kubeconfig", ": a returned node could not bootstrap its host credentials")):
            if flag not in kubelet["flags"]:
                problems.append("the kubelet runs without --%s%s" % (flag, why))
        problems.extend(_outside("kubelet", kubelet["flags"], cleared_paths))
    # Masks: same-name drop-ins in /etc override the host's for the tenant's kubelet, wherever the host's lie.
    mask_dir = "/etc/systemd/system/%s.d" % kubelet_unit
    kubelet["masks"] = sorted({"%s/%s" % (mask_dir, os.path.basename(path)) for path in kubelet["drop_ins"]})
    if kubelet["masks"] and not is_cleared(kubelet["masks"][0], cleared_paths):
        problems.append("%s has drop-ins (%s), but a reset does not clear %s, where promotion masks them for the "
                        "tenant's kubelet" % (kubelet_unit, ", ".join(kubelet["drop_ins"]), mask_dir))

    proxy = None
    if proxy_props.get("LoadState") == "loaded":
        proxy = _component(unit_of(proxy_props, kube_proxy_unit), proxy_argv, KUBE_PROXY_PATH_FLAGS)
        if proxy["drop_ins"]:
            problems.append("%s has drop-ins (%s), which node_promote does not keep"
                            % (kube_proxy_unit, ", ".join(proxy["drop_ins"])))
        problems.extend(_outside("kube-proxy", proxy["flags"], cleared_paths))
    layout = {"kubelet": kubelet, "kube_proxy": proxy, "cni_files": sorted(cni_files),
              "keep": kept(kubelet, cni_files, cni_conf_dir, cleared_paths, cni_types, cni_bin_dirs)}
    return layout, problems


def cni_plugin_types(text):
    """The plugin types a CNI configuration file names (a .conflist's plugins, or a .conf's one); None when it is
    not a configuration that can be read."""
    try:
        conf = json.loads(text)
    except ValueError:
        return None
    if not isinstance(conf, dict):
        return None
    plugins = conf.get("plugins") if isinstance(conf.get("plugins"), list) else [conf]
    return [plugin.get("type") for plugin in plugins if isinstance(plugin, dict) and plugin.get("type")]


def kept(kubelet, cni_files, cni_conf_dir, cleared_paths, cni_types=None, cni_bin_dirs=()):
    """Files of the host's node configuration a reset clears and its return needs back: the kubelet's
    configuration file, flag files and drop-ins, and the CNI configuration. Never a kubeconfig or a certificate:
    a returned kubelet bootstraps anew. A CNI configuration whose plugin program the reset removes too (Cilium's,
    Calico's) is its pod network agent's, which writes both again: put back before the agent runs, it would
    name a program that is not there."""
    wanted = [kubelet["flags"].get("config", "")] + kubelet["environment_files"] + kubelet["drop_ins"]
    for name in cni_files:
        types = (cni_types or {}).get(name) or []
        if not any(is_cleared(os.path.join(d, t), cleared_paths) for t in types for d in cni_bin_dirs):
            wanted.append(os.path.join(cni_conf_dir, name))
    return sorted({path for path in wanted if path and is_cleared(path, cleared_paths)})


def _outside(component, flags, cleared_paths):
    return ["the %s's --%s=%s lies outside the paths a reset clears (node_promote_cluster_paths): what it holds "
            "would stay on the node in the tenant's hands" % (component, flag, value)
            for flag, value in sorted(flags.items()) if value and not is_cleared(value, cleared_paths)]
