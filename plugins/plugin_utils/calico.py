# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A cluster's pod network from Calico's own images, built as data: the Kubernetes datastore (no etcd of its own),
VXLAN between nodes, no BGP daemon, no Typha, Calico IPAM over one pool.

For clusters that can pull Calico's published images (calico/cni, calico/node, calico/kube-controllers). The
objects follow the upstream manifest install of the pinned release; the CRDs declare Calico's kinds and leave
their validation to Calico, which checks every resource it reads and writes itself.
"""

from __future__ import annotations

import ipaddress
import json

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import container_resources
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_network import (
    NAMESPACE,
    READ,
    account,
    add_labels,
    api_env,
    check_dir,
    check_mtu,
    check_port,
    field_env,
    host_path,
    rules,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import check_image

NODE = "calico-node"
CNI_PLUGIN = "calico-cni-plugin"
CONTROLLERS = "calico-kube-controllers"
CONFIG = "calico-config"
NODE_LABELS = {"k8s-app": NODE}
CONTROLLERS_LABELS = {"k8s-app": CONTROLLERS}
CNI_CONF = "10-calico.conflist"
CNI_BIN_DIR = "/usr/lib/cni"  # where containerd looks for plugins on Debian nodes (upstream: /opt/cni/bin)
VXLAN_PORT = 4789  # Felix's default
VXLAN_MODES = ("Always", "CrossSubnet")
DEFAULT_NODE_RESOURCES = {"requests": {"cpu": "100m", "memory": "150Mi"}, "limits": {"memory": "1Gi"}}
DEFAULT_CONTROLLERS_RESOURCES = {"requests": {"cpu": "10m", "memory": "50Mi"}, "limits": {"memory": "300Mi"}}
CALICO_GROUP = "crd.projectcalico.org"
CALICO_GROUPS = ("projectcalico.org", CALICO_GROUP)

# (kind, plural, namespaced, status subresource) of Calico's kinds, all in crd.projectcalico.org/v1.
CALICO_KINDS = (
    ("BGPConfiguration", "bgpconfigurations", False, False),
    ("BGPFilter", "bgpfilters", False, False),
    ("BGPPeer", "bgppeers", False, False),
    ("BlockAffinity", "blockaffinities", False, False),
    ("CalicoNodeStatus", "caliconodestatuses", False, False),
    ("ClusterInformation", "clusterinformations", False, False),
    ("FelixConfiguration", "felixconfigurations", False, False),
    ("GlobalNetworkPolicy", "globalnetworkpolicies", False, False),
    ("GlobalNetworkSet", "globalnetworksets", False, False),
    ("HostEndpoint", "hostendpoints", False, False),
    ("IPAMBlock", "ipamblocks", False, False),
    ("IPAMConfig", "ipamconfigs", False, False),
    ("IPAMHandle", "ipamhandles", False, False),
    ("IPPool", "ippools", False, False),
    ("IPReservation", "ipreservations", False, False),
    ("KubeControllersConfiguration", "kubecontrollersconfigurations", False, True),
    ("NetworkPolicy", "networkpolicies", True, False),
    ("NetworkSet", "networksets", True, False),
    ("StagedGlobalNetworkPolicy", "stagedglobalnetworkpolicies", False, False),
    ("StagedKubernetesNetworkPolicy", "stagedkubernetesnetworkpolicies", True, False),
    ("StagedNetworkPolicy", "stagednetworkpolicies", True, False),
    ("Tier", "tiers", False, False),
)
# The cluster-wide policy kind of SIG Network's network-policy API, which calico-node watches. A CRD in a
# *.k8s.io group needs the approval annotation; this names the API's approval.
CLUSTER_POLICY = ("policy.networking.k8s.io", "v1alpha2", "ClusterNetworkPolicy", "clusternetworkpolicies",
                  "https://github.com/kubernetes-sigs/network-policy-api/pull/347")

IPAM = ("blockaffinities", "ipamblocks", "ipamhandles")
# calico-node mints the CNI plugin's token (TokenRequest) and writes it into the node's CNI kubeconfig.
NODE_RULES = [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "resourceNames": [CNI_PLUGIN],
               "verbs": ["create"]}] + rules(
    ("", ["pods", "nodes", "namespaces"], ("get",)),
    ("discovery.k8s.io", ["endpointslices"], ("watch", "list")),
    ("", ["endpoints", "services"], ("watch", "list", "get")),
    ("", ["configmaps"], ("get",)),
    ("", ["nodes/status"], ("patch", "update")),
    ("networking.k8s.io", ["networkpolicies"], ("watch", "list")),
    ("policy.networking.k8s.io", ["clusternetworkpolicies"], ("watch", "list")),
    ("", ["pods", "namespaces", "serviceaccounts"], ("list", "watch")),
    ("", ["pods/status"], ("patch",)),
    (CALICO_GROUPS, ["globalfelixconfigs", "globalbgpconfigs", "felixconfigurations", "bgppeers", "bgpfilters",
                     "bgpconfigurations", "ippools", "ipreservations", "ipamblocks", "globalnetworkpolicies",
                     "stagedglobalnetworkpolicies", "networkpolicies", "stagednetworkpolicies",
                     "stagedkubernetesnetworkpolicies", "globalnetworksets", "networksets", "clusterinformations",
                     "hostendpoints", "blockaffinities", "caliconodestatuses", "tiers"], READ),
    (CALICO_GROUPS, ["tiers"], ("create",)),
    (CALICO_GROUPS, ["ippools", "felixconfigurations", "bgpconfigurations", "clusterinformations"],
     ("create", "update")),
    (CALICO_GROUPS, ["caliconodestatuses"], ("update",)),
    ("", ["nodes"], READ),
    (CALICO_GROUPS, list(IPAM), ("get", "list", "create", "update", "delete")),
    (CALICO_GROUPS, ["ipamconfigurations", "ipamconfigs"], ("get", "create")),
    (CALICO_GROUPS, ["blockaffinities"], ("watch",)),
    ("apps", ["daemonsets"], ("get",)),
)
CNI_PLUGIN_RULES = rules(
    ("", ["pods", "nodes", "namespaces"], ("get",)),
    ("", ["pods/status"], ("patch",)),
    (CALICO_GROUPS, list(IPAM) + ["clusterinformations", "ippools", "ipreservations", "ipamconfigurations",
                                  "ipamconfigs"], ("get", "list", "create", "update", "delete")),
)
WRITE = ("get", "list", "create", "update", "delete", "watch")
CONTROLLERS_RULES = rules(
    ("", ["nodes", "pods", "namespaces"], READ),
    ("", ["services", "services/status"], ("get", "list", "update", "watch")),
    (CALICO_GROUPS, ["ipreservations"], ("list",)),
    (CALICO_GROUPS, list(IPAM) + ["ipamconfigurations", "ipamconfigs", "tiers", "hostendpoints"], WRITE),
    (CALICO_GROUPS, ["ippools"], ("list", "watch")),
    (CALICO_GROUPS, ["clusterinformations", "kubecontrollersconfigurations"],
     ("get", "list", "create", "update", "watch")),
    (CALICO_GROUPS, ["kubecontrollersconfigurations/status"], ("get", "update")),
    (CALICO_GROUPS, ["networkpolicies", "stagednetworkpolicies", "globalnetworkpolicies",
                     "stagedglobalnetworkpolicies"], WRITE),
    ("apps", ["daemonsets", "deployments"], READ),
)


def calico_crds():
    """Calico's kinds and the cluster-wide policy kind it watches, served as they are written."""
    objects = [_crd(CALICO_GROUP, "v1", kind, plural, namespaced, status)
               for kind, plural, namespaced, status in CALICO_KINDS]
    group, version, kind, plural, approval = CLUSTER_POLICY
    crd = _crd(group, version, kind, plural, False, True)
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": approval}
    objects.append(crd)
    return objects


def _crd(group, version, kind, plural, namespaced, status):
    served = {"name": version, "served": True, "storage": True,
              "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    if status:
        served["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (plural, group)},
        "spec": {"group": group, "scope": "Namespaced" if namespaced else "Cluster",
                 "names": {"kind": kind, "listKind": kind + "List", "plural": plural, "singular": kind.lower()},
                 "versions": [served]},
    }


def cni_network_config():
    """The CNI configuration calico's installer writes on each node, its placeholders filled in there."""
    conf = {"name": "k8s-pod-network", "cniVersion": "0.3.1", "plugins": [
        {"type": "calico", "log_level": "info", "log_file_path": "/var/log/calico/cni/cni.log",
         "datastore_type": "kubernetes", "nodename": "__KUBERNETES_NODE_NAME__", "mtu": "__CNI_MTU__",
         "ipam": {"type": "calico-ipam"}, "policy": {"type": "k8s"},
         "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}},
        {"type": "portmap", "snat": True, "capabilities": {"portMappings": True}},
    ]}
    # The installer puts a number in place of the MTU placeholder, so the placeholder stands unquoted.
    return json.dumps(conf, indent=2, sort_keys=True).replace('"__CNI_MTU__"', "__CNI_MTU__")


def config_map(mtu=0):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIG, "namespace": NAMESPACE},
            "data": {"typha_service_name": "none", "calico_backend": "vxlan", "veth_mtu": str(check_mtu(mtu)),
                     "cni_network_config": cni_network_config()}}


def check_pod_cidr(value):
    try:
        network = ipaddress.ip_network(str(value), strict=True)
    except ValueError:
        raise ValueError("pod CIDR %r is not a network address with a prefix length" % (value,)) from None
    if network.version != 4 or network.prefixlen > 26:
        raise ValueError("pod CIDR %r must be an IPv4 network of at least a /26 (one IPAM block)" % (value,))
    return str(network)


def _config_env(name, key):
    return {"name": name, "valueFrom": {"configMapKeyRef": {"name": CONFIG, "key": key}}}


def node_daemonset(node_image, cni_image, api_host, api_port, pod_cidr, vxlan_mode="Always",
                   vxlan_port=VXLAN_PORT, resources=None, cni_bin_dir=CNI_BIN_DIR):
    """calico-node on every node (Felix programs routes, the VXLAN device and policy in the node's network
    namespace, so it runs privileged there); its init containers install the CNI plugin and configuration."""
    node_image, cni_image = check_image(node_image), check_image(cni_image)
    if vxlan_mode not in VXLAN_MODES:
        raise ValueError("VXLAN mode %r is not one of %s" % (vxlan_mode, ", ".join(VXLAN_MODES)))
    api = api_env(api_host, api_port)
    node_name = field_env("KUBERNETES_NODE_NAME", "spec.nodeName")
    privileged = {"privileged": True}
    env = [
        {"name": "DATASTORE_TYPE", "value": "kubernetes"},
        {"name": "WAIT_FOR_DATASTORE", "value": "true"},
        field_env("NODENAME", "spec.nodeName"),
        _config_env("CALICO_NETWORKING_BACKEND", "calico_backend"),  # vxlan: no BGP daemon
        {"name": "CLUSTER_TYPE", "value": "k8s"},
        {"name": "IP", "value": "autodetect"},
        {"name": "CALICO_IPV4POOL_CIDR", "value": check_pod_cidr(pod_cidr)},
        {"name": "CALICO_IPV4POOL_IPIP", "value": "Never"},
        {"name": "CALICO_IPV4POOL_VXLAN", "value": vxlan_mode},
        {"name": "CALICO_IPV4POOL_NAT_OUTGOING", "value": "true"},
        {"name": "FELIX_VXLANPORT", "value": str(check_port(vxlan_port, "VXLAN port"))},
        _config_env("FELIX_VXLANMTU", "veth_mtu"),
        _config_env("FELIX_IPINIPMTU", "veth_mtu"),
        _config_env("FELIX_WIREGUARDMTU", "veth_mtu"),
        {"name": "CALICO_DISABLE_FILE_LOGGING", "value": "true"},
        {"name": "FELIX_DEFAULTENDPOINTTOHOSTACTION", "value": "ACCEPT"},
        {"name": "FELIX_IPV6SUPPORT", "value": "false"},
        {"name": "FELIX_HEALTHENABLED", "value": "true"},
        *api,
    ]
    pod = {
        "serviceAccountName": NODE,
        "hostNetwork": True,
        "priorityClassName": "system-node-critical",
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists", "effect": "NoExecute"},
                        {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [{
            # Moves host-local allocations of an older install into Calico IPAM; a no-op on a new node.
            "name": "upgrade-ipam",
            "image": cni_image,
            "command": ["/opt/cni/bin/calico-ipam", "-upgrade"],
            "env": [node_name, _config_env("CALICO_NETWORKING_BACKEND", "calico_backend"), *api],
            "securityContext": dict(privileged),
            "volumeMounts": [{"name": "host-local-net-dir", "mountPath": "/var/lib/cni/networks"},
                             {"name": "cni-bin-dir", "mountPath": "/host/opt/cni/bin"}],
        }, {
            "name": "install-cni",
            "image": cni_image,
            "command": ["/opt/cni/bin/install"],
            "env": [{"name": "CNI_CONF_NAME", "value": CNI_CONF},
                    _config_env("CNI_NETWORK_CONFIG", "cni_network_config"), node_name,
                    _config_env("CNI_MTU", "veth_mtu"), {"name": "SLEEP", "value": "false"}, *api],
            "securityContext": dict(privileged),
            "volumeMounts": [{"name": "cni-bin-dir", "mountPath": "/host/opt/cni/bin"},
                             {"name": "cni-net-dir", "mountPath": "/host/etc/cni/net.d"}],
        }, {
            # Mounts the bpf filesystem and a cgroup2 view on the node; best effort, nothing here needs eBPF.
            "name": "ebpf-bootstrap",
            "image": node_image,
            "command": ["calico-node", "-init", "-best-effort"],
            "securityContext": dict(privileged),
            "volumeMounts": [{"name": "sys-fs", "mountPath": "/sys/fs", "mountPropagation": "Bidirectional"},
                             {"name": "var-run-calico", "mountPath": "/var/run/calico",
                              "mountPropagation": "Bidirectional"},
                             {"name": "nodeproc", "mountPath": "/nodeproc", "readOnly": True}],
        }],
        "containers": [{
            "name": NODE,
            "image": node_image,
            "env": env,
            "securityContext": dict(privileged),
            "resources": container_resources(resources or DEFAULT_NODE_RESOURCES),
            "lifecycle": {"preStop": {"exec": {"command": ["/bin/calico-node", "-shutdown"]}}},
            "livenessProbe": {"exec": {"command": ["/bin/calico-node", "-felix-live"]}, "periodSeconds": 10,
                              "initialDelaySeconds": 10, "failureThreshold": 6, "timeoutSeconds": 10},
            "readinessProbe": {"exec": {"command": ["/bin/calico-node", "-felix-ready"]}, "periodSeconds": 10,
                               "timeoutSeconds": 10},
            "volumeMounts": [
                {"name": "cni-net-dir", "mountPath": "/host/etc/cni/net.d"},
                {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
                {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                {"name": "var-run-calico", "mountPath": "/var/run/calico"},
                {"name": "var-lib-calico", "mountPath": "/var/lib/calico"},
                {"name": "policysync", "mountPath": "/var/run/nodeagent"},
                {"name": "bpffs", "mountPath": "/sys/fs/bpf"},
                {"name": "cni-log-dir", "mountPath": "/var/log/calico/cni", "readOnly": True},
            ],
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }],
        "volumes": [
            host_path("lib-modules", "/lib/modules", None),
            host_path("var-run-calico", "/var/run/calico"),
            host_path("var-lib-calico", "/var/lib/calico"),
            host_path("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
            host_path("sys-fs", "/sys/fs/"),
            host_path("bpffs", "/sys/fs/bpf", "Directory"),
            host_path("nodeproc", "/proc", None),
            host_path("cni-bin-dir", check_dir(cni_bin_dir, "CNI plugin directory")),
            host_path("cni-net-dir", "/etc/cni/net.d", None),
            host_path("cni-log-dir", "/var/log/calico/cni", None),
            host_path("host-local-net-dir", "/var/lib/cni/networks", None),
            host_path("policysync", "/var/run/nodeagent"),
        ],
    }
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": NODE, "namespace": NAMESPACE, "labels": dict(NODE_LABELS)},
        "spec": {
            "selector": {"matchLabels": dict(NODE_LABELS)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": dict(NODE_LABELS)}, "spec": pod},
        },
    }


def controllers_deployment(image, api_host, api_port, resources=None):
    """Garbage-collects IPAM of deleted nodes and keeps Calico's view of nodes current."""
    image = check_image(image)
    check_status = "/usr/bin/check-status"
    pod = {
        "serviceAccountName": CONTROLLERS,
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": CONTROLLERS,
            "image": image,
            "env": [{"name": "ENABLED_CONTROLLERS", "value": "node,loadbalancer"},
                    {"name": "DATASTORE_TYPE", "value": "kubernetes"}, *api_env(api_host, api_port)],
            "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}},
            "resources": container_resources(resources or DEFAULT_CONTROLLERS_RESOURCES),
            "livenessProbe": {"exec": {"command": [check_status, "-l"]}, "periodSeconds": 10,
                              "initialDelaySeconds": 10, "failureThreshold": 6, "timeoutSeconds": 10},
            "readinessProbe": {"exec": {"command": [check_status, "-r"]}, "periodSeconds": 10},
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": CONTROLLERS, "namespace": NAMESPACE, "labels": dict(CONTROLLERS_LABELS)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(CONTROLLERS_LABELS)},
            "strategy": {"type": "Recreate"},
            "template": {"metadata": {"labels": dict(CONTROLLERS_LABELS)}, "spec": pod},
        },
    }


def _budget():
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": CONTROLLERS, "namespace": NAMESPACE, "labels": dict(CONTROLLERS_LABELS)},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(CONTROLLERS_LABELS)}}}


def _tier_getter():
    """kube-controller-manager's garbage collector reads Calico's tiers."""
    name = "calico-tier-getter"
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": rules(("projectcalico.org", ["tiers"], ("get",)))},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                       "name": "system:kube-controller-manager"}]},
    ]


def manifests(node_image, cni_image, controllers_image, api_host, api_port, pod_cidr, vxlan_mode="Always",
              vxlan_port=VXLAN_PORT, mtu=0, labels=None, node_resources=None, controllers_resources=None,
              cni_bin_dir=CNI_BIN_DIR):
    """Every object of the pod network, in an order they can be applied in (kinds before their users)."""
    api_port = check_port(api_port, "API server port")
    objects = calico_crds() + [config_map(mtu)]
    objects += account(NODE, NODE_RULES)
    objects += account(CNI_PLUGIN, CNI_PLUGIN_RULES)
    objects += account(CONTROLLERS, CONTROLLERS_RULES)
    objects += _tier_getter()
    objects.append(_budget())
    objects.append(controllers_deployment(controllers_image, api_host, api_port, controllers_resources))
    objects.append(node_daemonset(node_image, cni_image, api_host, api_port, pod_cidr, vxlan_mode, vxlan_port,
                                  node_resources, cni_bin_dir))
    return add_labels(objects, labels)
