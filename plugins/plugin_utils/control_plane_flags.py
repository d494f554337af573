# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Flags of kube-apiserver, kube-controller-manager and kube-scheduler, defined once for both modes: systemd
units on machines (bare bootstrap) and Deployments of a hosted control plane. Only what truly differs between
the modes is a parameter; every other flag is the same in both."""

from __future__ import annotations

import posixpath
import re

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import check_cidr, check_ip


class Files:
    """Where a component finds its files: the cluster PKI directory, etcd's CA and the apiserver's etcd client
    pair, and the directory of the component kubeconfigs.

    signing_cert: the certificate the controller-manager signs with, which it takes alone (one certificate, or it
    refuses to start); by default the cluster CA's `ca.crt`. Where `ca.crt` is a trust bundle that may hold two
    CAs during a rotation (kosmos.kubenest.pki_secrets), it is the bundle's `ca.signer.crt`."""

    def __init__(self, pki, etcd_ca, etcd_cert, etcd_key, conf, signing_cert=None):
        if signing_cert is None and isinstance(pki, str):
            signing_cert = posixpath.join(pki, "ca.crt")
        for what, path in (("pki", pki), ("etcd_ca", etcd_ca), ("etcd_cert", etcd_cert), ("etcd_key", etcd_key),
                           ("conf", conf), ("signing_cert", signing_cert)):
            if not isinstance(path, str) or not path.startswith("/") or posixpath.normpath(path) != path:
                raise ValueError("%s must be a normalized absolute path, got %r" % (what, path))
        self.pki, self.conf = pki, conf
        self.etcd_ca, self.etcd_cert, self.etcd_key = etcd_ca, etcd_cert, etcd_key
        self.signing_cert = signing_cert

    def cert(self, name):
        return posixpath.join(self.pki, name)

    def kubeconfig(self, component):
        return posixpath.join(self.conf, "%s.conf" % component)


def _port(what, value):
    port = int(value)
    if not 0 < port < 65536:
        raise ValueError("%s must be a TCP port, got %r" % (what, value))
    return str(port)


def apiserver_flags(files, secure_port, etcd_servers, service_cidr, cluster_domain="cluster.local",
                    advertise_address=None, kubelet_serving_ca=False, endpoint_reconciler=None,
                    aggregator_routing=False):
    """kubelet_serving_ca: kubelets serve with certificates the cluster CA signed (promoted nodes, approved by
    node_admit), so logs, exec and port-forward check them. endpoint_reconciler: who writes the `kubernetes`
    Service's endpoints (none: the run, when the server's own address is not what clients reach).
    aggregator_routing: webhooks and aggregated APIs are called at their pods' addresses, not at their Service's,
    for servers whose machine or network has no route to the Service range (kube-proxy rewrites only traffic
    that routes)."""
    options = []
    if advertise_address:
        options.append(("advertise-address", check_ip("the advertise address", advertise_address)))
    options += [
        ("secure-port", _port("the secure port", secure_port)),
        ("etcd-servers", ",".join(etcd_servers) if isinstance(etcd_servers, (list, tuple)) else str(etcd_servers)),
        ("etcd-cafile", files.etcd_ca),
        ("etcd-certfile", files.etcd_cert),
        ("etcd-keyfile", files.etcd_key),
        ("client-ca-file", files.cert("ca.crt")),
        ("tls-cert-file", files.cert("apiserver.crt")),
        ("tls-private-key-file", files.cert("apiserver.key")),
        ("kubelet-client-certificate", files.cert("apiserver-kubelet-client.crt")),
        ("kubelet-client-key", files.cert("apiserver-kubelet-client.key")),
        ("kubelet-preferred-address-types", "InternalIP,Hostname"),
    ]
    if kubelet_serving_ca:
        options.append(("kubelet-certificate-authority", files.cert("ca.crt")))
    options += [
        ("service-account-issuer", "https://kubernetes.default.svc.%s" % cluster_domain),
        # The discovery document would otherwise name the key set at the server's own address, which a hosted
        # server's pods cannot reach (it is the host's pod address): name it where every pod reaches the server.
        ("service-account-jwks-uri", "https://kubernetes.default.svc.%s/openid/v1/jwks" % cluster_domain),
        ("service-account-key-file", files.cert("sa.pub")),
        ("service-account-signing-key-file", files.cert("sa.key")),
        ("service-cluster-ip-range", check_cidr("the service CIDR", service_cidr)),
        ("authorization-mode", "Node,RBAC"),
        ("enable-admission-plugins", "NodeRestriction"),
        ("enable-bootstrap-token-auth", "true"),
        ("allow-privileged", "true"),
        ("requestheader-client-ca-file", files.cert("front-proxy-ca.crt")),
        ("requestheader-allowed-names", "front-proxy-client"),
        ("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
        ("requestheader-group-headers", "X-Remote-Group"),
        ("requestheader-username-headers", "X-Remote-User"),
        ("proxy-client-cert-file", files.cert("front-proxy-client.crt")),
        ("proxy-client-key-file", files.cert("front-proxy-client.key")),
        ("profiling", "false"),  # /debug/pprof stays closed
    ]
    if endpoint_reconciler:
        options.append(("endpoint-reconciler-type", str(endpoint_reconciler)))
    if aggregator_routing:
        options.append(("enable-aggregator-routing", "true"))
    return options


def controller_manager_flags(files, cluster_name, service_cidr, bind_address, leader_elect, pod_cidr=None,
                             node_cidr_mask=24):
    """pod_cidr: the controller-manager gives each node a subnet of it (hosted); without it, subnets come
    from elsewhere (bare bootstrap gives each machine its own)."""
    conf = files.kubeconfig("controller-manager")
    options = [
        ("kubeconfig", conf),
        ("authentication-kubeconfig", conf),
        ("authorization-kubeconfig", conf),
        ("bind-address", check_ip("the bind address", bind_address)),
        ("cluster-name", str(cluster_name)),
        ("cluster-signing-cert-file", files.signing_cert),
        ("cluster-signing-key-file", files.cert("ca.key")),
        ("root-ca-file", files.cert("ca.crt")),
        ("service-account-private-key-file", files.cert("sa.key")),
        ("service-cluster-ip-range", check_cidr("the service CIDR", service_cidr)),
    ]
    if pod_cidr:
        options += [("allocate-node-cidrs", "true"), ("cluster-cidr", check_cidr("the pod CIDR", pod_cidr)),
                    ("node-cidr-mask-size", str(int(node_cidr_mask)))]
    else:
        options.append(("allocate-node-cidrs", "false"))
    options += [
        ("use-service-account-credentials", "true"),
        ("controllers", "*,bootstrapsigner,tokencleaner"),
        ("leader-elect", "true" if leader_elect else "false"),
        ("profiling", "false"),
    ]
    return options


def scheduler_flags(files, bind_address, leader_elect):
    conf = files.kubeconfig("scheduler")
    return [
        ("kubeconfig", conf),
        ("authentication-kubeconfig", conf),
        ("authorization-kubeconfig", conf),
        ("bind-address", check_ip("the bind address", bind_address)),
        ("leader-elect", "true" if leader_elect else "false"),
        ("profiling", "false"),
    ]


# Extra flags a virtual cluster may give its components (spec.controlPlane.<component>.extraArgs). A hosted
# component runs in a pod of the host: a flag that names a file or directory would read or write the host node's
# disk (nothing of the tenant's is mounted there), and the flags the collection sets hold the component to its own
# etcd, certificates, network and ports. Both are refused; everything else is the tenant's own business (feature
# gates, timeouts, log levels, admission plugins beyond the collection's). deploy/crds/kosmos.io_virtualclusters.yaml
# refuses the same at admission (tests/unit/collection/test_control_plane_extra_args.py keeps the two alike).
EXTRA_FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*[a-z0-9]$|^[a-z0-9]$")
# Words of a flag name that take a path (e.g. audit-policy-file, cert-dir, log-file, authentication-config,
# egress-selector-config-file, kubeconfig) and name prefixes of flag families the collection owns.
PATH_WORDS = ("file", "dir", "path", "config", "kubeconfig")
# The audit- family belongs to spec.controlPlane.apiServer.audit, which keeps the log in the tenant's own pod.
OWNED_PREFIXES = ("etcd-", "tls-", "service-account-", "requestheader-", "proxy-client-", "kubelet-client-",
                  "cluster-signing-", "authentication-", "authorization-", "audit-")
# Flags whose values are addresses, ports or cloud credentials of the host: the component would listen or reach
# where the collection does not expect it.
HOST_FLAGS = ("bind-address", "secure-port", "advertise-address", "cloud-provider", "external-hostname",
              "permit-address-sharing", "permit-port-sharing", "master")
# Lists the collection sets that a virtual cluster may add to: its values come after the collection's.
EXTENDED_FLAGS = ("enable-admission-plugins",)
COMPONENT_FLAGS = {
    "apiserver": apiserver_flags,
    "controller-manager": controller_manager_flags,
    "scheduler": scheduler_flags,
}


def collection_flags():
    """The names of every flag the collection may set for any of the three components, in any mode: one list for
    all three, as the CRD has one schema for their extraArgs (a name that is no flag of a component would only
    stop it starting)."""
    files = Files("/p", "/e/ca", "/e/cert", "/e/key", "/c")
    options = apiserver_flags(files, 6443, ["https://127.0.0.1:2379"], "10.0.0.0/16", "cluster.local",
                              advertise_address="127.0.0.1", kubelet_serving_ca=True, endpoint_reconciler="none",
                              aggregator_routing=True)
    options += controller_manager_flags(files, "c", "10.0.0.0/16", "127.0.0.1", True, pod_cidr="10.1.0.0/16")
    options += scheduler_flags(files, "127.0.0.1", True)
    return sorted(({name for name, _value in options} | {"shutdown-delay-duration"}) - set(EXTENDED_FLAGS))


def refused_extra_flag(name):
    """Why `--name` may not be given to a component as an extra flag, or None when it may."""
    if name in collection_flags():
        return "the collection sets it"
    if any(word in name.split("-") for word in PATH_WORDS):
        return "it names a file or directory, which would be the host node's"
    if name.startswith(OWNED_PREFIXES):
        return "the collection owns the %s flags" % next(p for p in OWNED_PREFIXES if name.startswith(p))
    if name in HOST_FLAGS:
        return "it concerns the host's addresses, ports or cloud"
    return None


def extra_flags(component, args):
    """`args` (flag name without dashes -> value) checked for the component: (name, value) pairs in name order.
    Raises ValueError naming every refused flag and why."""
    if component not in COMPONENT_FLAGS:
        raise ValueError("extra flags are given by component (%s), not %r" % (", ".join(COMPONENT_FLAGS), component))
    if not isinstance(args, dict):
        raise ValueError("extra flags of %s must be a mapping of flag names to values, not %r"
                         % (component, type(args).__name__))
    problems, flags = [], []
    for name in sorted(args, key=str):
        value = args[name]
        if not isinstance(name, str) or not EXTRA_FLAG_NAME.match(name):
            problems.append("%r is not a flag name (lower-case words joined by '-', without the leading '--')"
                            % (name,))
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            problems.append("--%s: the value must be a string, not %r" % (name, value))
            continue
        value = str(value)
        why = refused_extra_flag(name)
        if why is None and (value.startswith("/") or "\n" in value):
            why = "its value is a path on the host node" if value.startswith("/") else "its value spans lines"
        if why:
            problems.append("--%s is refused: %s" % (name, why))
            continue
        flags.append((name, value))
    if problems:
        raise ValueError("extra flags of %s: %s" % (component, "; ".join(problems)))
    return flags


def with_extra_flags(component, options, args):
    """The component's options with the checked extra flags of `args`: a list the collection sets and a virtual
    cluster may extend gets the extra values after its own; every other extra flag comes after the collection's."""
    options = list(options)
    for name, value in extra_flags(component, args or {}):
        at = next((i for i, (key, _value) in enumerate(options) if key == name), None)
        if at is not None and name in EXTENDED_FLAGS:
            options[at] = (name, "%s,%s" % (options[at][1], value))
        else:
            options.append((name, value))
    return options


# A VirtualCluster's spec.controlPlane keys -> the components they configure.
SPEC_COMPONENTS = {"apiServer": "apiserver", "controllerManager": "controller-manager", "scheduler": "scheduler"}


def spec_extra_args(control_plane):
    """spec.controlPlane of a VirtualCluster as extra flags by component, checked. Raises ValueError."""
    if control_plane in (None, {}):
        return {}
    if not isinstance(control_plane, dict):
        raise ValueError("controlPlane must be a mapping of %s" % ", ".join(SPEC_COMPONENTS))
    unknown = sorted(str(key) for key in control_plane if key not in SPEC_COMPONENTS)
    if unknown:
        raise ValueError("controlPlane has no %s; it takes %s" % (", ".join(unknown), ", ".join(SPEC_COMPONENTS)))
    result, problems = {}, []
    for key, component in SPEC_COMPONENTS.items():
        settings = control_plane.get(key) or {}
        # The API server's authentication and audit are checked by plugin_utils/apiserver_config.py.
        taken = ("extraArgs", "authentication", "audit") if key == "apiServer" else ("extraArgs",)
        if not isinstance(settings, dict) or any(name not in taken for name in settings):
            problems.append("controlPlane.%s takes %s only" % (key, ", ".join(taken)))
            continue
        try:
            extra_flags(component, settings.get("extraArgs") or {})
        except ValueError as exc:
            problems.append("controlPlane.%s.extraArgs: %s" % (key, str(exc).split(": ", 1)[1]))
            continue
        result[component] = dict(settings.get("extraArgs") or {})
    if problems:
        raise ValueError("; ".join(problems))
    return result
