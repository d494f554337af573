# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A cluster's pod network and NetworkPolicy engine (Cilium), built as data.

VXLAN tunnel between nodes, pod addresses from each Node's spec.podCIDR (the controller-manager of the cluster
the node is in hands those out), kube-proxy left in charge of Services, hostPorts mapped by the chained portmap
plugin. Features that need more than the kernels and cgroup layout kubenest nodes have (socket load balancing, L7
proxy, Hubble, health probes between nodes) are off. Every object is a dict; settings land in fields of their own
after a check.
"""

from __future__ import annotations

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
    namespace_role,
    rules,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import check_image

AGENT = "cilium"
OPERATOR = "cilium-operator"
CONFIG = "cilium-config"
AGENT_LABELS = {"k8s-app": "cilium"}
OPERATOR_LABELS = {"io.cilium/app": "operator", "name": "cilium-operator"}
HEALTH_PORT = 9879  # the agent's own /healthz, on loopback
OPERATOR_HEALTH_PORT = 9234
CNI_CONF = "05-cilium.conflist"
CNI_BIN_DIR = "/usr/lib/cni"  # where containerd looks for plugins on Debian nodes (upstream: /opt/cni/bin)
TUNNEL_DEVICE = "cilium_vxlan"
IP_TOOL = "/usr/sbin/ip"  # iproute2's: busybox's ip cannot make a flow-based VXLAN device
DEFAULT_AGENT_RESOURCES = {"requests": {"cpu": "100m", "memory": "200Mi"}, "limits": {"memory": "1Gi"}}
DEFAULT_OPERATOR_RESOURCES = {"requests": {"cpu": "20m", "memory": "50Mi"}, "limits": {"memory": "300Mi"}}

# Agent and operator read these as flags (one file per key under --config-dir).
BASE_CONFIG = {
    "routing-mode": "tunnel",
    "tunnel-protocol": "vxlan",
    "ipam": "kubernetes",
    "k8s-require-ipv4-pod-cidr": "true",
    "enable-ipv4": "true",
    "enable-ipv6": "false",
    "enable-ipv4-masquerade": "true",
    "enable-bpf-masquerade": "false",
    "kube-proxy-replacement": "false",
    "bpf-lb-sock": "false",
    "enable-policy": "default",
    "enable-k8s-networkpolicy": "true",
    "enable-l7-proxy": "false",
    "enable-hubble": "false",
    "enable-health-checking": "false",
    "enable-endpoint-health-checking": "false",
    "identity-allocation-mode": "crd",
    "cni-exclusive": "true",
    "write-cni-conf-when-ready": "/host/etc/cni/net.d/" + CNI_CONF,
    # kube-proxy keeps Services, so Cilium's own hostPort (part of its kube-proxy replacement) is off: the CNI
    # portmap plugin, chained after cilium-cni in the file the agent writes, maps a pod's hostPort instead.
    "cni-chaining-mode": "portmap",
    "install-no-conntrack-iptables-rules": "false",
    "enable-gateway-api": "false",
    "enable-ingress-controller": "false",
    "clustermesh-enable-mcs-api": "false",
    "bpf-root": "/sys/fs/bpf",
    "cgroup-root": "/run/cilium/cgroupv2",
    # The node's /proc with kernel.* read-only: nodes that share a kernel (containers, nspawn machines) must not
    # change kernel-wide settings for their neighbours; Cilium only warns when it cannot.
    "procfs": "/host/proc",
    "operator-api-serve-addr": "127.0.0.1:%d" % OPERATOR_HEALTH_PORT,
    "agent-health-port": str(HEALTH_PORT),
    "cluster-name": "default",
    "enable-gops": "false",
    "debug": "false",
}


def config_map(tunnel_port=8472, mtu=0):
    data = dict(BASE_CONFIG)
    data["tunnel-port"] = str(check_port(tunnel_port, "tunnel port"))
    if check_mtu(mtu):
        data["mtu"] = str(int(mtu))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIG, "namespace": NAMESPACE},
            "data": data}


CILIUM_READ = ("ciliumclusterwidenetworkpolicies", "ciliumendpoints", "ciliumendpointslices", "ciliumidentities",
               "ciliumnetworkpolicies", "ciliumnodes", "ciliumnodeconfigs", "ciliumcidrgroups",
               "ciliumlocalredirectpolicies", "ciliumegressgatewaypolicies", "ciliumloadbalancerippools",
               "ciliumpodippools", "ciliumenvoyconfigs", "ciliumclusterwideenvoyconfigs",
               "ciliuml2announcementpolicies", "ciliumbgpnodeconfigs", "ciliumbgpadvertisements",
               "ciliumbgppeerconfigs", "ciliumdatapathplugins")

AGENT_RULES = rules(
    ("networking.k8s.io", ["networkpolicies"], READ),
    ("policy.networking.k8s.io", ["clusternetworkpolicies"], READ),
    ("discovery.k8s.io", ["endpointslices"], READ),
    ("", ["namespaces", "services", "pods", "nodes"], READ),
    ("", ["events"], ("create", "patch")),
    ("", ["nodes/status"], ("patch",)),
    ("coordination.k8s.io", ["leases"], ("create", "get", "update", "list", "delete")),
    ("apiextensions.k8s.io", ["customresourcedefinitions"], READ),
    ("cilium.io", CILIUM_READ, ("list", "watch")),
    ("cilium.io", ["ciliumidentities", "ciliumendpoints", "ciliumnodes"], ("create",)),
    ("cilium.io", ["ciliumidentities"], ("update",)),
    ("cilium.io", ["ciliumendpoints"], ("delete", "get")),
    ("cilium.io", ["ciliumnodes", "ciliumnodes/status"], ("get", "update")),
    ("cilium.io", ["ciliumendpoints", "ciliumendpoints/status"], ("patch",)),
)

# The agent watches its own ConfigMap for settings that change while it runs; only that namespace's.
AGENT_NAMESPACE_RULES = rules(("", ["configmaps"], READ))

OPERATOR_RULES = rules(
    ("", ["pods"], READ + ("delete",)),
    ("", ["nodes"], ("list", "watch")),
    ("", ["nodes", "nodes/status"], ("patch",)),
    ("", ["namespaces", "serviceaccounts", "configmaps"], READ),
    ("", ["services"], READ),
    ("", ["services/status"], ("update", "patch")),
    ("", ["events"], ("create", "patch")),
    ("discovery.k8s.io", ["endpointslices"], READ),
    ("cilium.io", ["ciliumnetworkpolicies", "ciliumclusterwidenetworkpolicies"],
     ("create", "update", "deletecollection", "patch", "get", "list", "watch")),
    ("cilium.io", ["ciliumnetworkpolicies/status", "ciliumclusterwidenetworkpolicies/status"], ("patch", "update")),
    ("cilium.io", ["ciliumendpoints", "ciliumidentities"], ("delete", "list", "watch")),
    ("cilium.io", ["ciliumidentities"], ("update", "create")),
    ("cilium.io", ["ciliumnodes"], ("create", "update", "get", "list", "watch", "delete")),
    ("cilium.io", ["ciliumnodes/status"], ("update",)),
    ("cilium.io", ["ciliumendpointslices", "ciliumenvoyconfigs", "ciliumcidrgroups", "ciliumbgpclusterconfigs",
                   "ciliumbgpnodeconfigoverrides", "ciliumbgppeerconfigs", "ciliumbgpadvertisements",
                   "ciliumbgpnodeconfigs"],
     ("create", "update", "get", "list", "watch", "delete", "patch")),
    ("cilium.io", ["ciliumloadbalancerippools", "ciliumpodippools", "ciliumdatapathplugins"], READ),
    ("cilium.io", ["ciliumpodippools"], ("create",)),
    ("cilium.io", ["ciliumloadbalancerippools/status"], ("patch",)),
    # The operator registers Cilium's CRDs and keeps them current.
    ("apiextensions.k8s.io", ["customresourcedefinitions"], ("create", "get", "list", "watch", "update")),
    ("coordination.k8s.io", ["leases"], ("create", "get", "update")),
)


def _tunnel_device_script(tunnel_port):
    # Cilium 1.20 hashes its datapath configuration (the tunnel device's index in it) before it makes that device:
    # on a node without one the first hash fails, and every BPF template compiled until the agent's next
    # datapath initialisation is thrown away and compiled again. Made here as the agent makes it (flow-based
    # VXLAN on its port; the agent sets MTU and state), the first hash holds. A device on another port the
    # agent replaces; an image without iproute2 leaves it all to the agent.
    return ("[ ! -x {ip} ] || {ip} link show {dev} >/dev/null 2>&1 || "
            "{ip} link add {dev} type vxlan external dstport {port}".format(
                ip=IP_TOOL, dev=TUNNEL_DEVICE, port=check_port(tunnel_port, "tunnel port")))


def agent_daemonset(image, api_host, api_port, resources=None, cni_bin_dir=CNI_BIN_DIR, tunnel_port=8472):
    """The agent on every node: it compiles and loads the datapath, so it runs privileged in the node's network
    namespace. Its init container mounts the bpf filesystem, copies the CNI plugin onto the node and makes the
    tunnel device."""
    image = check_image(image)
    env = [field_env("K8S_NODE_NAME", "spec.nodeName"), field_env("CILIUM_K8S_NAMESPACE", "metadata.namespace"),
           *api_env(api_host, api_port)]
    mounts = [
        {"name": "config", "mountPath": "/tmp/cilium/config-map", "readOnly": True},
        {"name": "bpf-maps", "mountPath": "/sys/fs/bpf", "mountPropagation": "Bidirectional"},
        {"name": "cilium-run", "mountPath": "/var/run/cilium"},
        {"name": "cni-conf", "mountPath": "/host/etc/cni/net.d"},
        {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
        {"name": "host-proc", "mountPath": "/host/proc"},
        {"name": "host-proc-kernel", "mountPath": "/host/proc/sys/kernel", "readOnly": True},
    ]
    pod = {
        "serviceAccountName": AGENT,
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "priorityClassName": "system-node-critical",
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 1,
        "tolerations": [{"operator": "Exists"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "automountServiceAccountToken": True,
        # One init container, not one per job: each container start costs the node's new agent about a second.
        "initContainers": [{
            "name": "prepare-node",
            "image": image,
            # The maps and programs outlive the agent's restarts only in the node's bpf filesystem; the CNI plugin
            # is replaced atomically, as the kubelet may run it meanwhile.
            "command": ["/bin/busybox", "sh", "-ec",
                        "grep -q ' /sys/fs/bpf bpf ' /proc/mounts || mount -t bpf bpf /sys/fs/bpf\n"
                        "cp /usr/local/bin/cilium-cni /host/opt/cni/bin/.cilium-cni.new\n"
                        "mv /host/opt/cni/bin/.cilium-cni.new /host/opt/cni/bin/cilium-cni\n"
                        + _tunnel_device_script(tunnel_port)],
            "securityContext": {"privileged": True},
            "volumeMounts": [{"name": "bpf-maps", "mountPath": "/sys/fs/bpf", "mountPropagation": "Bidirectional"},
                             {"name": "cni-path", "mountPath": "/host/opt/cni/bin"}],
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }],
        "containers": [{
            "name": "cilium-agent",
            "image": image,
            "command": ["/usr/local/bin/cilium-agent"],
            "args": ["--config-dir=/tmp/cilium/config-map"],
            "env": env,
            "securityContext": {"privileged": True},
            "resources": container_resources(resources or DEFAULT_AGENT_RESOURCES),
            "volumeMounts": mounts,
            "terminationMessagePolicy": "FallbackToLogsOnError",
            # Every second while it starts: a new node's pods wait for the agent (at most 300 s, as before).
            "startupProbe": _health_probe(HEALTH_PORT, period=1, failures=300),
            "readinessProbe": _health_probe(HEALTH_PORT, period=5, failures=3),
            "livenessProbe": _health_probe(HEALTH_PORT, period=10, failures=10),
        }],
        "volumes": [
            {"name": "config", "configMap": {"name": CONFIG}},
            host_path("bpf-maps", "/sys/fs/bpf"),
            host_path("cilium-run", "/var/run/cilium"),
            host_path("cni-conf", "/etc/cni/net.d"),
            host_path("cni-path", check_dir(cni_bin_dir, "CNI plugin directory")),
            host_path("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
            host_path("host-proc", "/proc", "Directory"),
            host_path("host-proc-kernel", "/proc/sys/kernel", "Directory"),
        ],
    }
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": AGENT, "namespace": NAMESPACE, "labels": dict(AGENT_LABELS)},
        "spec": {
            "selector": {"matchLabels": dict(AGENT_LABELS)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
            "template": {"metadata": {"labels": dict(AGENT_LABELS)}, "spec": pod},
        },
    }


def _health_probe(port, period, failures):
    return {"httpGet": {"host": "127.0.0.1", "port": port, "path": "/healthz",
                        "httpHeaders": [{"name": "brief", "value": "true"}]},
            "periodSeconds": period, "failureThreshold": failures, "timeoutSeconds": 5}


def operator_deployment(image, api_host, api_port, resources=None):
    """The operator registers Cilium's CRDs and collects unused identities and endpoints. It uses the node's
    network, so it runs before the pod network does."""
    image = check_image(image)
    pod = {
        "serviceAccountName": OPERATOR,
        "hostNetwork": True,
        "priorityClassName": "system-cluster-critical",
        "tolerations": [{"operator": "Exists"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "containers": [{
            "name": "cilium-operator",
            "image": image,
            "command": ["/usr/local/bin/cilium-operator-generic"],
            "args": ["--config-dir=/tmp/cilium/config-map"],
            "env": [field_env("K8S_NODE_NAME", "spec.nodeName"),
                    field_env("CILIUM_K8S_NAMESPACE", "metadata.namespace"), *api_env(api_host, api_port)],
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "resources": container_resources(resources or DEFAULT_OPERATOR_RESOURCES),
            "volumeMounts": [{"name": "config", "mountPath": "/tmp/cilium/config-map", "readOnly": True}],
            "livenessProbe": {"httpGet": {"host": "127.0.0.1", "port": OPERATOR_HEALTH_PORT, "path": "/healthz"},
                              "initialDelaySeconds": 30, "periodSeconds": 10, "timeoutSeconds": 3},
            "readinessProbe": {"httpGet": {"host": "127.0.0.1", "port": OPERATOR_HEALTH_PORT, "path": "/healthz"},
                               "periodSeconds": 5, "failureThreshold": 5, "timeoutSeconds": 3},
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }],
        "volumes": [{"name": "config", "configMap": {"name": CONFIG}}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": OPERATOR, "namespace": NAMESPACE, "labels": dict(OPERATOR_LABELS)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(OPERATOR_LABELS)},
            "strategy": {"type": "Recreate"},
            "template": {"metadata": {"labels": dict(OPERATOR_LABELS)}, "spec": pod},
        },
    }


def manifests(agent_image, operator_image, api_host, api_port, tunnel_port=8472, mtu=0, labels=None,
              agent_resources=None, operator_resources=None, cni_bin_dir=CNI_BIN_DIR):
    """Every object of the pod network, in an order they can be applied in."""
    objects = [config_map(tunnel_port, mtu)]
    objects += account(AGENT, AGENT_RULES)
    objects += namespace_role(AGENT, AGENT_NAMESPACE_RULES)
    objects += account(OPERATOR, OPERATOR_RULES)
    objects.append(operator_deployment(operator_image, api_host, api_port, operator_resources))
    objects.append(agent_daemonset(agent_image, api_host, api_port, agent_resources, cni_bin_dir, tunnel_port))
    return add_labels(objects, labels)


# Cilium's operator labels each CRD it registers with the schema version of its release and updates a CRD whose
# label differs (pkg/k8s/apis/cilium.io/register.go); CRDs registered ahead of it carry the same label.
CRD_SCHEMA_LABEL = "io.cilium.k8s.crd.schema.version"
CRD_GROUP = "cilium.io"


def _crd_problem(obj):
    if not isinstance(obj, dict) or obj.get("kind") != "CustomResourceDefinition" or \
            obj.get("apiVersion") != "apiextensions.k8s.io/v1":
        return "is not an apiextensions.k8s.io/v1 CustomResourceDefinition"
    spec = obj.get("spec") or {}
    if spec.get("group") != CRD_GROUP:
        return "is not in group %s" % CRD_GROUP
    names = spec.get("names") or {}
    if (obj.get("metadata") or {}).get("name") != "%s.%s" % (names.get("plural"), CRD_GROUP):
        return "is not named <plural>.%s" % CRD_GROUP
    if not spec.get("versions"):
        return "has no versions"
    return None


def crd_definitions(documents, schema_version):
    """The CRDs as Cilium's operator registers them: name, schema version label, and the names, scope, versions
    and conversion of the release's definition (`documents`: (source, parsed YAML) pairs)."""
    if not isinstance(schema_version, str) or not schema_version.strip() or any(c.isspace() for c in schema_version):
        raise ValueError("the CRD schema version must be one word, got %r" % (schema_version,))
    crds = []
    for source, obj in documents:
        problem = _crd_problem(obj)
        if problem:
            raise ValueError("%s %s" % (source, problem))
        spec = obj["spec"]
        crds.append({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": obj["metadata"]["name"], "labels": {CRD_SCHEMA_LABEL: schema_version}},
            "spec": {key: spec[key] for key in ("group", "names", "scope", "versions", "conversion") if key in spec},
        })
    if not crds:
        raise ValueError("no CustomResourceDefinitions found")
    return sorted(crds, key=lambda crd: crd["metadata"]["name"])


def crds_to_register(crds, registered):
    """Those of `crds` missing from `registered` ({name: schema label}) or labelled with another schema version."""
    return [crd for crd in crds
            if registered.get(crd["metadata"]["name"]) != crd["metadata"]["labels"][CRD_SCHEMA_LABEL]]
