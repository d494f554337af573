# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The StatefulSet of a virtual cluster's dedicated etcd, as data."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import (
    VirtualClusterRef,
    container_resources,
    flags,
    http_probe,
    placement,
    secret_volume,
    workload,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import check_image, check_ip, check_name

PKI = "/etc/etcd/pki"
MEMBER_COUNTS = (1, 3)


def peer_service_name(vc_name):
    """The headless Service that gives each member of a multi-member etcd its DNS name."""
    return "%s-etcd-peer" % vc_name


def member_urls(vc, members, port):
    """Per member, the URL its peers and clients dial: <statefulset>-<i>.<peer service>.<namespace>.svc."""
    return ["https://%s-etcd-%d.%s.%s.svc:%d" % (vc.name, i, peer_service_name(vc.name), vc.namespace, port)
            for i in range(members)]


def etcd_statefulset(vc, image, advertise_ip, node_selector=None, tolerations=None, storage_class="",
                     storage_size="2Gi", quota_backend_bytes=2 * 1024 ** 3, resources=None, ephemeral=False,
                     members=1):
    """Data on a PersistentVolumeClaim of `storage_class` (empty: the host's default class), so that a new pod
    finds the member's data; `ephemeral` keeps it in an emptyDir instead, lost with the pod."""
    vc = VirtualClusterRef(vc)
    advertise_ip = check_ip("etcd's service address", advertise_ip)
    if members not in MEMBER_COUNTS or isinstance(members, bool):
        raise ValueError("etcd members must be one of %s, got %r" % (", ".join(map(str, MEMBER_COUNTS)), members))
    name = "%s-etcd" % vc.name
    if members == 1:
        # One member needs no name its peers resolve: it works on hosts without cluster DNS.
        peer = "https://127.0.0.1:2380"
        identity = [
            ("name", "member-0"),
            ("data-dir", "/var/lib/etcd/data"),
            ("listen-client-urls", "https://0.0.0.0:2379"),
            ("advertise-client-urls", "https://%s:2379" % advertise_ip),
            ("listen-peer-urls", peer),
            ("initial-advertise-peer-urls", peer),
            ("initial-cluster", "member-0=%s" % peer),
        ]
    else:
        # Members find each other by their DNS names under the headless peer Service (the host's cluster DNS);
        # $(POD_NAME) is expanded by the kubelet.
        own = "$(POD_NAME).%s.%s.svc" % (peer_service_name(vc.name), vc.namespace)
        peers = member_urls(vc, members, 2380)
        identity = [
            ("name", "$(POD_NAME)"),
            ("data-dir", "/var/lib/etcd/data"),
            ("listen-client-urls", "https://0.0.0.0:2379"),
            ("advertise-client-urls", "https://%s:2379" % own),
            ("listen-peer-urls", "https://0.0.0.0:2380"),
            ("initial-advertise-peer-urls", "https://%s:2380" % own),
            ("initial-cluster", ",".join("%s-%d=%s" % (name, i, url) for i, url in enumerate(peers))),
            ("initial-cluster-token", "%s-%s" % (name, vc.namespace)),
        ]
    container = {
        "name": "etcd",
        "image": check_image(image),
        "imagePullPolicy": "IfNotPresent",
        "command": flags("/usr/local/bin/etcd", identity + [
            ("initial-cluster-state", "new"),
            ("client-cert-auth", "true"),
            ("trusted-ca-file", PKI + "/ca.crt"),
            ("cert-file", PKI + "/server.crt"),
            ("key-file", PKI + "/server.key"),
            ("peer-client-cert-auth", "true"),
            ("peer-trusted-ca-file", PKI + "/ca.crt"),
            ("peer-cert-file", PKI + "/server.crt"),
            ("peer-key-file", PKI + "/server.key"),
            ("listen-metrics-urls", "http://0.0.0.0:2381"),
            # The database refuses writes beyond this (alarm NOSPACE) instead of filling the host's disk.
            ("quota-backend-bytes", str(int(quota_backend_bytes))),
        ]),
        "ports": [{"name": "client", "containerPort": 2379}],
        "resources": container_resources(resources),
        "readinessProbe": http_probe("/readyz", 2381, period=3),
        "livenessProbe": http_probe("/livez", 2381, period=10, initial_delay=30),
        "volumeMounts": [{"name": "pki", "mountPath": PKI, "readOnly": True},
                         {"name": "data", "mountPath": "/var/lib/etcd"}],
    }
    pod = placement(node_selector, tolerations)
    if members > 1:
        container["env"] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
        container["ports"].append({"name": "peer", "containerPort": 2380})
        # Spread over nodes where there are several; on one node the members still form a quorum.
        pod["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                               "labelSelector": {"matchLabels": vc.component_selector("etcd")}}}]}}
    pod["containers"] = [container]
    pod["volumes"] = [secret_volume("pki", "%s-etcd-pki" % vc.name, ["ca.crt", "server.crt", "server.key"])]
    extra = {"serviceName": name}
    if members > 1:
        # All members start together: a quorum forms only once enough of them are up.
        extra = {"serviceName": peer_service_name(vc.name), "podManagementPolicy": "Parallel"}
    if ephemeral:
        # The quota plus room for the write-ahead log and snapshots; beyond it the kubelet evicts the pod.
        pod["volumes"].append({"name": "data", "emptyDir": {"sizeLimit": "%dMi" % (
            int(quota_backend_bytes) * 3 // 2 // 1024 ** 2 + 512)}})
    else:
        claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": str(storage_size)}}}
        if storage_class:
            claim["storageClassName"] = check_name("etcd's storage class", storage_class, max_length=253,
                                                   pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
        # The claims go with the StatefulSet (which goes with the VirtualCluster): no tenant data left behind.
        extra["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Delete", "whenScaled": "Retain"}
        extra["volumeClaimTemplates"] = [{"metadata": {"name": "data", "labels": vc.component_labels("etcd")},
                                          "spec": claim}]
    return workload("StatefulSet", vc, name, "etcd", pod, replicas=members, extra_spec=extra)
