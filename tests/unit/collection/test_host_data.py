"""What the host's pods would leave on a node that is promoted: writable hostPaths and volumes of the node."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.host_data import host_data


def _pod(name, volumes, mounts, node="kn-w1", owner=None, phase="Running", namespace="shop", annotations=None):
    return {"metadata": {"name": name, "namespace": namespace, "annotations": annotations or {},
                         "ownerReferences": [{"kind": owner, "name": "x"}] if owner else []},
            "spec": {"nodeName": node, "volumes": volumes,
                     "containers": [{"name": "c", "volumeMounts": mounts}]},
            "status": {"phase": phase}}


def _pv(name, claim, node="kn-w1", how="affinity", kind="local"):
    spec = {kind: {"path": "/srv/" + name}, "claimRef": {"namespace": claim[0], "name": claim[1]}}
    labels = {}
    if how == "affinity":
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
    elif how == "label":
        labels["kosmos.io/local-volume-node"] = node
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


DATA = {"name": "data", "hostPath": {"path": "/srv/db"}}
CLOCK = {"name": "clock", "hostPath": {"path": "/etc/localtime"}}
CLAIM = {"name": "claim", "persistentVolumeClaim": {"claimName": "db"}}


def test_writable_host_paths_and_claims_on_the_node_are_named():
    mounts = [{"name": "data", "mountPath": "/d"}, {"name": "clock", "mountPath": "/etc/localtime", "readOnly": True}]
    pods = [_pod("db-0", [DATA, CLOCK], mounts),
            _pod("app", [CLAIM], [{"name": "claim", "mountPath": "/c", "readOnly": True}])]
    volumes = [_pv("pv-db", ("shop", "db"))]
    assert host_data(pods, "kn-w1", volumes) == ["shop/app (PersistentVolume pv-db on the node)",
                                                 "shop/db-0 (hostPath /srv/db, written)"]


@pytest.mark.parametrize("pod", [
    _pod("reader", [CLOCK], [{"name": "clock", "mountPath": "/etc/localtime", "readOnly": True}]),
    _pod("agent", [DATA], [{"name": "data", "mountPath": "/d"}], owner="DaemonSet"),  # stays; the wipe's business
    _pod("static", [DATA], [{"name": "data", "mountPath": "/d"}], annotations={"kubernetes.io/config.mirror": "x"}),
    _pod("done", [DATA], [{"name": "data", "mountPath": "/d"}], phase="Succeeded"),
    _pod("elsewhere", [DATA], [{"name": "data", "mountPath": "/d"}], node="kn-w2"),
    _pod("unused", [DATA], []),  # declared, never mounted
])
def test_pods_that_leave_nothing_of_their_own_are_not_named(pod):
    assert host_data([pod], "kn-w1", []) == []


@pytest.mark.parametrize(("volume", "named"), [
    (_pv("pv-label", ("shop", "db"), how="label"), True),      # the collection's local volumes
    (_pv("pv-hostpath", ("shop", "db"), kind="hostPath"), True),
    (_pv("pv-other-node", ("shop", "db"), node="kn-w2"), False),
    (_pv("pv-other-claim", ("other", "db")), False),           # another namespace's claim of the same name
    ({"metadata": {"name": "pv-nfs"}, "spec": {"nfs": {"path": "/x"}, "claimRef": {"namespace": "shop",
                                                                                   "name": "db"}}}, False),
])
def test_only_volumes_that_keep_their_data_on_the_node_count(volume, named):
    pods = [_pod("app", [CLAIM], [{"name": "claim", "mountPath": "/c"}])]
    assert bool(host_data(pods, "kn-w1", [volume])) is named


def test_a_node_name_is_required():
    with pytest.raises(AnsibleFilterError, match="node must be a node name"):
        host_data([], "", [])
