# Copyright: kosmos.kubenest maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render kubeconfig documents that authenticate with a client certificate."""

from __future__ import annotations

import base64
import json
import os

try:
    import yaml
except ImportError:
    HAS_YAML = False
else:
    HAS_YAML = True

    class _QuotedDumper(yaml.SafeDumper):
        """Writes every string as a double-quoted scalar."""

    _QuotedDumper.add_representer(
        str, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"'))


def _b64(data):
    if not isinstance(data, bytes):
        data = data.encode("ascii")
    return base64.b64encode(data).decode("ascii")


def client_cert_kubeconfig(server, ca_pem, client_cert_pem, client_key_pem, cluster_name="kubernetes",
                           user_name="admin", namespace=None):
    """Return a kubeconfig dict with one cluster, one user and one current context; PEM data is embedded."""
    context = {"cluster": cluster_name, "user": user_name}
    if namespace:
        context["namespace"] = namespace
    context_name = "%s@%s" % (user_name, cluster_name)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": cluster_name,
                      "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)}}],
        "users": [{"name": user_name,
                   "user": {"client-certificate-data": _b64(client_cert_pem),
                            "client-key-data": _b64(client_key_pem)}}],
        "contexts": [{"name": context_name, "context": context}],
        "current-context": context_name,
    }


def dump_kubeconfig(config):
    """Serialise a kubeconfig dict as YAML with every string double-quoted (JSON, a subset of YAML, when PyYAML is
    not installed). Go reads kubeconfigs as YAML 1.1 and PyYAML leaves `n`, `y` and other scalars plain that Go
    then takes for booleans or numbers: a cluster or user named after a VirtualCluster `n` would not load."""
    if HAS_YAML:
        # No folding: a long base64 string stays on one line.
        return yaml.dump(config, Dumper=_QuotedDumper, default_flow_style=False, sort_keys=False, width=1 << 30)
    return json.dumps(config, indent=2) + "\n"


def token_kubeconfig(server, ca_pem, token, cluster_name="kubernetes", user_name="bootstrap"):
    """Return a kubeconfig dict that authenticates with a bearer token (e.g. a bootstrap token)."""
    config = client_cert_kubeconfig(server, ca_pem, b"", b"", cluster_name=cluster_name, user_name=user_name)
    config["users"] = [{"name": user_name, "user": {"token": token}}]
    return config


def kubeconfig_path(explicit=None, variables=("K8S_AUTH_KUBECONFIG", "KUBECONFIG")):
    """The kubeconfig file an API client reads: `explicit`, else the first of `variables` that is set
    ($K8S_AUTH_KUBECONFIG, as kubernetes.core reads it, then $KUBECONFIG), else None inside a pod (the service
    account), else ~/.kube/config. A variable may hold a list, as kubectl reads it; the first file of it that
    exists is taken whole (files are not merged)."""
    if explicit:
        return os.path.expanduser(explicit)
    for variable in variables:
        entries = [e for e in os.environ.get(variable, "").split(os.pathsep) if e]
        if entries:
            found = [e for e in entries if os.path.isfile(os.path.expanduser(e))]
            return os.path.expanduser(found[0] if found else entries[0])
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    return os.path.expanduser("~/.kube/config")
