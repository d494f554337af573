"""Requests that bypass admission (plain playbook, AWX) are checked as the CRD would check them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.filter.virtualcluster_problems import virtualcluster_problems
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import references

CRD = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "kosmos.io_virtualclusters.yaml"

GOOD = {"namespace": "tenants", "name": "vc1", "state": "present",
        "spec": {"imageRepository": "registry.example.com:5000/kube", "kubernetesVersion": "v1.36.3",
                 "externalIP": "192.0.2.10"}}


def test_a_good_request_has_no_problems():
    assert virtualcluster_problems(GOOD) == []
    assert virtualcluster_problems(dict(GOOD, spec={})) == []
    assert virtualcluster_problems(GOOD, ["registry.example.com:5000"]) == []


@pytest.mark.parametrize("change,expected", [
    ({"name": "1vc"}, "name must be a DNS label"),
    ({"name": "a" * 41}, "at most 40"),
    ({"namespace": "Tenants"}, "namespace must be a DNS label"),
    ({"state": "gone"}, "state must be present or absent"),
    ({"spec": {"imageRepository": "{{ lookup('pipe', 'id') }}"}}, "imageRepository must be"),
    ({"spec": {"imageRepository": "kubenest.local\n  hostPID: true"}}, "imageRepository must be"),
    ({"spec": {"kubernetesVersion": "v1.36.3\nx"}}, "kubernetesVersion must"),
    ({"spec": {"externalIP": "192.0.2.1; id"}}, "externalIP must be an IP"),
    ({"spec": {"externalIP": "127.0.0.1"}}, "externalIP must be an address clients can reach, not loopback"),
    ({"spec": {"externalIP": "::"}}, "not unspecified: ::"),
    ({"spec": {"externalIP": "169.254.0.9"}}, "not link-local"),
    ({"spec": {"externalIP": "fe80::1"}}, "not link-local"),
    ({"spec": {"externalIP": "239.1.1.1"}}, "not multicast"),
    ({"spec": {"externalIP": "255.255.255.255"}}, "not the broadcast address"),
    ({"spec": "text"}, "spec must be a mapping"),
    ({"spec": {"etcdMembers": 2}}, "etcdMembers must be one of 1, 3"),
    ({"spec": {"etcdMembers": "3"}}, "etcdMembers must be one of 1, 3"),
    ({"spec": {"etcdMembers": True}}, "etcdMembers must be one of 1, 3"),
    ({"spec": {"apiServerServiceType": "ClusterIP"}}, "apiServerServiceType must be one of NodePort, LoadBalancer"),
])
def test_each_problem_is_named(change, expected):
    problems = virtualcluster_problems(dict(GOOD, **change))
    assert len(problems) == 1 and expected in problems[0]


def test_registries_outside_the_allow_list_are_refused_including_the_default():
    (problem,) = virtualcluster_problems(GOOD, ["kubenest.local"])
    assert "not from an allowed registry (kubenest.local)" in problem
    assert virtualcluster_problems(dict(GOOD, spec={}), ["kubenest.local"]) == []
    assert virtualcluster_problems(dict(GOOD, spec={}), ["other.example"]) != []


def test_not_a_mapping():
    assert virtualcluster_problems(None) == ["virtualcluster must be a mapping with namespace, name, state and spec"]


def test_the_crd_and_the_playbook_check_the_same_patterns():
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec = schema["spec"]["properties"]
    assert spec["imageRepository"]["pattern"] == references.IMAGE_REPOSITORY
    assert spec["imageRepository"]["maxLength"] == references.IMAGE_REPOSITORY_MAX
    assert spec["kubernetesVersion"]["pattern"] == references.KUBERNETES_VERSION
    assert schema["metadata"]["properties"]["name"]["pattern"] == references.DNS_1035_LABEL
    assert schema["metadata"]["properties"]["name"]["maxLength"] == references.VIRTUAL_CLUSTER_NAME_MAX


def test_a_restore_is_checked_before_it_reaches_a_manifest():
    assert virtualcluster_problems(dict(GOOD, etcd_restore={"sha256": "0f" * 32, "chunks": 2})) == []
    assert virtualcluster_problems(dict(GOOD, etcd_restore={})) == []
    problems = virtualcluster_problems(dict(GOOD, etcd_restore={"sha256": "{{ lookup('pipe', 'id') }}", "chunks": 1}))
    assert len(problems) == 1 and problems[0].startswith("etcd_restore: a restore's sha256 must be")


def test_restore_chunk_names_are_those_the_manifest_mounts():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.kosmos.kubenest.plugins.filter.etcd_restore_chunks import etcd_restore_chunks

    assert etcd_restore_chunks(0, "vc1") == []
    assert etcd_restore_chunks("2", "vc1") == ["vc1-etcd-restore-000", "vc1-etcd-restore-001"]
    for bad in (-1, 257, "x", None):
        with pytest.raises(AnsibleFilterError):
            etcd_restore_chunks(bad, "vc1")


@pytest.mark.parametrize(("running", "wanted", "problem"), [
    ("v1.36.3", "v1.36.3", None), ("v1.36.3", "v1.36.1", None), ("v1.36.3", "v1.37.0", None),
    ("v1.36.3", "v1.38.0", "kubernetesVersion v1.38.0 after v1.36.3 (running): a virtual cluster moves one minor"),
    ("v1.36.3", "v1.35.9", "never to an older minor"),
])
def test_a_run_from_a_playbook_moves_one_minor_up_at_a_time_like_admission(running, wanted, problem):
    request = {"name": "a", "namespace": "t", "kubernetes_version": running, "spec": {"kubernetesVersion": wanted}}
    problems = virtualcluster_problems(request)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0], problems


def test_a_new_virtual_cluster_takes_any_version_it_names():
    assert virtualcluster_problems({"name": "a", "namespace": "t", "spec": {"kubernetesVersion": "v1.30.0"}}) == []
