"""Runs update and delete only the objects their virtual cluster owns."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.filter.ownership import ownership

VC = {"namespace": "t1", "name": "vc1", "uid": "uid-1"}
LABELS = {"app.kubernetes.io/managed-by": "kosmos.kubenest", "kosmos.io/virtualcluster": "vc1"}


def ref(name="vc1", uid="uid-1", kind="VirtualCluster", api_version="kosmos.io/v1alpha1", controller=True):
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": controller}


def obj(name, refs=(), labels=None):
    return {"metadata": {"namespace": "t1", "name": name, "ownerReferences": list(refs), "labels": labels or {}},
            "data": {"ca.key": "c2VjcmV0"}}


def listing(kind, objects, names=None, api_version="v1"):
    item = {"api_version": api_version, "kind": kind}
    if names is not None:
        item["names"] = names
    return {"item": item, "resources": objects}


def test_objects_with_an_owner_reference_to_this_virtual_cluster_are_owned():
    result = ownership([listing("Secret", [obj("vc1-pki", [ref()])])], VC)
    assert result == {"owned": [{"api_version": "v1", "kind": "Secret", "namespace": "t1", "name": "vc1-pki"}],
                      "foreign": []}


def test_planted_or_other_owners_objects_are_foreign_and_named():
    planted = [
        obj("vc1-pki", labels=LABELS),                       # our labels, no owner: planted
        obj("vc1-etcd-pki", [ref(uid="uid-0")]),              # an older VirtualCluster of the same name
        obj("vc1-component-kubeconfigs", [ref(name="vc2", uid="uid-2")]),
        obj("vc1-admin-kubeconfig", [ref(kind="Deployment", api_version="apps/v1")]),
        obj("vc1-x", [ref(api_version="evil.io/v1")]),
    ]
    result = ownership([listing("Secret", planted)], VC)
    assert result["owned"] == []
    assert result["foreign"] == ["Secret t1/" + o["metadata"]["name"] for o in planted]
    assert "c2VjcmV0" not in repr(result)  # references only, never content


def test_only_the_names_a_run_writes_are_looked_at():
    result = ownership([listing("Deployment", [obj("unrelated"), obj("vc1-apiserver", [ref()])],
                                names=["vc1-apiserver"], api_version="apps/v1")], VC)
    assert result["foreign"] == [] and [o["name"] for o in result["owned"]] == ["vc1-apiserver"]


def test_without_a_uid_our_labels_and_no_other_controller_count():
    no_uid = dict(VC, uid="")
    objects = [obj("mine", labels=LABELS), obj("theirs", [ref(kind="ReplicaSet")], labels=LABELS),
               obj("unlabelled"), obj("other-vc", labels=dict(LABELS, **{"kosmos.io/virtualcluster": "vc2"}))]
    result = ownership([listing("Secret", objects)], no_uid)
    assert [o["name"] for o in result["owned"]] == ["mine"]
    assert result["foreign"] == ["Secret t1/theirs", "Secret t1/unlabelled", "Secret t1/other-vc"]
