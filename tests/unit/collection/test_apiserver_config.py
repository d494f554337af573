"""A virtual cluster's structured authentication and audit: what passes and what is refused (naming each problem),
what reaches the API server's pod (flags, the ConfigMap's files, the audit log's volume and its streaming
container), and the CRD admitting the same choices as the collection's check."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest
from ansible_collections.kosmos.kubenest.plugins.filter.virtualcluster_problems import virtualcluster_problems
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.apiserver_config import (
    CONFIG_REVISION,
    LEVELS,
    LOG_LIMITS,
    STAGES,
    audit_settings,
    authentication_configuration,
)

from tests.unit.collection.hosted import CRD, SETTINGS, VC

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def issuer(url="https://issuer.example:8443", **extra):
    return dict({"issuer": {"url": url, "audiences": ["tenant"], "certificateAuthority": CA},
                 "claimMappings": {"username": {"claim": "sub", "prefix": "oidc:"},
                                   "groups": {"claim": "groups", "prefix": ""}}}, **extra)


AUTHENTICATION = {"jwt": [issuer()]}
AUDIT = {"policy": {"rules": [{"level": "None", "userGroups": ["system:nodes"]}, {"level": "Metadata"}]}}


def test_a_jwt_issuer_becomes_the_configuration_the_api_server_reads():
    config = authentication_configuration(AUTHENTICATION)
    assert config == {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthenticationConfiguration",
                      "jwt": AUTHENTICATION["jwt"]}
    assert authentication_configuration({}) is None and authentication_configuration(None) is None
    anonymous = {"jwt": [], "anonymous": {"enabled": True, "conditions": [{"path": "/livez"}]}}
    assert authentication_configuration(anonymous)["anonymous"] == anonymous["anonymous"]


@pytest.mark.parametrize("jwt,problem", [
    (issuer(url="http://issuer.example"), "authentication.jwt[0].issuer.url must be an https:// URL, not "
                                          "'http://issuer.example'"),
    (issuer(url="https://u:p@issuer.example"), "authentication.jwt[0].issuer.url must not carry credentials, a "
                                               "query or a fragment"),
    (dict(issuer(), claimMappings={"username": {"claim": "sub"}}),
     'authentication.jwt[0].claimMappings.username.prefix is required with a claim ("" for none)'),
    (dict(issuer(), claimMappings={"username": {"expression": "claims.sub", "prefix": "x"}}),
     "authentication.jwt[0].claimMappings.username.prefix is not taken with an expression"),
    (dict(issuer(), claimMappings={"username": {"claim": "sub", "expression": "claims.sub", "prefix": ""}}),
     "authentication.jwt[0].claimMappings.username takes one of claim and expression"),
    (dict(issuer(), claimMappings={}), "authentication.jwt[0].claimMappings.username is required"),
    ({"issuer": {"url": "https://i", "audiences": ["a", "b"]}, "claimMappings": {"username": {"claim": "sub",
                                                                                              "prefix": ""}}},
     "authentication.jwt[0].issuer.audienceMatchPolicy must be MatchAny with several audiences"),
    ({"issuer": {"url": "https://i", "audiences": []}, "claimMappings": {"username": {"claim": "sub", "prefix": ""}}},
     "authentication.jwt[0].issuer.audiences must name at least one"),
    ({"issuer": {"url": "https://i", "audiences": ["a"], "certificateAuthority": "/etc/ssl/ca.pem"},
      "claimMappings": {"username": {"claim": "sub", "prefix": ""}}},
     "authentication.jwt[0].issuer.certificateAuthority must hold PEM certificates (the CA itself, not a path)"),
    ({"issuer": {"url": "https://i", "audiences": ["a"], "egressSelectorType": "controlplane"},
      "claimMappings": {"username": {"claim": "sub", "prefix": ""}}},
     "authentication.jwt[0].issuer.egressSelectorType must be cluster"),
    (dict(issuer(), claims={}), "authentication.jwt[0] has no claims (it takes issuer, claimValidationRules"),
])
def test_a_bad_issuer_is_refused_naming_the_field(jwt, problem):
    with pytest.raises(ValueError) as raised:
        authentication_configuration({"jwt": [jwt]})
    assert problem in str(raised.value)


def test_issuers_are_unique_and_none_is_the_clusters_own_service_account_issuer():
    with pytest.raises(ValueError, match=r"jwt\[1\].issuer.url https://issuer.example:8443 is given twice"):
        authentication_configuration({"jwt": [issuer(), issuer()]})
    own = "https://kubernetes.default.svc.cluster.local"
    with pytest.raises(ValueError, match="names the cluster's own service-account issuer"):
        authentication_configuration({"jwt": [issuer(url=own)]}, own)


def test_an_audit_policy_gets_the_default_log_limits_and_bad_ones_are_named():
    policy, limits = audit_settings(AUDIT)
    assert policy == dict({"apiVersion": "audit.k8s.io/v1", "kind": "Policy"}, **AUDIT["policy"])
    assert limits == {"maxSizeMB": 50, "maxBackups": 2, "maxAgeDays": 7}
    assert audit_settings(None) is None
    with pytest.raises(ValueError) as raised:
        audit_settings({"policy": {"rules": [{"level": "Everything"}, {"level": "None", "omitStages": ["Done"]}]},
                        "log": {"maxSizeMB": 0, "maxBackups": True}, "webhook": {}})
    assert str(raised.value).split("; ") == [
        "audit has no webhook (it takes policy, log)",
        "audit.policy.rules[0].level must be one of None, Metadata, Request, RequestResponse",
        "audit.policy.rules[1].omitStages must be a list of RequestReceived, ResponseStarted, ResponseComplete, Panic",
        "audit.log.maxSizeMB must be a whole number from 1 to 1024",
        "audit.log.maxBackups must be a whole number from 0 to 20"]
    with pytest.raises(ValueError, match="audit.policy.rules must list at least one rule"):
        audit_settings({"policy": {"rules": []}})


def _pod(manifest):
    return manifest["spec"]["template"]


def test_the_api_server_reads_both_files_from_its_config_map_and_streams_its_audit_log():
    settings = dict(SETTINGS, authentication=AUTHENTICATION, audit=dict(AUDIT, log={"maxSizeMB": 10}))
    deployment, config = hosted_manifest("apiserver", VC, settings), hosted_manifest("apiserver-config", VC, settings)
    assert config["metadata"]["name"] == "vc1-apiserver-config" and config["kind"] == "ConfigMap"
    assert json.loads(config["data"]["authentication-config.json"])["jwt"] == AUTHENTICATION["jwt"]
    assert json.loads(config["data"]["audit-policy.json"])["rules"] == AUDIT["policy"]["rules"]
    pod = _pod(deployment)
    server, follower = pod["spec"]["containers"]
    command = server["command"]
    for flag in ("--authentication-config=/etc/kubernetes/apiserver-config/authentication-config.json",
                 "--audit-policy-file=/etc/kubernetes/apiserver-config/audit-policy.json",
                 "--audit-log-path=/var/log/kubernetes/audit/audit.log", "--audit-log-format=json",
                 "--audit-log-maxsize=10", "--audit-log-maxbackup=2", "--audit-log-maxage=7"):
        assert flag in command
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "vc1-apiserver-config"
    assert sorted(item["key"] for item in volumes["config"]["configMap"]["items"]) == sorted(config["data"])
    # Room for the live file, both rotated ones and one more: a volume over its limit would evict the server.
    assert volumes["audit-log"] == {"name": "audit-log", "emptyDir": {"sizeLimit": "40Mi"}}
    assert {"name": "audit-log", "mountPath": "/var/log/kubernetes/audit"} in server["volumeMounts"]
    assert follower["name"] == "audit-log" and follower["image"] == server["image"]
    assert follower["command"] == ["/usr/local/bin/follow-log", "/var/log/kubernetes/audit/audit.log"]
    assert follower["volumeMounts"] == [{"name": "audit-log", "mountPath": "/var/log/kubernetes/audit",
                                         "readOnly": True}]


def test_a_changed_file_rolls_the_api_server_and_none_leaves_the_pod_as_before():
    revision = _pod(hosted_manifest("apiserver", VC, dict(SETTINGS, audit=AUDIT)))["metadata"]["annotations"][
        CONFIG_REVISION]
    other = dict(AUDIT, policy={"rules": [{"level": "Request"}]})
    assert _pod(hosted_manifest("apiserver", VC, dict(SETTINGS, audit=other)))["metadata"]["annotations"][
        CONFIG_REVISION] != revision
    plain = hosted_manifest("apiserver", VC, SETTINGS)
    assert plain == hosted_manifest("apiserver", VC, dict(SETTINGS, authentication={}, audit={}))
    assert CONFIG_REVISION not in (_pod(plain)["metadata"].get("annotations") or {})
    assert [c["name"] for c in _pod(plain)["spec"]["containers"]] == ["kube-apiserver"]
    assert not [arg for arg in _pod(plain)["spec"]["containers"][0]["command"] if "audit" in arg or "authn" in arg]
    # The ConfigMap stays, empty: a file taken out of the spec is taken out of the object as well.
    assert hosted_manifest("apiserver-config", VC, SETTINGS)["data"] == {}


def test_oidc_flags_beside_an_authentication_configuration_are_refused():
    settings = dict(SETTINGS, authentication=AUTHENTICATION, extra_args={"apiserver": {"oidc-issuer-url": "https://x"}})
    with pytest.raises(AnsibleFilterError, match=r"InvalidRequest\] apiserver manifest: the authentication "
                                                 r"configuration replaces --oidc-issuer-url"):
        hosted_manifest("apiserver", VC, settings)
    alone = hosted_manifest("apiserver", VC, dict(SETTINGS, extra_args={"apiserver": {"oidc-issuer-url": "https://x"}}))
    assert "--oidc-issuer-url=https://x" in _pod(alone)["spec"]["containers"][0]["command"]


def test_a_bad_spec_is_a_problem_of_the_request_naming_each_field():
    request = {"namespace": "tenants", "name": "vc1", "spec": {"controlPlane": {"apiServer": {
        "extraArgs": {"oidc-client-id": "x", "audit-log-maxsize": "5"},
        "authentication": {"jwt": [issuer(url="http://x")]},
        "audit": {"policy": {"rules": [{"level": "All"}]}}}}}}
    assert virtualcluster_problems(request) == ["; ".join([
        "controlPlane.apiServer.extraArgs: --audit-log-maxsize is refused: the collection owns the audit- flags",
        "controlPlane.apiServer.authentication.jwt[0].issuer.url must be an https:// URL, not 'http://x'",
        "controlPlane.apiServer.audit.policy.rules[0].level must be one of None, Metadata, Request, "
        "RequestResponse"])]
    request["spec"]["controlPlane"]["apiServer"] = {"extraArgs": {"oidc-client-id": "x"},
                                                    "authentication": AUTHENTICATION, "audit": AUDIT}
    assert virtualcluster_problems(request) == [
        "controlPlane.apiServer: the authentication configuration replaces --oidc-client-id: give issuers and "
        "anonymous access there, not as extra flags"]
    request["spec"]["controlPlane"]["apiServer"].pop("extraArgs")
    assert virtualcluster_problems(request) == []


def test_the_crd_admits_the_same_levels_stages_and_log_limits():
    crd = yaml.safe_load(CRD.read_text())
    api_server = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "controlPlane"]["properties"]["apiServer"]["properties"]
    audit = api_server["audit"]["properties"]
    rule = audit["policy"]["properties"]["rules"]["items"]["properties"]
    assert tuple(rule["level"]["enum"]) == LEVELS
    assert tuple(rule["omitStages"]["items"]["enum"]) == STAGES == tuple(
        audit["policy"]["properties"]["omitStages"]["items"]["enum"])
    for key, (low, high, _default) in LOG_LIMITS.items():
        assert (audit["log"]["properties"][key]["minimum"], audit["log"]["properties"][key]["maximum"]) == (low, high)
    assert api_server["authentication"]["properties"]["jwt"]["maxItems"] == 16
