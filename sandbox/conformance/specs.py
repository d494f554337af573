"""Which upstream conformance specs a run takes: the label filters of its phases, and the smoke subset."""

from __future__ import annotations

import re

# The parallel phase, then the one-at-a-time phase for the specs that need the whole cluster. [Slow] specs that
# are not [Serial] mostly wait (a probe that must not fire for minutes, a CronJob that must not start): they run
# beside the others.
PARALLEL = "Conformance && !Serial"
SERIAL = "Conformance && Serial"

# A spec or two of each thing a tenant must do as any cluster does, for make test: pods and their logs and exec,
# Services by ClusterIP and NodePort, DNS, ConfigMaps and Secrets in the environment and in volumes,
# Deployments, Jobs, CRDs, admission webhooks, the aggregated API, kubectl, service-account issuer discovery, and
# an image volume pulled from the registry (the nodes' container runtime).
SMOKE = (
    "[sig-node] Pods should be submitted and removed",
    "[sig-node] Pods should support retrieving logs from the container over websockets",
    "[sig-node] Pods should support remote command execution over websockets",
    "[sig-network] Services should serve a basic endpoint from pods",
    "[sig-network] Services should be able to create a functioning NodePort service",
    "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http",
    "[sig-network] DNS should provide DNS for the cluster",
    "[sig-network] DNS should provide DNS for services",
    "[sig-node] ConfigMap should be consumable via the environment",
    "[sig-node] ConfigMap should be consumable as environment variable names with various prefixes",
    "[sig-storage] ConfigMap should be consumable from pods in volume with mappings",
    "[sig-storage] Secrets should be consumable from pods in volume",
    "[sig-apps] Deployment RollingUpdateDeployment should delete old pods and create new ones",
    "[sig-apps] Job should run a job to completion when tasks sometimes fail and are locally restarted",
    "[sig-api-machinery] CustomResourceDefinition resources [Privileged:ClusterAdmin] Simple CustomResourceDefinition"
    " creating/deleting custom resource definition objects works",
    "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should be able to deny pod and configmap creation",
    "[sig-api-machinery] Aggregator Should be able to support the 1.17 Sample API Server using the current Aggregator",
    "[sig-cli] Kubectl logs logs should be able to retrieve and filter logs",
    "[sig-auth] ServiceAccounts ServiceAccountIssuerDiscovery should support OIDC discovery of service account issuer",
    "[sig-node] ImageVolume should succeed with pod and pull policy of Always",
)


def focus(names) -> str:
    """A ginkgo --focus that matches exactly the specs named (each a prefix of a full spec text)."""
    return "|".join(re.escape(name) + r"( \[|$)" for name in names)


def spec_text(reported: str) -> str:
    """The text a spec is focused by, from its name in a report (which ends with the list of its labels)."""
    return re.sub(r" \[[^\[\]]*, [^\[\]]*\]$", "", reported)
