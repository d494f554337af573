"""kubeadm's configuration for the sandbox's kubeadm host, built as data and written as JSON documents.

kubeadm reads YAML; every document here is JSON (a subset of YAML), so no value is open to a second reading
(PyYAML and Go's YAML disagree on plain scalars). Documents are separated the way kubeadm splits them.
"""

from __future__ import annotations

import json

from sandbox.registry import NAME as REGISTRY

API_VERSION = "kubeadm.k8s.io/v1beta4"
API_PORT = 6443
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
# What kubeadm's preflight cannot see in a systemd-nspawn machine: the kernel's configuration (no /boot or
# /proc/config.gz inside), and cgroup v1, which the pinned kubelet still accepts with failCgroupV1: false.
IGNORED_PREFLIGHT = ("SystemVerification",)
CLUSTER_DOMAIN = "cluster.local"


def _node_registration(name: str, ip: str, taints: list[dict] | None) -> dict:
    registration = {"name": name, "criSocket": CRI_SOCKET, "ignorePreflightErrors": list(IGNORED_PREFLIGHT),
                    # the machines have one address on the bridge and no default route to guess it from
                    "kubeletExtraArgs": [{"name": "node-ip", "value": ip}]}
    if taints is not None:
        registration["taints"] = taints
    return registration


def kubelet(dns_ip: str) -> dict:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # The machines' cgroups are v1 (deprecated upstream, refused by default since 1.35) and cgroupfs-driven,
        # like their containerd's runc.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "clusterDNS": [dns_ip],
        "clusterDomain": CLUSTER_DOMAIN,
    }


def init_documents(*, name: str, ip: str, versions: dict[str, str], pod_cidr: str, service_cidr: str,
                   dns_ip: str) -> list[dict]:
    """InitConfiguration, ClusterConfiguration, KubeletConfiguration and KubeProxyConfiguration of `kubeadm init`
    on the first control-plane machine."""
    init = {
        "apiVersion": API_VERSION,
        "kind": "InitConfiguration",
        "localAPIEndpoint": {"advertiseAddress": ip, "bindPort": API_PORT},
        "nodeRegistration": _node_registration(name, ip, None),
    }
    cluster = {
        "apiVersion": API_VERSION,
        "kind": "ClusterConfiguration",
        "kubernetesVersion": versions["KUBERNETES_VERSION"],
        "clusterName": "kubeadm-host",
        "controlPlaneEndpoint": f"{ip}:{API_PORT}",
        # Every image from the sandbox's registry, by the name its references carry.
        "imageRepository": REGISTRY,
        "etcd": {"local": {"imageRepository": REGISTRY, "imageTag": versions["ETCD_VERSION"],
                           "dataDir": "/var/lib/etcd"}},
        "dns": {"imageRepository": REGISTRY, "imageTag": versions["COREDNS_VERSION"].removeprefix("v")},
        # No podSubnet: the pod network is the bridge plugin on a fixed range per machine (see layout), so the
        # controller-manager hands out no node CIDRs.
        "networking": {"serviceSubnet": service_cidr, "dnsDomain": CLUSTER_DOMAIN},
        "apiServer": {"certSANs": [ip]},
    }
    proxy = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        # what kube-proxy treats as pod traffic (kubeadm sets it from podSubnet, which is not given)
        "clusterCIDR": pod_cidr,
        # A machine's network namespace does not own the conntrack sysctls: leave them as they are.
        "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }
    return [init, cluster, kubelet(dns_ip), proxy]


def join_documents(*, name: str, ip: str, endpoint: str, token: str, ca_hash: str) -> list[dict]:
    """JoinConfiguration of a worker: the bootstrap token and the CA's public-key pin, nothing trusted blindly.
    Its kubelet takes the configuration `kubeadm init` stored in the cluster (ConfigMap kubelet-config)."""
    join = {
        "apiVersion": API_VERSION,
        "kind": "JoinConfiguration",
        "discovery": {"bootstrapToken": {"apiServerEndpoint": endpoint, "token": token,
                                         "caCertHashes": [ca_hash]}},
        "nodeRegistration": _node_registration(name, ip, []),
    }
    return [join]


def render(documents: list[dict]) -> str:
    return "\n---\n".join(json.dumps(doc, indent=2, sort_keys=True) for doc in documents) + "\n"
