"""A virtual cluster's extra flags for its control-plane components: what passes, what is refused and why, and the
CRD's admission rules refusing the same names as the collection's own check (the CRD says which kind of flag; the
collection's check, for runs that bypass admission, names each flag)."""

from __future__ import annotations

import ast
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest
from ansible_collections.kosmos.kubenest.plugins.filter.virtualcluster_problems import virtualcluster_problems
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.control_plane_flags import (
    HOST_FLAGS,
    OWNED_PREFIXES,
    PATH_WORDS,
    collection_flags,
    extra_flags,
    spec_extra_args,
    with_extra_flags,
)

from tests.unit.collection.hosted import CRD, SETTINGS, VC


def test_the_tenants_own_flags_pass_in_name_order_as_strings():
    given = {"v": 3, "feature-gates": "A=true", "default-not-ready-toleration-seconds": "120"}
    assert extra_flags("apiserver", given) == [("default-not-ready-toleration-seconds", "120"),
                                               ("feature-gates", "A=true"), ("v", "3")]
    assert extra_flags("scheduler", {}) == []


@pytest.mark.parametrize("name,value,why", [
    ("etcd-servers", "https://other:2379", "--etcd-servers is refused: the collection sets it"),
    ("authorization-mode", "AlwaysAllow", "--authorization-mode is refused: the collection sets it"),
    ("profiling", "true", "--profiling is refused: the collection sets it"),
    ("controllers", "*", "--controllers is refused: the collection sets it"),
    ("audit-policy-file", "policy.yaml", "--audit-policy-file is refused: it names a file or directory"),
    ("encryption-provider-config", "x", "--encryption-provider-config is refused: it names a file or directory"),
    ("cert-dir", "x", "--cert-dir is refused: it names a file or directory"),
    ("kubeconfig", "x", "--kubeconfig is refused: the collection sets it"),
    ("etcd-prefix", "/other", "--etcd-prefix is refused: the collection owns the etcd- flags"),
    ("authentication-token-webhook-cache-ttl", "1m", "the collection owns the authentication- flags"),
    ("master", "https://host:6443", "--master is refused: it concerns the host's addresses, ports or cloud"),
    ("oidc-issuer-url", "/etc/passwd", "--oidc-issuer-url is refused: its value is a path on the host node"),
    ("--v", "2", "'--v' is not a flag name"),
    ("V", "2", "'V' is not a flag name"),
    ("v", True, "--v: the value must be a string"),
    ("v", ["2"], "--v: the value must be a string"),
])
def test_each_refused_flag_is_named_with_why(name, value, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        extra_flags("apiserver", {name: value})


def test_every_refusal_is_named_at_once():
    with pytest.raises(ValueError) as exc:
        extra_flags("controller-manager", {"cluster-signing-duration": "1h", "cloud-config": "x", "v": "2"})
    assert str(exc.value) == ("extra flags of controller-manager: --cloud-config is refused: it names a file or "
                              "directory, which would be the host node's; --cluster-signing-duration is refused: "
                              "the collection owns the cluster-signing- flags")


def test_admission_plugins_add_to_the_collections_and_other_flags_come_last():
    options = [("enable-admission-plugins", "NodeRestriction"), ("profiling", "false")]
    assert with_extra_flags("apiserver", options, {"enable-admission-plugins": "AlwaysPullImages", "v": "2"}) == [
        ("enable-admission-plugins", "NodeRestriction,AlwaysPullImages"), ("profiling", "false"), ("v", "2")]
    assert with_extra_flags("scheduler", options, None) == options


def test_the_hosted_deployments_carry_them_and_refuse_bad_ones_before_any_manifest():
    extra = {"apiserver": {"default-not-ready-toleration-seconds": "120"}, "scheduler": {"v": "4"}}
    apiserver = hosted_manifest("apiserver", VC, dict(SETTINGS, extra_args=extra))
    command = apiserver["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[-1] == "--default-not-ready-toleration-seconds=120"
    assert "--enable-admission-plugins=NodeRestriction" in command
    scheduler = hosted_manifest("scheduler", VC, dict(SETTINGS, extra_args=extra))
    assert scheduler["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "--v=4"
    manager = hosted_manifest("controller-manager", VC, dict(SETTINGS, extra_args=extra))
    assert not [arg for arg in manager["spec"]["template"]["spec"]["containers"][0]["command"] if "--v=" in arg]
    with pytest.raises(AnsibleFilterError, match=r"InvalidRequest\] controller-manager manifest: extra flags of "
                                                 r"scheduler: --bind-address is refused"):
        hosted_manifest("controller-manager", VC, dict(SETTINGS, extra_args={"scheduler": {"bind-address": "::"}}))


def test_the_spec_maps_to_components_and_a_bad_one_is_a_problem_of_the_request():
    spec = {"apiServer": {"extraArgs": {"v": "2"}}, "scheduler": {}}
    assert spec_extra_args(spec) == {"apiserver": {"v": "2"}, "controller-manager": {}, "scheduler": {}}
    request = {"namespace": "tenants", "name": "vc1", "spec": {"controlPlane": {
        "apiServer": {"extraArgs": {"tls-min-version": "VersionTLS13"}}, "etcd": {}}}}
    assert virtualcluster_problems(request) == ["controlPlane has no etcd; it takes apiServer, controllerManager, "
                                                "scheduler"]
    request["spec"]["controlPlane"].pop("etcd")
    assert virtualcluster_problems(request) == ["controlPlane.apiServer.extraArgs: --tls-min-version is refused: "
                                                "the collection owns the tls- flags"]
    request["spec"]["controlPlane"]["apiServer"] = {"flags": {}}
    assert virtualcluster_problems(request) == ["controlPlane.apiServer takes extraArgs, authentication, audit only"]


def _crd_extra_args():
    crd = yaml.safe_load(CRD.read_text())
    control_plane = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "controlPlane"]["properties"]
    schemas = [control_plane[key]["properties"]["extraArgs"] for key in ("apiServer", "controllerManager", "scheduler")]
    assert schemas[0] == schemas[1] == schemas[2]
    return schemas[0]


def _lists_in(rule: str) -> list[list[str]]:
    """The CEL list literals of quoted names in a rule."""
    return [ast.literal_eval(found) for found in re.findall(r"\[(?:'[^']*'(?:, )?)+\]", rule)]


def test_the_crd_refuses_the_same_names_as_the_collection():
    rules = [item["rule"] for item in _crd_extra_args()["x-kubernetes-validations"]]
    lists = [sorted(found) for rule in rules for found in _lists_in(rule)]
    assert collection_flags() in lists
    assert sorted(PATH_WORDS) in lists
    assert sorted(OWNED_PREFIXES) in lists
    assert sorted(HOST_FLAGS) in lists
