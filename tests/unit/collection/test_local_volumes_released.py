"""Which pool volumes wait for their claims, and which may be wiped: only pool directories, never a path that
a volume object made by someone else names."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.local_volumes_released import local_volumes_released

BASE = "/var/lib/kubenest/volumes"


def pv(name, phase, path=BASE + "/vol-000", node="cp1", claim=("tenants", "data-a-etcd-0"), uid="u1"):
    spec = {"local": {"path": path}}
    if claim:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1], "uid": uid}
    labels = {"kosmos.io/local-volume": "kubenest-local"}
    if node:
        labels["kosmos.io/local-volume-node"] = node
    return {"metadata": {"name": name, "labels": labels}, "spec": spec, "status": {"phase": phase}}


NODES = [{"metadata": {"name": "cp1"}, "status": {"addresses": [{"type": "Hostname", "address": "cp1"},
                                                                {"type": "InternalIP", "address": "10.0.0.5"}]}}]


def test_volumes_still_bound_to_the_deleted_claims_are_pending():
    found = local_volumes_released([pv("v0", "Bound"), pv("v1", "Bound", claim=("other", "data-b-etcd-0"))], BASE,
                                   claims=[{"namespace": "tenants", "name": "data-a-etcd-0", "uid": "x"}])
    assert found == {"pending": ["v0"], "released": []}


def test_released_pool_volumes_come_with_their_node_address_and_claim():
    found = local_volumes_released([pv("v1", "Released", path=BASE + "/vol-001"), pv("v0", "Available", claim=None)],
                                   BASE, nodes=NODES)
    assert found == {"pending": [], "released": [
        {"name": "v1", "node": "cp1", "address": "10.0.0.5", "path": BASE + "/vol-001", "claim_uid": "u1"}]}
    assert local_volumes_released([pv("v1", "Released")], BASE)["released"][0]["address"] is None


@pytest.mark.parametrize("path", ["/", "/etc", BASE, BASE + "/vol-000/..", BASE + "/../vol-000", BASE + "/data",
                                  BASE + "/vol-000/x", BASE + "//vol-000", "vol-000", None])
def test_a_path_outside_the_pool_is_never_offered_for_wiping(path):
    assert local_volumes_released([pv("v", "Released", path=path)], BASE)["released"] == []


def test_a_volume_without_node_or_claim_uid_is_left_alone():
    assert local_volumes_released([pv("v", "Released", node=None), pv("w", "Released", uid="")], BASE)["released"] == []


@pytest.mark.parametrize("base", ["", "relative", "/a/../b", "/a/", None])
def test_the_base_directory_must_be_a_plain_absolute_path(base):
    with pytest.raises(AnsibleFilterError, match="base_dir"):
        local_volumes_released([], base)
