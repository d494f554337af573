"""Control-plane flags are defined once: units on machines and hosted Deployments differ only where the modes
must (and say so in a setting), and the unit templates spell no flag of their own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.control_plane_flags import control_plane_flags
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest

ROLE = Path(__file__).resolve().parents[3] / "roles" / "control_plane"
UNIT_FILES = {"pki": "/etc/kubernetes/pki", "etcd_ca": "/etc/kubernetes/pki/etcd-ca.crt",
              "etcd_cert": "/etc/kubernetes/pki/apiserver-etcd-client.crt",
              "etcd_key": "/etc/kubernetes/pki/apiserver-etcd-client.key", "conf": "/etc/kubernetes"}
VC = {"name": "vc1", "namespace": "tenants", "labels": {"kosmos.io/virtualcluster": "vc1"},
      "selector": {"kosmos.io/virtualcluster": "vc1"}, "owner_references": []}
HOSTED = dict(image_repository="kubenest.local", version="v1.36.3", etcd_endpoint="https://10.0.0.1:2379",
              service_cidr="198.18.128.0/17", pod_cidr="198.18.64.0/18", node_cidr_mask=24)


def names(flags):
    return [flag.split("=", 1)[0] for flag in flags]


def hosted_flags(component):
    (container,) = hosted_manifest(component, VC, HOSTED)["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    if "--" in command:  # the component starts through await-ready, which takes its own flags before "--"
        command = command[command.index("--") + 1:]
    return command[1:]


def unit_flags(component):
    settings = {
        "apiserver": {"advertise_address": "198.18.0.11", "secure_port": 6443,
                      "etcd_servers": ["https://198.18.0.11:2379"], "service_cidr": "198.19.128.0/17"},
        "controller-manager": {"cluster_name": "kubenest", "service_cidr": "198.19.128.0/17",
                               "bind_address": "127.0.0.1", "leader_elect": True},
        "scheduler": {"bind_address": "127.0.0.1", "leader_elect": True},
    }[component]
    return control_plane_flags(component, dict(settings, files=UNIT_FILES))


# What each mode must set differently, and why (see plugin_utils/control_plane_flags.py).
MODE_ONLY = {
    # The hosted server sits behind the nodes' kube-proxy rules, which need a moment to drop a stopping pod.
    "apiserver": ({"--advertise-address"}, {"--kubelet-certificate-authority", "--endpoint-reconciler-type",
                                            "--shutdown-delay-duration"}),
    "controller-manager": (set(), {"--cluster-cidr", "--node-cidr-mask-size"}),
    "scheduler": (set(), set()),
}


@pytest.mark.parametrize("component", ["apiserver", "controller-manager", "scheduler"])
def test_units_and_deployments_share_every_flag_but_the_mode_settings(component):
    unit, hosted = names(unit_flags(component)), names(hosted_flags(component))
    unit_only, hosted_only = MODE_ONLY[component]
    assert set(unit) - set(hosted) == unit_only
    assert set(hosted) - set(unit) == hosted_only
    assert len(unit) == len(set(unit)) and len(hosted) == len(set(hosted))


def test_the_unit_templates_spell_no_flag_of_their_own():
    for template in (ROLE / "templates").glob("kube-*.service.j2"):
        text = template.read_text()
        assert "kosmos.kubenest.control_plane_flags" in text, template.name
        assert not re.search(r"^\s*--[a-z]", text, re.MULTILINE), template.name


@pytest.mark.parametrize(("component", "settings", "says"), [
    ("etcd", {}, "unknown component"),
    ("scheduler", {"bind_address": "127.0.0.1", "leader_elect": True, "port": 1}, "takes no port"),
    ("scheduler", {"bind_address": "localhost", "leader_elect": True}, "bind address"),
    ("apiserver", {"secure_port": 70000, "etcd_servers": [], "service_cidr": "10.0.0.0/16"}, "TCP port"),
    ("apiserver", {"secure_port": 6443, "etcd_servers": [], "service_cidr": "10.0.0.1/16"}, "service CIDR"),
])
def test_bad_settings_are_refused_by_name(component, settings, says):
    with pytest.raises(AnsibleFilterError, match=says):
        control_plane_flags(component, dict(settings, files=UNIT_FILES))


@pytest.mark.parametrize("path", ["relative/pki", "/etc/../pki", "", None])
def test_file_locations_must_be_plain_absolute_paths(path):
    with pytest.raises(AnsibleFilterError, match="pki must be a normalized absolute path"):
        control_plane_flags("scheduler", {"files": dict(UNIT_FILES, pki=path), "bind_address": "127.0.0.1",
                                          "leader_elect": True})


def test_the_key_set_is_named_where_pods_reach_the_server_in_both_modes():
    """The OIDC discovery document names the JWKS at the `kubernetes` Service's name, under the issuer, not at the
    server's own address: a hosted server's address is a pod address of the host, unreachable from the tenant."""
    for flags in (unit_flags("apiserver"), hosted_flags("apiserver")):
        values = dict(flag.split("=", 1) for flag in flags)
        issuer = values["--service-account-issuer"]
        assert issuer == "https://kubernetes.default.svc.cluster.local"
        assert values["--service-account-jwks-uri"] == issuer + "/openid/v1/jwks"


def test_units_call_webhooks_at_pod_addresses_when_the_role_says_so():
    """The host's API server runs on a machine that may have no route to the Service range: a webhook or an
    aggregated API behind a Service would never answer it (the upstream AdmissionWebhook and Aggregator specs)."""
    flags = unit_flags("apiserver")
    assert "--enable-aggregator-routing=true" not in flags
    routed = control_plane_flags("apiserver", {"secure_port": 6443, "etcd_servers": ["https://198.18.0.11:2379"],
                                               "service_cidr": "198.19.128.0/17", "aggregator_routing": True,
                                               "files": UNIT_FILES})
    assert "--enable-aggregator-routing=true" in routed
    template = (ROLE / "templates" / "kube-apiserver.service.j2").read_text()
    assert "'aggregator_routing': control_plane_aggregator_routing | bool" in template
    defaults = yaml.safe_load((ROLE / "defaults" / "main" / "machines.yml").read_text())
    assert defaults["control_plane_aggregator_routing"] is True
