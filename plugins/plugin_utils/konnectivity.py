# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The tunnel from a tenant's API server to its nodes and pods (Konnectivity), built as data.

A tenant's API server runs in the host cluster and cannot route to the tenant's pod network. With an egress
selector, it sends everything bound for the cluster (kubelets for logs and exec, admission webhooks, aggregated
APIs) to a proxy server beside it over a Unix socket; agents on the tenant's nodes dial that server out, prove
who they are with a token of the tenant's own service account (audience AUDIENCE, checked by TokenReview
against the tenant's API server), and open the connections from inside the tenant's network.
"""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import container_resources
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_network import (
    NAMESPACE,
    check_dir,
    check_host,
    check_port,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import check_image

AGENT = "konnectivity-agent"
SERVER_USER = "system:konnectivity-server"
AUDIENCE = "system:konnectivity-server"
AGENT_LABELS = {"k8s-app": AGENT}
AGENT_PORT = 8132
ADMIN_PORT = 8133
HEALTH_PORT = 8134
AGENT_HEALTH_PORT = 8093
TOKEN_PATH = "/var/run/secrets/tokens/konnectivity-agent-token"
DEFAULT_AGENT_RESOURCES = {"requests": {"cpu": "10m", "memory": "30Mi"}, "limits": {"memory": "100Mi"}}


def egress_selector_config(uds_name):
    """The API server's --egress-selector-config-file: traffic to the cluster goes through the proxy server."""
    return {
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [{
            "name": "cluster",
            "connection": {"proxyProtocol": "GRPC",
                           "transport": {"uds": {"udsName": check_dir(uds_name, "proxy socket")}}},
        }],
    }


def server_args(uds_name, cert_file, key_file, kubeconfig, agent_port=AGENT_PORT, admin_port=ADMIN_PORT,
                health_port=HEALTH_PORT, agent_bind_address="", health_bind_address="127.0.0.1", server_count=1):
    """proxy-server flags: the API server's side on a Unix socket, agents on TLS at `agent_port` with the API
    server's serving certificate (agents dial the same address as kubelets), tokens checked by TokenReview.
    server_count: the proxy servers behind the agents' address (one per API server). Told it, each agent
    dials again until it holds a tunnel to every one of them, so each API server reaches every node."""
    args = [
        "--mode=grpc",
        "--server-port=0",  # the API server's side is the socket only
        "--uds-name=%s" % check_dir(uds_name, "proxy socket"),
        "--delete-existing-uds-file=true",
        "--cluster-cert=%s" % check_dir(cert_file, "proxy certificate"),
        "--cluster-key=%s" % check_dir(key_file, "proxy key"),
        "--agent-port=%d" % check_port(agent_port, "agent port"),
        "--admin-port=%d" % check_port(admin_port, "admin port"),
        "--health-port=%d" % check_port(health_port, "health port"),
        "--health-bind-address=%s" % check_host(health_bind_address),
        "--agent-namespace=%s" % NAMESPACE,
        "--agent-service-account=%s" % AGENT,
        "--authentication-audience=%s" % AUDIENCE,
        "--kubeconfig=%s" % check_dir(kubeconfig, "proxy kubeconfig"),
        # idle tunnels through NAT and load balancers stay open; a lost agent is noticed within a minute
        "--keepalive-time=30s",
        "--frontend-keepalive-time=30s",
        # a connection to a node goes through that node's agent; anything else through any agent
        "--proxy-strategies=destHost,default",
    ]
    if agent_bind_address:
        args.append("--agent-bind-address=%s" % check_host(agent_bind_address))
    if server_count != 1:
        if isinstance(server_count, bool) or not isinstance(server_count, int) or server_count < 1:
            raise ValueError("the proxy server count must be a positive number, not %r" % (server_count,))
        args.append("--server-count=%d" % server_count)
    return args


def agent_args(server_host, server_port, ca_file, token_path=TOKEN_PATH, health_port=AGENT_HEALTH_PORT,
               admin_port=None, identifiers=""):
    """proxy-agent flags: dial the proxy server out, verify it with the tenant CA, prove itself with a token;
    `identifiers` (e.g. ipv4=<node address>) lets the server send a node's connections to that node's agent."""
    args = [
        "--proxy-server-host=%s" % check_host(server_host),
        "--proxy-server-port=%d" % check_port(server_port, "proxy server port"),
        "--ca-cert=%s" % check_dir(ca_file, "proxy CA"),
        "--service-account-token-path=%s" % check_dir(token_path, "agent token"),
        "--health-server-host=127.0.0.1",
        "--health-server-port=%d" % check_port(health_port, "agent health port"),
        "--keepalive-time=30s",
    ]
    if admin_port is not None:
        args.append("--admin-server-port=%d" % check_port(admin_port, "agent admin port"))
    if identifiers:
        args.append("--agent-identifiers=%s" % identifiers)
    return args


UDS_DIR = "/run/konnectivity"
UDS_NAME = UDS_DIR + "/konnectivity-server.socket"
EGRESS_DIR = "/etc/kubernetes/konnectivity"
EGRESS_FILE = EGRESS_DIR + "/egress-selector.json"
DEFAULT_SERVER_RESOURCES = {"requests": {"cpu": "5m", "memory": "30Mi"}, "limits": {"memory": "200Mi"}}


def add_to_apiserver_pod(pod, image, egress_secret, cert_file, key_file, kubeconfig, mounts, resources=None,
                         server_count=1):
    """The proxy server as a second container of a hosted API server's pod, sharing the socket directory; the
    API server sends cluster traffic there (its egress selector comes from the Secret `egress_secret`).
    `mounts` are the API server container's (volume name, path) pairs the proxy reads its certificate, key and
    kubeconfig from."""
    image = check_image(image)
    apiserver = pod["containers"][0]
    apiserver["command"] = apiserver["command"] + ["--egress-selector-config-file=%s" % EGRESS_FILE]
    apiserver["volumeMounts"] = apiserver["volumeMounts"] + [
        {"name": "konnectivity-uds", "mountPath": UDS_DIR},
        {"name": "konnectivity-egress", "mountPath": EGRESS_DIR, "readOnly": True}]
    pod["containers"] = pod["containers"] + [{
        "name": "konnectivity-server",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # health on the pod's address, for the kubelet's probe; the admin port stays on loopback
        "command": ["/usr/local/bin/proxy-server"] + server_args(UDS_NAME, cert_file, key_file, kubeconfig,
                                                                 health_bind_address="0.0.0.0",
                                                                 server_count=server_count),
        "ports": [{"name": "konnectivity", "containerPort": AGENT_PORT}],
        "resources": container_resources(resources or DEFAULT_SERVER_RESOURCES),
        "livenessProbe": {"httpGet": {"port": HEALTH_PORT, "path": "/healthz"},
                          "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 5},
        "volumeMounts": [{"name": name, "mountPath": path, "readOnly": True} for name, path in mounts]
        + [{"name": "konnectivity-uds", "mountPath": UDS_DIR}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }]
    pod["volumes"] = pod["volumes"] + [
        {"name": "konnectivity-uds", "emptyDir": {"sizeLimit": "1Mi"}},
        {"name": "konnectivity-egress", "secret": {"secretName": egress_secret,
                                                   "items": [{"key": "egress-selector.json",
                                                              "path": "egress-selector.json"}]}}]
    return pod


def server_rbac():
    """The proxy server's own identity in the tenant may review tokens and nothing else."""
    return [{
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": SERVER_USER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": SERVER_USER}],
    }]


def agent_objects(image, server_host, server_port, resources=None):
    """The agents in the tenant: one per node, in the node's network (it reaches kubelets, pod and Service
    addresses from there), with a token only the proxy server accepts."""
    image = check_image(image)
    token_dir, token_file = TOKEN_PATH.rsplit("/", 1)
    pod = {
        "serviceAccountName": AGENT,
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "priorityClassName": "system-node-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"operator": "Exists"}],
        "automountServiceAccountToken": False,
        # the kubelet gives the projected token to the pod's user
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": AGENT,
            "image": image,
            # $(HOST_IP) is expanded by the kubelet from the container's environment
            "args": agent_args(server_host, server_port, "/var/run/secrets/konnectivity/ca.crt",
                               identifiers="ipv4=$(HOST_IP)"),
            "env": [{"name": "HOST_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}}}],
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "resources": container_resources(resources or DEFAULT_AGENT_RESOURCES),
            "livenessProbe": {"httpGet": {"host": "127.0.0.1", "port": AGENT_HEALTH_PORT, "path": "/healthz"},
                              "initialDelaySeconds": 15, "periodSeconds": 10, "timeoutSeconds": 5},
            "readinessProbe": {"httpGet": {"host": "127.0.0.1", "port": AGENT_HEALTH_PORT, "path": "/readyz"},
                               "periodSeconds": 5, "timeoutSeconds": 5},
            "volumeMounts": [{"name": "token", "mountPath": token_dir, "readOnly": True},
                             {"name": "ca", "mountPath": "/var/run/secrets/konnectivity", "readOnly": True}],
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }],
        "volumes": [
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {
                "path": token_file, "audience": AUDIENCE, "expirationSeconds": 3600}}]}},
            # the tenant CA as every pod gets it, which signed the API server's (and so the proxy's) certificate
            {"name": "ca", "configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        ],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": AGENT, "namespace": NAMESPACE}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         # The DaemonSet's own labels say who manages it (not its pods': a change there would roll them).
         "metadata": {"name": AGENT, "namespace": NAMESPACE,
                      "labels": dict(AGENT_LABELS, **{"app.kubernetes.io/managed-by": "kosmos.kubenest"})},
         "spec": {"selector": {"matchLabels": dict(AGENT_LABELS)},
                  "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                  "template": {"metadata": {"labels": dict(AGENT_LABELS)}, "spec": pod}}},
    ]
