"""Files the collection writes for Go programs (kubeconfigs, kubelet and kube-proxy configuration) say what they
mean to Go's YAML, which follows YAML 1.1: a plain `n`, `off`, `0123` or `2026-12-01` is a boolean, a number or a
date there, though PyYAML writes and reads them as strings. Every writer is fed names and values of that kind,
for the namespace and the name alike, and must leave no plain scalar (or write JSON). A real Go reader checks
the kubeconfigs too: tests/integration/k8s/test_go_readable_kubeconfigs.py."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.filter.token_kubeconfig import token_kubeconfig
from ansible_collections.kosmos.kubenest.plugins.module_utils import kubeconfig as kc

REPO = Path(__file__).resolve().parents[3]
CA = b"-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n"
# Valid Kubernetes names (DNS labels) that YAML 1.1 resolves to something other than a string.
AMBIGUOUS = ["n", "y", "no", "yes", "on", "off", "true", "false", "null", "0123", "123", "1e3", "0x1f", "0o17",
             "2026-12-01", "1-2"]
AMBIGUOUS_VALUES = AMBIGUOUS + ["~", "", "12:30", ".inf", "-.nan", "0b101", "+1", "1_000", "=", "<<"]


def plain_scalars(text):
    """The scalars of a YAML document written without quotes."""
    return [event.value for event in yaml.parse(text)
            if isinstance(event, yaml.ScalarEvent) and event.style not in ('"', "'")]


@pytest.mark.parametrize("name", AMBIGUOUS)
def test_a_kubeconfig_quotes_every_string(name):
    config = kc.client_cert_kubeconfig("https://198.18.0.11:31443", CA, b"CERT", b"KEY", cluster_name=name,
                                       user_name=name, namespace=name)
    text = kc.dump_kubeconfig(config)
    assert plain_scalars(text) == [] and yaml.safe_load(text) == config
    token = token_kubeconfig("https://198.18.0.11:31443", CA.decode(), "abcdef.0123456789abcdef", name, name)
    assert plain_scalars(token) == []
    assert yaml.safe_load(token)["clusters"][0]["name"] == name


def test_a_kubeconfig_keeps_long_data_on_one_line():
    config = kc.client_cert_kubeconfig("https://198.18.0.11:31443", CA * 200, b"C", b"K")
    text = kc.dump_kubeconfig(config)
    [line] = [line for line in text.splitlines() if "certificate-authority-data" in line]
    assert line.strip().endswith('"') and yaml.safe_load(text) == config


def render(template, **values):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps  # what ansible's to_json does for a str
    return env.from_string((REPO / "roles/kubelet/templates" / template).read_text()).render(
        ansible_managed="managed", **values)


@pytest.mark.parametrize("value", AMBIGUOUS_VALUES)
def test_the_kubelet_role_templates_leave_no_templated_value_plain(value):
    def proxy(v):
        return render("kube-proxy-config.yaml.j2", kubelet_cluster_cidr=v, inventory_hostname=v, ansible_host=v)

    def kubelet(v):
        return render("kubelet-config.yaml.j2", kubelet_cluster_domain=v, kubelet_cluster_dns=v, inventory_hostname=v,
                      groups={"control": [v]}, kubelet_control_plane_group="control",
                      kubelet_max_pods=110)  # an integer option: `| int` leaves nothing of a string plain

    doc = yaml.safe_load(proxy(value))
    assert (doc["clusterCIDR"], doc["hostnameOverride"], doc["bindAddress"]) == (value, value, value)
    doc = yaml.safe_load(kubelet(value))
    assert doc["clusterDomain"] == value and doc["clusterDNS"] == [value]
    # The plain scalars are the template's own, whatever the values: none comes from a value.
    assert plain_scalars(proxy(value)) == plain_scalars(proxy("sentinel"))
    assert plain_scalars(kubelet(value)) == plain_scalars(kubelet("sentinel"))


@pytest.mark.parametrize("path, needle", [
    ("roles/tenant_bootstrap/tasks/main.yml", "config.conf:"),
    ("roles/tenant_bootstrap/tasks/main.yml", "kubeconfig.conf:"),
    ("roles/node_promote/tasks/tenant_join.yml", "/var/lib/kubelet/config.yaml"),
])
def test_the_promotion_writes_the_tenant_kubelet_and_kube_proxy_files_as_json(path, needle):
    # These hold the tenant's names (its cluster and node names); to_nice_yaml would leave `n` plain.
    text = (REPO / path).read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if needle in line)
    written = next(line for line in lines[at:at + 2] if "| to_nice_" in line)
    assert "| to_nice_json" in written, written


def test_no_role_writes_yaml_text_for_a_go_program():
    # to_nice_yaml / to_yaml leave ambiguous scalars plain; every file of the roles goes out as JSON instead.
    found = [str(p.relative_to(REPO)) for p in (REPO / "roles").rglob("*.yml")
             if "to_nice_yaml" in p.read_text() or "| to_yaml" in p.read_text()]
    assert found == []
