# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The StatefulSet of a virtual cluster's dedicated etcd, as data."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.module_utils.etcd_backup_file import MAX_CHUNKS, restore_chunk_names
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import (
    VirtualClusterRef,
    check_count,
    container_resources,
    flags,
    http_probe,
    liveness_probe,
    placement,
    secret_volume,
    spread_affinity,
    workload,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import check_image, check_ip, check_name

PKI = "/etc/etcd/pki"
MEMBER_COUNTS = (1, 3)
RESTORE_DIR = "/var/run/kubenest/restore"
# Pod template annotation that follows the CAs etcd trusts while a rotation trusts two.
TRUST_REVISION = "kubenest.kosmos.io/trust-revision"
# Seconds a member of several keeps serving after its pod is deleted, before etcd is told to stop: time for the
# client Service's rules on every host node to leave it (kube-proxy syncs at most once a second).
STOP_DELAY_S = 5


def check_restore(restore):
    """The restore a VirtualCluster was created for: {'sha256': hex digest, 'chunks': count}."""
    if not isinstance(restore, dict) or set(restore) != {"sha256", "chunks"}:
        raise ValueError("a restore takes sha256 and chunks, got %r" % (restore,))
    digest = str(restore["sha256"])
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError("a restore's sha256 must be 64 lower-case hexadecimal digits, got %r" % digest)
    chunks = restore["chunks"]
    if isinstance(chunks, str) and chunks.isdigit():
        chunks = int(chunks)
    if not isinstance(chunks, int) or isinstance(chunks, bool) or not 1 <= chunks <= MAX_CHUNKS:
        raise ValueError("a restore's chunks must be 1 to %d, got %r" % (MAX_CHUNKS, chunks))
    return {"sha256": digest, "chunks": chunks}


def peer_service_name(vc_name):
    """The headless Service that gives each member of a multi-member etcd its DNS name."""
    return "%s-etcd-peer" % vc_name


def member_urls(vc, members, port):
    """Per member, the URL its peers and clients dial: <statefulset>-<i>.<peer service>.<namespace>.svc."""
    return ["https://%s-etcd-%d.%s.%s.svc:%d" % (vc.name, i, peer_service_name(vc.name), vc.namespace, port)
            for i in range(members)]


def etcd_statefulset(vc, image, advertise_ip, node_selector=None, tolerations=None, storage_class="",
                     storage_size="2Gi", quota_backend_bytes=2 * 1024 ** 3, resources=None, ephemeral=False,
                     members=1, restore=None, host_nodes=0, trust_revision=""):
    """Data on a PersistentVolumeClaim of `storage_class` (empty: the host's default class), so that a new pod
    finds the member's data; `ephemeral` keeps it in an emptyDir instead, lost with the pod. `host_nodes`: the
    schedulable host nodes of the placement; with at least one per member each member must have its own.

    `restore` ({'sha256', 'chunks'}): each member starts from that snapshot, which an init container joins from
    the Secrets restore_chunk_names() names; a member that already has data keeps it.

    `trust_revision`: a digest of the CAs etcd trusts while a rotation trusts more than one, empty otherwise. etcd
    reads its trusted CAs only when it starts: a new value rolls the members, one at a time."""
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
            # A lone member elects itself when its election timeout runs out after start. etcd fast-forwards all
            # but one tick of the configured timeout, but raft draws the actual one between one and two times
            # it: 0.1-1 s with the defaults (100/1000 ms), 0.05-0.25 s with these. Without peers no other
            # election ever runs and heartbeats go nowhere; etcd wants the timeout at least 5 heartbeats.
            ("heartbeat-interval", "50"),
            ("election-timeout", "250"),
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
            # etcd would match a peer's certificate against the address it dials from, a pod IP no certificate
            # can name beforehand; the peer CA is this virtual cluster's own, which is what vouches for a member.
            ("peer-skip-client-san-verification", "true"),
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
        "readinessProbe": http_probe("/readyz", 2381, period=1),  # the API server rolls out once etcd is ready
        "livenessProbe": liveness_probe("/livez", 2381),
        "volumeMounts": [{"name": "pki", "mountPath": PKI, "readOnly": True},
                         {"name": "data", "mountPath": "/var/lib/etcd"}],
    }
    pod = placement(node_selector, tolerations)
    if members > 1:
        container["env"] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
        container["ports"].append({"name": "peer", "containerPort": 2380})
        # etcd told to stop closes its client port at once and asks its clients to go (HTTP/2 GOAWAY); the API
        # server's etcd client reconnects through the Service at once, and while the rules still send the Service
        # to the stopping member that connection is refused, and the client's next try waits out a backoff
        # that grows with every refusal: a roll once held the tenant's requests for more than 10 s. Stopped only
        # once its endpoint is gone, the member hands its clients to the others.
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": STOP_DELAY_S}}}
        # A node of its own for each member where there are enough (one lost node costs one member, never the
        # quorum); spread as far as they go where not: on one node the members still form a quorum.
        pod["affinity"] = spread_affinity(vc, "etcd", members, check_count(host_nodes, "host_nodes"))
    pod["containers"] = [container]
    pod["volumes"] = [secret_volume("pki", "%s-etcd-pki" % vc.name, ["ca.crt", "server.crt", "server.key"])]
    if restore:
        if ephemeral:
            raise ValueError("a restored etcd needs its data on a volume claim, not an emptyDir")
        pod["initContainers"] = [_restore_container(vc, container, dict(identity), check_restore(restore))]
        # Optional: the chunks are removed once the members run, and a restarted member keeps its data.
        pod["volumes"].append({"name": "restore", "projected": {"sources": [
            {"secret": {"name": secret, "optional": True, "items": [{"key": "chunk", "path": "chunk-%03d" % i}]}}
            for i, secret in enumerate(restore_chunk_names(vc.name, restore["chunks"]))]}})
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
    return workload("StatefulSet", vc, name, "etcd", pod, replicas=members, extra_spec=extra,
                    pod_annotations={TRUST_REVISION: str(trust_revision)} if trust_revision else None)


def _restore_container(vc, etcd, identity, restore):
    restore_flags = [("chunks", RESTORE_DIR), ("sha256", restore["sha256"])]
    restore_flags += [(key, identity[key]) for key in ("data-dir", "name", "initial-cluster",
                                                       "initial-advertise-peer-urls", "initial-cluster-token")
                      if key in identity]
    container = {
        "name": "restore",
        "image": etcd["image"],
        "imagePullPolicy": etcd["imagePullPolicy"],
        "command": flags("/usr/local/bin/etcd-snapshot", []) + ["restore"] + flags("", restore_flags)[1:],
        "resources": etcd["resources"],
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"},
                         {"name": "restore", "mountPath": RESTORE_DIR, "readOnly": True}],
    }
    if "env" in etcd:
        container["env"] = etcd["env"]
    return container
