"""The roles node_promote, tenant_bootstrap and node_isolation were one role: what they still share agrees."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


def _defaults(role: str) -> dict:
    return yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())


def test_the_join_tokens_carry_the_group_the_tenant_lets_ask_for_node_certificates():
    assert _defaults("node_promote")["node_promote_tenant_bootstrap_group"] == \
        _defaults("tenant_bootstrap")["tenant_bootstrap_group"]


def test_node_promote_keeps_no_option_of_the_roles_split_from_it():
    text = "\n".join(path.read_text() for path in (REPO / "roles" / "node_promote").rglob("*.yml"))
    for gone in ("node_promote_isolation_chain", "node_promote_isolation_add_hosts", "node_promote_isolation_in_force",
                 "node_promote_konnectivity", "node_promote_tenant_objects", "node_promote_kube_proxy_image",
                 "node_promote_tenant_pod_cidr"):
        assert gone not in text, gone


def test_the_old_names_of_the_moved_options_still_count(tmp_path):
    """A site that set the node_promote_* names keeps its settings; without them the defaults are as before."""
    import json
    import os
    import subprocess
    import sys

    playbook = tmp_path / "play.yml"
    show = {name: "{{ " + name + " }}" for name in (
        "tenant_bootstrap_konnectivity", "tenant_bootstrap_konnectivity_port", "tenant_bootstrap_pod_cidr",
        "tenant_bootstrap_objects", "tenant_bootstrap_kube_proxy_image", "node_isolation_chain")}
    tasks = [{"ansible.builtin.include_vars": str(REPO / "roles" / role / "defaults" / "main.yml")}
             for role in ("tenant_bootstrap", "node_isolation")]
    tasks.append({"ansible.builtin.debug": {"msg": show}})
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    old = {"node_promote_konnectivity": False, "node_promote_konnectivity_port": 31000,
           "node_promote_tenant_pod_cidr": "10.9.0.0/16", "node_promote_tenant_objects": [{"kind": "ConfigMap"}],
           "node_promote_kube_proxy_image": "r.example/kube-proxy:v1", "node_promote_isolation_chain": "OLD-CHAIN"}
    vc = {"kubenest_vc": {"namespace": "ns", "name": "vc", "image_repository": "r.example", "kubernetes_version": "v9"}}
    ansible = Path(sys.executable).parent / "ansible-playbook"
    env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}

    def shown(extra):
        done = subprocess.run([str(ansible), "-i", "localhost,", "-c", "local", str(playbook), "-e", json.dumps(extra)],
                              capture_output=True, text=True, env=env, timeout=120, check=True)
        return json.loads(done.stdout)["plays"][0]["tasks"][-1]["hosts"]["localhost"]["msg"]

    assert shown({**vc, **old}) == {
        "tenant_bootstrap_konnectivity": False, "tenant_bootstrap_konnectivity_port": 31000,
        "tenant_bootstrap_pod_cidr": "10.9.0.0/16", "tenant_bootstrap_objects": [{"kind": "ConfigMap"}],
        "tenant_bootstrap_kube_proxy_image": "r.example/kube-proxy:v1", "node_isolation_chain": "OLD-CHAIN"}
    assert shown(vc) == {
        "tenant_bootstrap_konnectivity": True, "tenant_bootstrap_konnectivity_port": 0,
        "tenant_bootstrap_pod_cidr": "198.18.64.0/18", "tenant_bootstrap_objects": [],
        "tenant_bootstrap_kube_proxy_image": "r.example/kube-proxy:v9", "node_isolation_chain": "KUBENEST-ISOLATION"}
