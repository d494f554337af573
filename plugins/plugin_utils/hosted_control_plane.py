# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The Deployments of a virtual cluster's kube-apiserver, controller-manager and scheduler, as data."""

from __future__ import annotations

import re

from ansible_collections.kosmos.kubenest.plugins.plugin_utils import apiserver_config, konnectivity
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.control_plane_flags import (
    COMPONENT_FLAGS,
    Files,
    apiserver_flags,
    controller_manager_flags,
    extra_flags,
    scheduler_flags,
    with_extra_flags,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import (
    VirtualClusterRef,
    check_count,
    check_replicas,
    container_resources,
    flags,
    http_probe,
    liveness_probe,
    placement,
    secret_volume,
    spread_affinity,
    workload,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import (
    check_image_repository,
    check_kubernetes_version,
)

PKI = "/etc/kubernetes/pki"
ETCD_PKI = "/etc/kubernetes/etcd"
CONF = "/etc/kubernetes/conf"
FILES = Files(PKI, ETCD_PKI + "/ca.crt", ETCD_PKI + "/apiserver-etcd-client.crt",
              ETCD_PKI + "/apiserver-etcd-client.key", CONF, signing_cert=PKI + "/ca.signer.crt")
# How long a component waits (the API server for etcd, the controllers for it) before its container fails. A day:
# the pods are created while etcd starts, and a container that had failed twice during a long etcd outage would
# look crash-looping to the rollout wait of the next run. That wait bounds how long a run waits.
AWAIT_TIMEOUT = 86400
# One startup probe waits this long for its component (the kubelet's timeout is a second more).
STARTUP_PROBE_WAIT_S = 9
# How long an API server told to stop keeps serving while its endpoint leaves every node's rules.
SHUTDOWN_DELAY_S = 3
# How long the kubelet waits for one /readyz answer: more than the server's own etcd check may take (2 s).
READYZ_TIMEOUT_S = 5
# Pod template annotation that follows the certificates: a re-issued one rolls the component.
PKI_REVISION = "kubenest.kosmos.io/pki-revision"
APISERVER_PKI_KEYS = ["ca.crt", "apiserver.crt", "apiserver.key", "apiserver-kubelet-client.crt",
                      "apiserver-kubelet-client.key", "front-proxy-ca.crt", "front-proxy-client.crt",
                      "front-proxy-client.key", "sa.key", "sa.pub"]


class ControlPlaneSettings:
    """Checked settings shared by the three components. replicas: of each component (the API servers serve
    side by side, the controllers elect a leader); host_nodes: the schedulable host nodes of the placement,
    which decide whether replicas must each have a node of their own."""

    def __init__(self, vc, image_repository, version, node_selector=None, tolerations=None, resources=None,
                 pki_revision="", await_apiserver=True, gogc=None, extra_args=None, replicas=1, host_nodes=0):
        self.vc = VirtualClusterRef(vc)
        self.replicas = check_replicas(replicas, "the API server replicas")
        self.host_nodes = check_count(host_nodes, "host_nodes")
        self.extra_args = check_extra_args(extra_args)
        self.pki_revision = check_revision(pki_revision)
        self.image_repository = check_image_repository(image_repository)
        self.version = check_kubernetes_version(version)
        self.placement = placement(node_selector, tolerations)
        self.resources = dict(resources or {})  # by component
        if not isinstance(await_apiserver, bool):
            raise ValueError("await_apiserver must be true or false, not %r" % (await_apiserver,))
        self.await_apiserver = await_apiserver
        self.gogc = check_gogc(gogc)

    def image(self, binary):
        return "%s/%s:%s" % (self.image_repository, binary, self.version)

    def deployment(self, component, binary, options, probes, mounts, volumes, serves_on, ports=None,
                   await_kubeconfig=None, await_etcd=None):
        """await_kubeconfig: the component's kubeconfig; await_etcd: the etcd URL of the API server. Unless
        await_apiserver is off, the component starts through await-ready (in the components' images), which
        waits until that API server is ready, or that etcd has a leader, and then becomes the component: all of a
        virtual cluster's pods can be created together and none exits for want of another. serves_on: the port
        the component serves on once it runs, and the path that answers 200 once it is ready."""
        volume_mounts = [{"name": name, "mountPath": path, "readOnly": True} for name, path in mounts]
        command = flags("/usr/local/bin/" + binary, with_extra_flags(component, options,
                                                                     self.extra_args.get(component)))
        wait = None
        if await_kubeconfig and self.await_apiserver:
            wait = ["--kubeconfig=" + await_kubeconfig]
        elif await_etcd and self.await_apiserver:
            wait = ["--url=%s/health" % await_etcd.rstrip("/"), "--cacert=%s/ca.crt" % ETCD_PKI,
                    "--cert=%s/apiserver-etcd-client.crt" % ETCD_PKI, "--key=%s/apiserver-etcd-client.key" % ETCD_PKI]
        if wait:
            command = ["/usr/local/bin/await-ready"] + wait + ["--timeout=%ds" % AWAIT_TIMEOUT, "--"] + command
        container = {"name": binary, "image": self.image(binary), "imagePullPolicy": "IfNotPresent",
                     "command": command}
        if ports:
            container["ports"] = ports
        container["resources"] = container_resources(self.resources.get(component))
        if self.gogc.get(component):
            container["env"] = [{"name": "GOGC", "value": str(self.gogc[component])}]
        container.update(probes)
        if wait:
            # The liveness probe would end a component that is still waiting: it starts once the component is
            # healthy. await-ready polls the component's own port every 50 ms, for up to 9 s per probe, so the
            # pod turns Ready within a moment of the server rather than at the kubelet's next probe, up to a
            # second later.
            port, path = serves_on
            container["startupProbe"] = {
                "exec": {"command": ["/usr/local/bin/await-ready", "--local=https://127.0.0.1:%d%s" % (port, path),
                                     "--timeout=%ds" % STARTUP_PROBE_WAIT_S]},
                "periodSeconds": 1, "timeoutSeconds": STARTUP_PROBE_WAIT_S + 1,
                "failureThreshold": AWAIT_TIMEOUT // (STARTUP_PROBE_WAIT_S + 1)}
        container["volumeMounts"] = volume_mounts
        pod = dict(self.placement, containers=[container], volumes=volumes)
        annotations = {PKI_REVISION: self.pki_revision} if self.pki_revision else None
        extra = None
        if self.replicas > 1:
            pod["affinity"] = spread_affinity(self.vc, component, self.replicas, self.host_nodes)
            # One replica at a time, none added: with one host node per replica a surge pod would find no node,
            # and the others keep serving meanwhile.
            extra = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}
        return workload("Deployment", self.vc, "%s-%s" % (self.vc.name, component), component, pod,
                        replicas=self.replicas, extra_spec=extra, pod_annotations=annotations)

    @property
    def leader_elect(self):
        # A single replica has nothing to elect, and keeps the flags (and pods) it always had.
        return self.replicas > 1


def check_gogc(value):
    """GOGC by component: the Go heap may grow by this percentage over the live heap before a collection (Go's
    default 100). A proportional setting, unlike GOMEMLIMIT, never traps a heap that outgrows it in endless
    collections. 0 or absent keeps Go's default."""
    value = dict(value or {})
    for component, percent in value.items():
        if component not in ("apiserver", "controller-manager", "scheduler"):
            raise ValueError("gogc is given by component (apiserver, controller-manager, scheduler), not %r"
                             % (component,))
        if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 1000:
            raise ValueError("gogc of %s must be a percentage from 0 (Go's default) to 1000, not %r"
                             % (component, percent))
    return value


def check_extra_args(value):
    """Extra flags by component (apiserver, controller-manager, scheduler), each checked against what the
    collection sets and what would reach the host (plugin_utils/control_plane_flags.py)."""
    value = dict(value or {})
    problems = []
    for component, args in value.items():
        try:
            extra_flags(component, args or {})
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError("; ".join(problems))
    return dict((component, dict(args or {})) for component, args in value.items() if component in COMPONENT_FLAGS)


def check_revision(value):
    value = str(value or "")
    if not re.match(r"^[0-9a-f]{0,64}$", value):
        raise ValueError("pki_revision must be a hexadecimal digest, not %r" % value[:80])
    return value


def apiserver_deployment(settings, etcd_endpoint, service_cidr, cluster_domain="cluster.local",
                         konnectivity_image="", authentication=None, audit=None):
    """konnectivity_image: the proxy server's image; given, the server runs beside the API server and carries its
    traffic into the tenant's network (plugin_utils/konnectivity.py). authentication, audit: the spec's
    structured authentication and audit settings (plugin_utils/apiserver_config.py), read from the ConfigMap
    apiserver_config_map builds from the same values."""
    name = settings.vc.name
    files = ApiServerFiles(settings, cluster_domain, authentication, audit)
    # Kubelets of promoted nodes serve with a certificate the tenant's CA signed (approved by node_admit). The
    # `kubernetes` Service's endpoint is written by the tenant_bootstrap role: the address tenant nodes reach
    # this server at; the server's own choice would be its pod IP in the host, which tenant pods must not reach.
    options = apiserver_flags(FILES, 6443, etcd_endpoint, service_cidr, cluster_domain, kubelet_serving_ca=True,
                              endpoint_reconciler="none")
    # On a roll-out (new certificates, a new version) the old pod goes once the new one is ready; without a delay
    # it would stop listening before the nodes' kube-proxy (syncing at most once a second) sends its NodePort to
    # the new pod, and clients would meet refused connections. Meanwhile it serves, its /readyz failing.
    options.append(("shutdown-delay-duration", "%ds" % SHUTDOWN_DELAY_S))
    if konnectivity_image:
        # Webhooks and aggregated APIs at their pods' addresses: the agents run in their nodes' network, where
        # pod addresses route and Service addresses (without a default route to leave by) may not.
        options.append(("enable-aggregator-routing", "true"))
    probes = {
        # Every second: a virtual cluster is Ready no later than a second after its API server is. Its /readyz asks
        # etcd with a timeout of its own (--etcd-readycheck-timeout, 2 s): with the kubelet's default of 1 s, an
        # etcd member finishing its stop (a roll, a rotation) held the check long enough for three probes in a row
        # to time out, and the Service dropped the only server that was still answering. Five failures of a
        # 5-second probe take a server out that really stopped serving.
        "readinessProbe": http_probe("/readyz", 6443, period=1, scheme="HTTPS", timeout=READYZ_TIMEOUT_S,
                                     failure_threshold=5),
        "livenessProbe": liveness_probe("/livez", 6443, scheme="HTTPS"),
    }
    volumes = [
        secret_volume("pki", "%s-pki" % name, APISERVER_PKI_KEYS),
        secret_volume("etcd", "%s-etcd-pki" % name, ["ca.crt", "apiserver-etcd-client.crt",
                                                     "apiserver-etcd-client.key"]),
    ]
    mounts = [("pki", PKI), ("etcd", ETCD_PKI)]
    if konnectivity_image:
        volumes.append(secret_volume("conf", "%s-component-kubeconfigs" % name, ["konnectivity-server.conf"]))
    options += files.flags()
    if files.files:
        volumes.append({"name": "config", "configMap": {"name": "%s-apiserver-config" % name,
                                                        "items": [{"key": k, "path": k} for k in sorted(files.files)]}})
        mounts.append(("config", apiserver_config.CONFIG_DIR))
    deployment = settings.deployment("apiserver", "kube-apiserver", options, probes, mounts, volumes,
                                     (6443, "/readyz"), ports=[{"name": "https", "containerPort": 6443}],
                                     await_etcd=etcd_endpoint)
    files.add_to_pod(deployment["spec"]["template"])
    if konnectivity_image:
        konnectivity.add_to_apiserver_pod(
            deployment["spec"]["template"]["spec"], konnectivity_image, "%s-konnectivity" % name,
            FILES.cert("apiserver.crt"), FILES.cert("apiserver.key"), FILES.kubeconfig("konnectivity-server"),
            [("pki", PKI), ("conf", CONF)], settings.resources.get("konnectivity-server"),
            server_count=settings.replicas)
    return deployment


class ApiServerFiles:
    """The authentication configuration and audit policy of one API server, checked, with what the pod needs for
    them: flags, the ConfigMap's files, the audit log's volume and the container that streams it."""

    def __init__(self, settings, cluster_domain, authentication, audit):
        self.settings = settings
        self.authentication = apiserver_config.authentication_configuration(
            authentication, "https://kubernetes.default.svc.%s" % cluster_domain)
        audit = apiserver_config.audit_settings(audit)
        self.audit_policy, self.audit_limits = audit if audit else (None, None)
        self.files = apiserver_config.config_files(self.authentication, self.audit_policy)
        conflict = apiserver_config.flag_conflict(self.authentication, settings.extra_args.get("apiserver"))
        if conflict:
            raise ValueError(conflict)

    def flags(self):
        options = []
        if self.authentication:
            options.append(("authentication-config", "%s/%s" % (apiserver_config.CONFIG_DIR,
                                                                apiserver_config.AUTHENTICATION_KEY)))
        if self.audit_policy:
            options += apiserver_config.audit_flags(self.audit_limits, "%s/%s" % (
                apiserver_config.CONFIG_DIR, apiserver_config.AUDIT_POLICY_KEY))
        return options

    def add_to_pod(self, template):
        if not self.files:
            return
        template["metadata"].setdefault("annotations", {})[apiserver_config.CONFIG_REVISION] = (
            apiserver_config.config_revision(self.files))
        if not self.audit_policy:
            return
        pod = template["spec"]
        pod["volumes"].append({"name": "audit-log", "emptyDir": {
            "sizeLimit": "%dMi" % apiserver_config.audit_volume_mib(self.audit_limits)}})
        pod["containers"][0]["volumeMounts"].append({"name": "audit-log", "mountPath": apiserver_config.AUDIT_DIR})
        pod["containers"].append({
            "name": "audit-log", "image": self.settings.image("kube-apiserver"), "imagePullPolicy": "IfNotPresent",
            "command": ["/usr/local/bin/follow-log", apiserver_config.AUDIT_LOG],
            "resources": container_resources(self.settings.resources.get("audit-log")
                                             or {"requests": {"cpu": "5m", "memory": "8Mi"}}),
            "volumeMounts": [{"name": "audit-log", "mountPath": apiserver_config.AUDIT_DIR, "readOnly": True}]})


def apiserver_config_map(settings, cluster_domain="cluster.local", authentication=None, audit=None):
    """The ConfigMap `<name>-apiserver-config` with the files apiserver_deployment mounts from it."""
    files = ApiServerFiles(settings, cluster_domain, authentication, audit)
    return apiserver_config.config_map(settings.vc, files.files)


def controller_manager_deployment(settings, service_cidr, pod_cidr, node_cidr_mask=24):
    name = settings.vc.name
    # Bound to all addresses for the kubelet's probe at the pod IP.
    options = controller_manager_flags(FILES, name, service_cidr, "0.0.0.0", leader_elect=settings.leader_elect,
                                       pod_cidr=pod_cidr,
                                       node_cidr_mask=node_cidr_mask)
    probes = {"livenessProbe": liveness_probe("/healthz", 10257, scheme="HTTPS")}
    volumes = [
        secret_volume("pki", "%s-pki" % name, ["ca.crt", "ca.signer.crt", "ca.key", "sa.key"]),
        secret_volume("conf", "%s-component-kubeconfigs" % name, ["controller-manager.conf"]),
    ]
    return settings.deployment("controller-manager", "kube-controller-manager", options, probes,
                               [("pki", PKI), ("conf", CONF)], volumes, (10257, "/healthz"),
                               await_kubeconfig=FILES.kubeconfig("controller-manager"))


def scheduler_deployment(settings):
    options = scheduler_flags(FILES, "0.0.0.0", leader_elect=settings.leader_elect)
    probes = {"livenessProbe": liveness_probe("/healthz", 10259, scheme="HTTPS")}
    volumes = [secret_volume("conf", "%s-component-kubeconfigs" % settings.vc.name, ["scheduler.conf"])]
    return settings.deployment("scheduler", "kube-scheduler", options, probes, [("conf", CONF)], volumes,
                               (10259, "/healthz"),
                               await_kubeconfig=FILES.kubeconfig("scheduler"))
