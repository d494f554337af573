"""The operator's admission policy with a site's registries, built as data from deploy/operator."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.operator_admission_policy import operator_admission_policy

POLICY = yaml.safe_load((Path(__file__).resolve().parents[3] / "deploy/operator/admission-policy.yaml").read_text())


def _allowed(policy) -> list[str]:
    return [v["expression"] for item in policy["items"] if item["kind"] == "ValidatingAdmissionPolicy"
            for v in item["spec"]["variables"] if v["name"] == "allowedRegistries"]


def test_the_sites_registries_replace_the_sandboxs_and_the_manifest_is_untouched():
    before = yaml.safe_dump(POLICY)
    assert _allowed(POLICY) == ["['kubenest.local']"]
    result = operator_admission_policy(POLICY, ["registry.example.com:5000", "kubenest.local"])
    assert _allowed(result) == ['["registry.example.com:5000", "kubenest.local"]']
    assert yaml.safe_dump(POLICY) == before
    # everything else of the List stays as shipped
    assert [i["kind"] for i in result["items"]] == [i["kind"] for i in POLICY["items"]]


@pytest.mark.parametrize("registries, why", [
    ([], "at least one registry"),
    (["registry.example.com/kubenest"], "is not a registry host[:port] (no path)"),
    (["x']+['evil"], "imageRepository must be a registry host"),
    (["https://registry.example.com"], "imageRepository must be a registry host"),
])
def test_anything_but_registry_hosts_is_refused_as_it_would_become_cel(registries, why):
    with pytest.raises(AnsibleFilterError, match=None) as caught:
        operator_admission_policy(POLICY, registries)
    assert why in str(caught.value)


def test_a_list_without_the_policy_is_refused():
    with pytest.raises(AnsibleFilterError, match="no policy of the List has the variable allowedRegistries"):
        operator_admission_policy({"kind": "List", "items": []}, ["kubenest.local"])


def test_the_bootstrap_token_groups_the_policy_allows_are_those_the_returning_kubelet_gets():
    import ast
    import base64

    root = Path(__file__).resolve().parents[3]
    groups = yaml.safe_load((root / "roles/node_promote/defaults/main.yml").read_text())[
        "node_promote_host_bootstrap_groups"]
    [allowed] = [v["expression"] for item in POLICY["items"] if item["kind"] == "ValidatingAdmissionPolicy"
                 for v in item["spec"].get("variables") or [] if v["name"] == "allowedGroups"]
    decoded = [base64.b64decode(value).decode() for value in ast.literal_eval(allowed)]
    assert decoded == [",".join(groups)]  # as plugins/action/bootstrap_token.py joins them
