# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a virtual cluster's API server reads besides its certificates, from its spec: the structured authentication
configuration (JWT issuers, anonymous access) and the audit policy with where its log goes, checked and built as
data. Both reach the pod as one ConfigMap; the log stays in a volume of the tenant's own API server pod and is
streamed by a container of that pod, so it is kept and read per tenant, never on a host path."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import urlsplit

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.plain_data import to_plain

CONFIG_DIR = "/etc/kubernetes/apiserver-config"
AUTHENTICATION_KEY = "authentication-config.json"
AUDIT_POLICY_KEY = "audit-policy.json"
AUDIT_DIR = "/var/log/kubernetes/audit"
AUDIT_LOG = AUDIT_DIR + "/audit.log"
# Pod template annotation that follows the files' content: a changed configuration rolls the API server (its own
# reload of the authentication file would wait for the kubelet to refresh the volume, up to a minute or more).
CONFIG_REVISION = "kubenest.kosmos.io/config-revision"

AUTHENTICATION_KEYS = ("jwt", "anonymous")
ISSUER_KEYS = ("url", "discoveryURL", "certificateAuthority", "audiences", "audienceMatchPolicy",
               "egressSelectorType")
JWT_KEYS = ("issuer", "claimValidationRules", "claimMappings", "userValidationRules")
MAPPING_KEYS = ("username", "groups", "uid", "extra")
# The API server's own limit is 64 authenticators; a tenant with more has a configuration to rethink.
MAX_JWT = 16
# Direct (absent), or through Konnectivity into the tenant's network (an issuer served by the tenant's own pods).
EGRESS_TYPES = ("cluster",)

AUDIT_KEYS = ("policy", "log")
POLICY_KEYS = ("rules", "omitStages", "omitManagedFields")
RULE_KEYS = ("level", "users", "userGroups", "verbs", "resources", "namespaces", "nonResourceURLs", "omitStages",
             "omitManagedFields")
LEVELS = ("None", "Metadata", "Request", "RequestResponse")
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")
# log: the size at which the file is rotated (MiB), how many rotated files are kept and for how many days.
LOG_LIMITS = {"maxSizeMB": (1, 1024, 50), "maxBackups": (0, 20, 2), "maxAgeDays": (0, 366, 7)}


def _unknown(where, value, known):
    extra = sorted(str(key) for key in value if key not in known)
    return ["%s has no %s (it takes %s)" % (where, ", ".join(extra), ", ".join(known))] if extra else []


def _mapping(where, value):
    if not isinstance(value, dict):
        raise ValueError("%s must be a mapping, not %s" % (where, type(value).__name__))
    return value


def _strings(where, value, allow_empty=True):
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        return ["%s must be a list of non-empty strings" % where]
    if not allow_empty and not value:
        return ["%s must name at least one" % where]
    return []


def _https_url(where, value):
    if not isinstance(value, str) or not value:
        return ["%s must be an https:// URL" % where]
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname:
        return ["%s must be an https:// URL, not %r" % (where, value[:200])]
    if parts.username or parts.password or parts.query or parts.fragment:
        return ["%s must not carry credentials, a query or a fragment" % where]
    return []


def _claim_or_expression(where, value, prefixed):
    """One of claim and expression; with a claim the prefix is required (the API server's rule: an unprefixed
    username could pass for a user of another authenticator), with an expression it is not taken."""
    problems = _unknown(where, value, ("claim", "prefix", "expression") if prefixed else ("claim", "expression"))
    claim, expression = value.get("claim"), value.get("expression")
    if bool(claim) == bool(expression):
        problems.append("%s takes one of claim and expression" % where)
    for key in ("claim", "prefix", "expression"):
        if key in value and not isinstance(value[key], str):
            problems.append("%s.%s must be a string" % (where, key))
    if prefixed and claim and "prefix" not in value:
        problems.append("%s.prefix is required with a claim (\"\" for none)" % where)
    if prefixed and expression and "prefix" in value:
        problems.append("%s.prefix is not taken with an expression (the expression writes the whole name)" % where)
    return problems


def _jwt(where, value, seen_issuers):
    value = _mapping(where, value)
    problems = _unknown(where, value, JWT_KEYS)
    issuer = _mapping(where + ".issuer", value.get("issuer") or {})
    problems += _unknown(where + ".issuer", issuer, ISSUER_KEYS)
    problems += _https_url(where + ".issuer.url", issuer.get("url"))
    if issuer.get("url") in seen_issuers:
        problems.append("%s.issuer.url %s is given twice" % (where, issuer.get("url")))
    seen_issuers.add(issuer.get("url"))
    if "discoveryURL" in issuer:
        problems += _https_url(where + ".issuer.discoveryURL", issuer["discoveryURL"])
    ca = issuer.get("certificateAuthority")
    if ca is not None and (not isinstance(ca, str) or "-----BEGIN CERTIFICATE-----" not in ca):
        problems.append("%s.issuer.certificateAuthority must hold PEM certificates (the CA itself, not a path)"
                        % where)
    audiences = issuer.get("audiences")
    problems += _strings(where + ".issuer.audiences", audiences, allow_empty=False)
    if isinstance(audiences, list) and len(audiences) > 1 and issuer.get("audienceMatchPolicy") != "MatchAny":
        problems.append("%s.issuer.audienceMatchPolicy must be MatchAny with several audiences" % where)
    if issuer.get("audienceMatchPolicy") not in (None, "MatchAny"):
        problems.append("%s.issuer.audienceMatchPolicy must be MatchAny" % where)
    if issuer.get("egressSelectorType") not in (None,) + EGRESS_TYPES:
        problems.append("%s.issuer.egressSelectorType must be cluster (through the tenant's network) or absent "
                        "(direct)" % where)
    mappings = _mapping(where + ".claimMappings", value.get("claimMappings") or {})
    problems += _unknown(where + ".claimMappings", mappings, MAPPING_KEYS)
    if "username" not in mappings:
        problems.append("%s.claimMappings.username is required" % where)
    for key, prefixed in (("username", True), ("groups", True), ("uid", False)):
        if key in mappings:
            problems += _claim_or_expression("%s.claimMappings.%s" % (where, key),
                                             _mapping("%s.claimMappings.%s" % (where, key), mappings[key]), prefixed)
    for key in ("claimValidationRules", "userValidationRules"):
        if key in value and not (isinstance(value[key], list) and all(isinstance(r, dict) for r in value[key])):
            problems.append("%s.%s must be a list of rules" % (where, key))
    if "extra" in mappings and not (isinstance(mappings["extra"], list)
                                    and all(isinstance(e, dict) for e in mappings["extra"])):
        problems.append("%s.claimMappings.extra must be a list of mappings" % where)
    return problems


def authentication_configuration(value, service_account_issuer=None):
    """spec.controlPlane.apiServer.authentication checked: the AuthenticationConfiguration the API server reads, or
    None when there is none. Raises ValueError naming every problem."""
    if value in (None, {}):
        return None
    try:
        value = _mapping("authentication", value)
        problems = _unknown("authentication", value, AUTHENTICATION_KEYS)
        jwt = value.get("jwt") or []
        if not isinstance(jwt, list):
            raise ValueError("authentication.jwt must be a list of issuers")
        if len(jwt) > MAX_JWT:
            problems.append("authentication.jwt takes at most %d issuers, not %d" % (MAX_JWT, len(jwt)))
        seen = set()
        for at, item in enumerate(jwt):
            problems += _jwt("authentication.jwt[%d]" % at, item, seen)
        if service_account_issuer and service_account_issuer in seen:
            problems.append("authentication.jwt names the cluster's own service-account issuer %s"
                            % service_account_issuer)
        if "anonymous" in value:
            anonymous = _mapping("authentication.anonymous", value["anonymous"])
            problems += _unknown("authentication.anonymous", anonymous, ("enabled", "conditions"))
            if not isinstance(anonymous.get("enabled"), bool):
                problems.append("authentication.anonymous.enabled must be true or false")
            conditions = anonymous.get("conditions", [])
            if not isinstance(conditions, list) or not all(
                    isinstance(c, dict) and sorted(c) == ["path"] and isinstance(c["path"], str) for c in conditions):
                problems.append("authentication.anonymous.conditions must be a list of {path: ...}")
    except ValueError as exc:
        problems = [str(exc)]
    if problems:
        raise ValueError("; ".join(problems))
    config = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthenticationConfiguration",
              "jwt": to_plain(list(jwt))}
    if "anonymous" in value:
        config["anonymous"] = to_plain(value["anonymous"])
    return config


def flag_conflict(authentication, extra_args):
    """Why the API server's extra flags cannot go with its authentication configuration, or None: the server
    refuses --oidc-* flags beside the configuration, and --anonymous-auth beside its anonymous section."""
    if not authentication:
        return None
    extra = extra_args or {}
    clashing = sorted(key for key in extra if str(key).startswith("oidc-"))
    if "anonymous" in authentication and "anonymous-auth" in extra:
        clashing.append("anonymous-auth")
    if clashing:
        return ("the authentication configuration replaces %s: give issuers and anonymous access there, not as "
                "extra flags" % ", ".join("--" + name for name in clashing))
    return None


def _rule(where, rule):
    rule = _mapping(where, rule)
    problems = _unknown(where, rule, RULE_KEYS)
    if rule.get("level") not in LEVELS:
        problems.append("%s.level must be one of %s" % (where, ", ".join(LEVELS)))
    for key in ("users", "userGroups", "verbs", "namespaces", "nonResourceURLs"):
        if key in rule:
            problems += _strings("%s.%s" % (where, key), rule[key])
    if "resources" in rule and not (isinstance(rule["resources"], list)
                                    and all(isinstance(r, dict) for r in rule["resources"])):
        problems.append("%s.resources must be a list of {group, resources, resourceNames}" % where)
    problems += _stages(where, rule)
    return problems


def _stages(where, value):
    stages = value.get("omitStages", [])
    if not isinstance(stages, list) or any(stage not in STAGES for stage in stages):
        return ["%s.omitStages must be a list of %s" % (where, ", ".join(STAGES))]
    return []


def audit_settings(value):
    """spec.controlPlane.apiServer.audit checked: (the audit Policy, the log's limits), or None when the API server
    keeps no audit log. Raises ValueError naming every problem."""
    if value in (None, {}):
        return None
    try:
        value = _mapping("audit", value)
        problems = _unknown("audit", value, AUDIT_KEYS)
        policy = _mapping("audit.policy", value.get("policy") or {})
        problems += _unknown("audit.policy", policy, POLICY_KEYS)
        rules = policy.get("rules")
        if not isinstance(rules, list) or not rules:
            problems.append("audit.policy.rules must list at least one rule (the first that matches a request "
                            "sets its level)")
            rules = []
        for at, rule in enumerate(rules):
            problems += _rule("audit.policy.rules[%d]" % at, rule)
        problems += _stages("audit.policy", policy)
        log = _mapping("audit.log", value.get("log") or {})
        problems += _unknown("audit.log", log, tuple(LOG_LIMITS))
        limits = {}
        for key, (low, high, default) in LOG_LIMITS.items():
            number = log.get(key, default)
            if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
                problems.append("audit.log.%s must be a whole number from %d to %d" % (key, low, high))
            limits[key] = number
    except ValueError as exc:
        problems = [str(exc)]
    if problems:
        raise ValueError("; ".join(problems))
    document = dict({"apiVersion": "audit.k8s.io/v1", "kind": "Policy"}, **to_plain(policy))
    return document, limits


def audit_volume_mib(limits):
    """The log volume's size limit: the file that rotates at maxSizeMB, the rotated ones, and one more file's room,
    as a file may pass the size by the one event that rotates it (a volume over its limit gets the pod evicted)."""
    return limits["maxSizeMB"] * (limits["maxBackups"] + 2)


def audit_flags(limits, policy_path):
    return [
        ("audit-policy-file", policy_path),
        ("audit-log-path", AUDIT_LOG),
        ("audit-log-format", "json"),
        ("audit-log-maxsize", str(limits["maxSizeMB"])),
        ("audit-log-maxbackup", str(limits["maxBackups"])),
        ("audit-log-maxage", str(limits["maxAgeDays"])),
    ]


def config_files(authentication, audit_policy):
    """The ConfigMap's data: the files by key, as JSON (read by the API server, a Go program)."""
    files = {}
    if authentication:
        files[AUTHENTICATION_KEY] = json.dumps(authentication, sort_keys=True, indent=1)
    if audit_policy:
        files[AUDIT_POLICY_KEY] = json.dumps(audit_policy, sort_keys=True, indent=1)
    return files


def config_revision(files):
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest() if files else ""


def config_map(vc, files):
    """The ConfigMap `<name>-apiserver-config` holding the files (empty when the spec asks for neither: the object
    stays, so that a file taken out of the spec is taken out of it too)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": vc.metadata("%s-apiserver-config" % vc.name,
                                                                             "apiserver"),
            "data": dict(files)}
