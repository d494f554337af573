# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How a host node runs its kubelet and kube-proxy, read from the node, and what node promotion cannot handle.

Promotion replaces the host's kubelet by the tenant's and puts the host's back at return. That is safe only on
a node whose layout it understands: a kubelet run by a systemd unit without drop-ins (a drop-in of the host's
unit would also apply to the tenant's unit of the same name), and every file the kubelet and kube-proxy read
under the paths a reset clears (a host credential elsewhere would stay on a node that a tenant then owns).

The functions here are pure: the module gathers `systemctl show` output and process command lines, these parse
and judge them.
"""

from __future__ import annotations

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
           kubelet_unit="kubelet.service", kube_proxy_unit="kube-proxy.service"):
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
        for flag in ("config", "kubeconfig"):
            if flag not in kubelet["flags"]:
                problems.append("the kubelet runs without --%s" % flag)
        problems.extend(_outside("kubelet", kubelet["flags"], cleared_paths))
    if kubelet["loaded"]:
        if kubelet["drop_ins"]:
            problems.append("%s has drop-ins (%s): they would apply to the tenant's kubelet unit as well"
                            % (kubelet_unit, ", ".join(kubelet["drop_ins"])))
        if kubelet["environment_files"]:
            problems.append("%s reads flags from environment files (%s), which node_promote does not keep"
                            % (kubelet_unit, ", ".join(kubelet["environment_files"])))

    proxy = None
    if proxy_props.get("LoadState") == "loaded":
        proxy = _component(unit_of(proxy_props, kube_proxy_unit), proxy_argv, KUBE_PROXY_PATH_FLAGS)
        if proxy["drop_ins"]:
            problems.append("%s has drop-ins (%s), which node_promote does not keep"
                            % (kube_proxy_unit, ", ".join(proxy["drop_ins"])))
        problems.extend(_outside("kube-proxy", proxy["flags"], cleared_paths))
    layout = {"kubelet": kubelet, "kube_proxy": proxy, "cni_files": sorted(cni_files)}
    return layout, problems


def _outside(component, flags, cleared_paths):
    return ["the %s's --%s=%s lies outside the paths a reset clears (node_promote_cluster_paths): what it holds "
            "would stay on the node in the tenant's hands" % (component, flag, value)
            for flag, value in sorted(flags.items()) if value and not is_cleared(value, cleared_paths)]
