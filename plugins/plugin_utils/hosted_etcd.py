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


def etcd_statefulset(vc, image, advertise_ip, node_selector=None, tolerations=None, storage_class="",
                     storage_size="2Gi", quota_backend_bytes=2 * 1024 ** 3, resources=None, ephemeral=False):
    """Data on a PersistentVolumeClaim of `storage_class` (empty: the host's default class), so that a new pod
    finds the member's data; `ephemeral` keeps it in an emptyDir instead, lost with the pod."""
    vc = VirtualClusterRef(vc)
    advertise_ip = check_ip("etcd's service address", advertise_ip)
    name = "%s-etcd" % vc.name
    peer = "https://127.0.0.1:2380"
    container = {
        "name": "etcd",
        "image": check_image(image),
        "imagePullPolicy": "IfNotPresent",
        "command": flags("/usr/local/bin/etcd", [
            ("name", "member-0"),
            ("data-dir", "/var/lib/etcd/data"),
            ("listen-client-urls", "https://0.0.0.0:2379"),
            ("advertise-client-urls", "https://%s:2379" % advertise_ip),
            # One member: peers would need DNS names for each other, which a bare host cluster may not serve.
            ("listen-peer-urls", peer),
            ("initial-advertise-peer-urls", peer),
            ("initial-cluster", "member-0=%s" % peer),
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
    pod["containers"] = [container]
    pod["volumes"] = [secret_volume("pki", "%s-etcd-pki" % vc.name, ["ca.crt", "server.crt", "server.key"])]
    extra = {"serviceName": name}
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
    return workload("StatefulSet", vc, name, "etcd", pod, extra_spec=extra)
