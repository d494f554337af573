# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The Deployments of a virtual cluster's kube-apiserver, controller-manager and scheduler, as data."""

from __future__ import annotations

import re

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import (
    VirtualClusterRef,
    container_resources,
    flags,
    http_probe,
    placement,
    secret_volume,
    workload,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import (
    check_cidr,
    check_image_repository,
    check_kubernetes_version,
)

PKI = "/etc/kubernetes/pki"
ETCD_PKI = "/etc/kubernetes/etcd"
CONF = "/etc/kubernetes/conf"
# Pod template annotation that follows the certificates: a re-issued one rolls the component.
PKI_REVISION = "kubenest.kosmos.io/pki-revision"
APISERVER_PKI_KEYS = ["ca.crt", "apiserver.crt", "apiserver.key", "apiserver-kubelet-client.crt",
                      "apiserver-kubelet-client.key", "front-proxy-ca.crt", "front-proxy-client.crt",
                      "front-proxy-client.key", "sa.key", "sa.pub"]


class ControlPlaneSettings:
    """Checked settings shared by the three components."""

    def __init__(self, vc, image_repository, version, node_selector=None, tolerations=None, resources=None,
                 pki_revision=""):
        self.vc = VirtualClusterRef(vc)
        self.pki_revision = check_revision(pki_revision)
        self.image_repository = check_image_repository(image_repository)
        self.version = check_kubernetes_version(version)
        self.placement = placement(node_selector, tolerations)
        self.resources = dict(resources or {})  # by component

    def image(self, binary):
        return "%s/%s:%s" % (self.image_repository, binary, self.version)

    def deployment(self, component, binary, options, probes, mounts, volumes, ports=None):
        container = {"name": binary, "image": self.image(binary), "imagePullPolicy": "IfNotPresent",
                     "command": flags("/usr/local/bin/" + binary, options)}
        if ports:
            container["ports"] = ports
        container["resources"] = container_resources(self.resources.get(component))
        container.update(probes)
        container["volumeMounts"] = [{"name": name, "mountPath": path, "readOnly": True} for name, path in mounts]
        pod = dict(self.placement, containers=[container], volumes=volumes)
        annotations = {PKI_REVISION: self.pki_revision} if self.pki_revision else None
        return workload("Deployment", self.vc, "%s-%s" % (self.vc.name, component), component, pod,
                        pod_annotations=annotations)


def check_revision(value):
    value = str(value or "")
    if not re.match(r"^[0-9a-f]{0,64}$", value):
        raise ValueError("pki_revision must be a hexadecimal digest, not %r" % value[:80])
    return value


def apiserver_deployment(settings, etcd_endpoint, service_cidr, cluster_domain="cluster.local"):
    name = settings.vc.name
    options = [
        ("secure-port", "6443"),
        ("etcd-servers", etcd_endpoint),
        ("etcd-cafile", ETCD_PKI + "/ca.crt"),
        ("etcd-certfile", ETCD_PKI + "/apiserver-etcd-client.crt"),
        ("etcd-keyfile", ETCD_PKI + "/apiserver-etcd-client.key"),
        ("client-ca-file", PKI + "/ca.crt"),
        ("tls-cert-file", PKI + "/apiserver.crt"),
        ("tls-private-key-file", PKI + "/apiserver.key"),
        ("kubelet-client-certificate", PKI + "/apiserver-kubelet-client.crt"),
        ("kubelet-client-key", PKI + "/apiserver-kubelet-client.key"),
        ("kubelet-preferred-address-types", "InternalIP,Hostname"),
        # Kubelets of promoted nodes serve with a certificate the tenant's CA signed (approved by node_admit):
        # logs, exec and port-forward check it.
        ("kubelet-certificate-authority", PKI + "/ca.crt"),
        ("service-account-issuer", "https://kubernetes.default.svc.%s" % cluster_domain),
        ("service-account-key-file", PKI + "/sa.pub"),
        ("service-account-signing-key-file", PKI + "/sa.key"),
        ("service-cluster-ip-range", check_cidr("the service CIDR", service_cidr)),
        ("authorization-mode", "Node,RBAC"),
        ("enable-admission-plugins", "NodeRestriction"),
        ("enable-bootstrap-token-auth", "true"),
        ("allow-privileged", "true"),
        ("requestheader-client-ca-file", PKI + "/front-proxy-ca.crt"),
        ("requestheader-allowed-names", "front-proxy-client"),
        ("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
        ("requestheader-group-headers", "X-Remote-Group"),
        ("requestheader-username-headers", "X-Remote-User"),
        ("proxy-client-cert-file", PKI + "/front-proxy-client.crt"),
        ("proxy-client-key-file", PKI + "/front-proxy-client.key"),
        # The `kubernetes` Service's endpoint is written by the tenant_prepare tasks: the address tenant nodes
        # reach this server at. The server's own choice would be its pod IP in the host, which tenant pods
        # must not reach.
        ("endpoint-reconciler-type", "none"),
    ]
    probes = {
        "readinessProbe": http_probe("/readyz", 6443, period=3, scheme="HTTPS"),
        "livenessProbe": http_probe("/livez", 6443, period=10, initial_delay=30, scheme="HTTPS",
                                    failure_threshold=6),
    }
    volumes = [
        secret_volume("pki", "%s-pki" % name, APISERVER_PKI_KEYS),
        secret_volume("etcd", "%s-etcd-pki" % name, ["ca.crt", "apiserver-etcd-client.crt",
                                                     "apiserver-etcd-client.key"]),
    ]
    return settings.deployment("apiserver", "kube-apiserver", options, probes, [("pki", PKI), ("etcd", ETCD_PKI)],
                               volumes, ports=[{"name": "https", "containerPort": 6443}])


def controller_manager_deployment(settings, service_cidr, pod_cidr, node_cidr_mask=24):
    name = settings.vc.name
    conf = CONF + "/controller-manager.conf"
    mask = int(node_cidr_mask)
    options = [
        ("kubeconfig", conf),
        ("authentication-kubeconfig", conf),
        ("authorization-kubeconfig", conf),
        ("bind-address", "0.0.0.0"),
        ("cluster-name", name),
        ("cluster-signing-cert-file", PKI + "/ca.crt"),
        ("cluster-signing-key-file", PKI + "/ca.key"),
        ("root-ca-file", PKI + "/ca.crt"),
        ("service-account-private-key-file", PKI + "/sa.key"),
        ("service-cluster-ip-range", check_cidr("the service CIDR", service_cidr)),
        ("allocate-node-cidrs", "true"),
        ("cluster-cidr", check_cidr("the pod CIDR", pod_cidr)),
        ("node-cidr-mask-size", str(mask)),
        ("use-service-account-credentials", "true"),
        ("controllers", "*,bootstrapsigner,tokencleaner"),
        ("leader-elect", "false"),
    ]
    probes = {"livenessProbe": http_probe("/healthz", 10257, period=10, initial_delay=30, scheme="HTTPS")}
    volumes = [
        secret_volume("pki", "%s-pki" % name, ["ca.crt", "ca.key", "sa.key"]),
        secret_volume("conf", "%s-component-kubeconfigs" % name, ["controller-manager.conf"]),
    ]
    return settings.deployment("controller-manager", "kube-controller-manager", options, probes,
                               [("pki", PKI), ("conf", CONF)], volumes)


def scheduler_deployment(settings):
    conf = CONF + "/scheduler.conf"
    options = [
        ("kubeconfig", conf),
        ("authentication-kubeconfig", conf),
        ("authorization-kubeconfig", conf),
        ("bind-address", "0.0.0.0"),
        ("leader-elect", "false"),
    ]
    probes = {"livenessProbe": http_probe("/healthz", 10259, period=10, initial_delay=30, scheme="HTTPS")}
    volumes = [secret_volume("conf", "%s-component-kubeconfigs" % settings.vc.name, ["scheduler.conf"])]
    return settings.deployment("scheduler", "kube-scheduler", options, probes, [("conf", CONF)], volumes)
