"""VirtualCluster -> extravars of the virtualcluster playbook."""

from __future__ import annotations

import copy
import json

import kopf
import pytest
import yaml

from kubenest_operator.extravars import build_extravars, desired_spec, dump_unsafe, load_site_vars, plain

BODY = {
    "apiVersion": "kosmos.io/v1alpha1", "kind": "VirtualCluster",
    "metadata": {"namespace": "tenants", "name": "vc1", "uid": "4b1e-uid", "generation": 3,
                 "annotations": {"kubenest.kosmos.io/last-handled-configuration": "{}"},
                 "finalizers": ["kubenest.kosmos.io/finalizer"]},
    "spec": {"externalIP": "192.0.2.1", "kubeconfig": "c2VjcmV0",
             "promotePolicies": [{"labelSelector": {"matchLabels": {"zone": "a"}}, "nodeCount": 2}]},
    "status": {"phase": "Completed", "kubernetesVersion": "v1.35.1"},
}


def test_extravars_carry_identity_state_and_spec_without_the_kubeconfig():
    extravars = build_extravars(BODY, "present", "/etc/kubenest/host.kubeconfig")
    assert extravars == {
        "kubenest_host_kubeconfig": "/etc/kubenest/host.kubeconfig",
        "virtualcluster": {
            "namespace": "tenants", "name": "vc1", "uid": "4b1e-uid", "generation": 3, "state": "present",
            "spec": {"externalIP": "192.0.2.1",
                     "promotePolicies": [{"labelSelector": {"matchLabels": {"zone": "a"}}, "nodeCount": 2}]},
            "kubernetes_version": "v1.35.1",
        },
    }
    assert "c2VjcmV0" not in repr(extravars)


def test_in_cluster_has_no_kubeconfig_path_and_absent_state_passes_through():
    extravars = build_extravars(BODY, "absent", None)
    assert "kubenest_host_kubeconfig" not in extravars
    assert extravars["virtualcluster"]["state"] == "absent"


def test_the_body_is_not_modified_and_kopf_views_are_plain_afterwards():
    raw = copy.deepcopy(BODY)
    extravars = build_extravars(kopf.Body(raw), "present", None)
    assert raw == BODY
    json.dumps(extravars)  # plain data, as ansible-runner writes it
    spec = extravars["virtualcluster"]["spec"]
    spec["promotePolicies"][0]["nodeCount"] = 9
    assert raw["spec"]["promotePolicies"][0]["nodeCount"] == 2


def test_empty_or_missing_spec():
    assert desired_spec(None) == {}
    assert desired_spec({"kubeconfig": "x"}) == {}
    assert build_extravars({"metadata": {"namespace": "a", "name": "b"}}, "present", None)["virtualcluster"][
        "spec"] == {}
    # a new virtual cluster runs no version yet: the playbook takes the collection's pin
    assert build_extravars({"metadata": {"namespace": "a", "name": "b"}}, "present", None)["virtualcluster"][
        "kubernetes_version"] is None


def test_unknown_state_is_refused():
    with pytest.raises(ValueError):
        build_extravars(BODY, "gone", None)


def test_plain_converts_nested_mappings_and_tuples():
    assert plain(kopf.Body({"a": ({"b": 1},)})) == {"a": [{"b": 1}]}


def test_site_vars_reach_every_run_but_cannot_replace_the_request(tmp_path, monkeypatch):
    monkeypatch.delenv("NODE_NAME", raising=False)
    site = tmp_path / "site.yml"
    site.write_text("kubenest_agent_ca_file: /pki/ca.crt\nkubenest_images_dir: /images\n")
    extravars = build_extravars(BODY, "present", None, load_site_vars(site))
    assert extravars["kubenest_agent_ca_file"] == "/pki/ca.crt" and extravars["virtualcluster"]["name"] == "vc1"
    site.write_text("virtualcluster: {name: other}\n")
    with pytest.raises(ValueError, match="may not set virtualcluster"):
        load_site_vars(site)
    site.write_text("- a list\n")
    with pytest.raises(ValueError, match="mapping"):
        load_site_vars(site)


def test_the_operators_own_node_is_never_promoted(monkeypatch):
    monkeypatch.setenv("NODE_NAME", "host-cp-2")
    assert build_extravars(BODY, "present", None)["node_promote_exclude"] == ["host-cp-2"]
    monkeypatch.delenv("NODE_NAME")
    assert "node_promote_exclude" not in build_extravars(BODY, "present", None)


def test_the_extravars_file_tags_every_string_unsafe_and_keeps_the_data():
    data = {"virtualcluster": {"spec": {"imageRepository": "{{ lookup('pipe', 'id') }}",
                                        "labels": {"{{ k }}": "a\nb: c", "n": 1, "on": True, "none": None}}}}
    text = dump_unsafe(data)
    loader = type("Loader", (yaml.SafeLoader,), {})
    tagged = []

    def unsafe(loader_, node):
        tagged.append(node.value)
        return loader_.construct_scalar(node)

    loader.add_constructor("!unsafe", unsafe)
    assert yaml.load(text, Loader=loader) == data
    strings = {"virtualcluster", "spec", "imageRepository", "{{ lookup('pipe', 'id') }}", "labels", "{{ k }}",
               "a\nb: c", "n", "on", "none"}
    assert set(tagged) == strings  # every key and string value, nothing else


def test_allowed_registries_reach_the_playbook_only_when_set():
    assert "kubenest_allowed_registries" not in build_extravars(BODY, "present", None)
    extravars = build_extravars(BODY, "present", None, None, ("kubenest.local",))
    assert extravars["kubenest_allowed_registries"] == ["kubenest.local"]
