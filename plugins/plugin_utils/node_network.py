# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parts shared by the pod network add-ons (Cilium, Calico): checks of their settings and the pieces of their
node agents' objects. Each returns plain data; a setting that fails its check never reaches a manifest."""

from __future__ import annotations

import ipaddress
import re

NAMESPACE = "kube-system"
LABEL = r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?"
HOST_NAME = r"^(?=.{1,253}$)%s(\.%s)*$" % (LABEL, LABEL)
READ = ("get", "list", "watch")


def known_settings(settings, allowed):
    """`settings` as given, once it is a dictionary of only `allowed` keys."""
    if not isinstance(settings, dict):
        raise ValueError("settings must be a dictionary")
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise ValueError("unknown settings %s" % ", ".join(unknown))
    return settings


def check_host(value):
    value = str(value)
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    if not re.match(HOST_NAME, value):
        raise ValueError("API server host %r is neither an IP address nor a DNS name" % value)
    return value


def check_port(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit() \
            or not 0 < int(value) < 65536:
        raise ValueError("%s %r is not a port number" % (what, value))
    return int(value)


def check_mtu(value):
    """0 (detect it on the node) or an MTU an IPv4 link can have with a tunnel header inside."""
    if isinstance(value, bool) or not str(value).isdigit() or not (int(value) == 0 or 1280 <= int(value) <= 9000):
        raise ValueError("MTU %r is not 0 or between 1280 and 9000" % (value,))
    return int(value)


def check_dir(value, what):
    value = str(value)
    if not value.startswith("/") or "\n" in value or "/.." in value or len(value) > 200:
        raise ValueError("%s %r is not an absolute path" % (what, value))
    return value


def rules(*groups):
    """ClusterRole rules from (api groups, resources, verbs) triples; a group given as a string is one group."""
    return [{"apiGroups": [group] if isinstance(group, str) else list(group), "resources": list(resources),
             "verbs": list(verbs)} for group, resources, verbs in groups]


def account(name, cluster_rules):
    """A ServiceAccount in kube-system with a ClusterRole of its own, bound to it."""
    meta = {"name": name}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta, namespace=NAMESPACE)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": dict(meta),
         "rules": cluster_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": dict(meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]},
    ]


def namespace_role(name, namespace_rules):
    """A Role in kube-system for what an account reads only there, bound to the ServiceAccount of account()."""
    meta = {"name": name, "namespace": NAMESPACE}
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": dict(meta),
         "rules": namespace_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": dict(meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]},
    ]


def api_env(api_host, api_port):
    """Where the API server is, for clients that start before the pod network and Services work."""
    return [{"name": "KUBERNETES_SERVICE_HOST", "value": check_host(api_host)},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(check_port(api_port, "API server port"))}]


def host_path(name, path, kind="DirectoryOrCreate"):
    """A node path; kind None: whatever is there (or nothing yet)."""
    return {"name": name, "hostPath": dict({"path": path}, **({"type": kind} if kind else {}))}


def field_env(name, path):
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def add_labels(objects, labels):
    """Extra labels on every object's own metadata (not on pod templates: a selector must not change)."""
    extra = {str(k): str(v) for k, v in (labels or {}).items()}
    for obj in objects:
        obj["metadata"].setdefault("labels", {}).update(extra)
    return objects
