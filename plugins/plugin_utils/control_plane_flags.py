# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Flags of kube-apiserver, kube-controller-manager and kube-scheduler, defined once for both modes: systemd
units on machines (bare bootstrap) and Deployments of a hosted control plane. Only what truly differs between
the modes is a parameter; every other flag is the same in both."""

from __future__ import annotations

import posixpath

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import check_cidr, check_ip


class Files:
    """Where a component finds its files: the cluster PKI directory, etcd's CA and the apiserver's etcd client
    pair, and the directory of the component kubeconfigs."""

    def __init__(self, pki, etcd_ca, etcd_cert, etcd_key, conf):
        for what, path in (("pki", pki), ("etcd_ca", etcd_ca), ("etcd_cert", etcd_cert), ("etcd_key", etcd_key),
                           ("conf", conf)):
            if not isinstance(path, str) or not path.startswith("/") or posixpath.normpath(path) != path:
                raise ValueError("%s must be a normalized absolute path, got %r" % (what, path))
        self.pki, self.conf = pki, conf
        self.etcd_ca, self.etcd_cert, self.etcd_key = etcd_ca, etcd_cert, etcd_key

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
        ("cluster-signing-cert-file", files.cert("ca.crt")),
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
