"""playbooks/operator_install.yml against an API server of its own (its cluster-wide objects would meet those of
other tests on the shared one), the way the AWX template *install or upgrade the operator* runs it: the host's
kubeconfig and the agents' client pair only in the environment the credential types inject, the registries as a
survey's text. No kubelet runs here, so the play is told not to wait for the pods; the sandbox's in-cluster tests
wait for them."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import kubernetes
import pytest

from tests.support.apiserver import ApiServer

REPO = Path(__file__).resolve().parents[3]
PLAYBOOK = REPO / "playbooks" / "operator_install.yml"
NS = "kubenest-system"
IMAGE = "registry.example.com:5000/kubenest-operator"


@pytest.fixture(scope="module")
def own_apiserver(k8s_bin_dir):
    with ApiServer() as api:
        yield api


@pytest.fixture
def agent_pair(tmp_path) -> dict[str, Path]:
    files = {}
    for name in ("ca.crt", "client.crt", "client.key"):
        files[name] = tmp_path / name
        files[name].write_text(f"-----BEGIN TEST-----\n{name} of the operator's agent client\n-----END TEST-----\n")
    return files


def _play(api: ApiServer, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KUBENEST_AGENT_", "K8S_AUTH_"))}
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(PLAYBOOK), *extra],
                          env={**base, "K8S_AUTH_KUBECONFIG": str(api.kubeconfig), **env}, capture_output=True,
                          text=True, timeout=300, check=False)


def _awx_env(pair: dict[str, Path]) -> dict[str, str]:
    return {"KUBENEST_AGENT_CA_FILE": str(pair["ca.crt"]), "KUBENEST_AGENT_CERT_FILE": str(pair["client.crt"]),
            "KUBENEST_AGENT_KEY_FILE": str(pair["client.key"])}


def test_without_the_agents_client_pair_it_stops_before_writing_anything(own_apiserver):
    proc = _play(own_apiserver, {}, "-e", "kubenest_operator_wait=false")
    assert proc.returncode != 0
    assert "kubenest_operator_agent_ca_file, _cert_file and _key_file" in proc.stdout, proc.stdout[-3000:]
    assert "KUBENEST_AGENT_CA_FILE" in proc.stdout
    client = kubernetes.config.new_client_from_config(str(own_apiserver.kubeconfig))
    names = {ns.metadata.name for ns in kubernetes.client.CoreV1Api(client).list_namespace().items}
    assert NS not in names


# A host older than 1.30 serves no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy. Stood in for by a
# 1.36 API server with that API and its admission plugin turned off, which is what such a host lacks here.
OLD_HOST_ARGS = ("--runtime-config=admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,"
                 "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false",
                 "--disable-admission-plugins=ValidatingAdmissionPolicy")


def test_a_host_without_admission_policies_is_refused_before_anything_is_applied(k8s_bin_dir, agent_pair):
    with ApiServer(extra_args=OLD_HOST_ARGS) as old_host:
        proc = _play(old_host, _awx_env(agent_pair), "-e", "kubenest_operator_wait=false")
        assert proc.returncode != 0
        assert "it takes a host of Kubernetes 1.30 or newer" in proc.stdout, proc.stdout[-3000:]
        client = kubernetes.config.new_client_from_config(str(old_host.kubeconfig))
        crds = kubernetes.client.ApiextensionsV1Api(client).list_custom_resource_definition().items
        assert not [crd.metadata.name for crd in crds]
        assert NS not in {ns.metadata.name for ns in kubernetes.client.CoreV1Api(client).list_namespace().items}


def test_installs_and_upgrades_from_the_environment_awx_injects(own_apiserver, agent_pair):
    env = _awx_env(agent_pair)
    answers = ["-e", "kubenest_operator_wait=false",
               "-e", '{"kubenest_operator_allowed_registries": "registry.example.com:5000\\nkubenest.local"}']
    first = _play(own_apiserver, env, "-e", f"kubenest_operator_image={IMAGE}:1.0.0", *answers)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    client = kubernetes.config.new_client_from_config(str(own_apiserver.kubeconfig))
    core, apps = kubernetes.client.CoreV1Api(client), kubernetes.client.AppsV1Api(client)
    secret = core.read_namespaced_secret("kubenest-operator-agent", NS)
    assert {k: base64.b64decode(v).decode() for k, v in secret.data.items()} == {
        name: path.read_text().rstrip("\n") for name, path in agent_pair.items()}  # the file lookup's rstrip
    site = core.read_namespaced_config_map("kubenest-operator-site", NS).data["site-vars.yml"]
    assert "registry.example.com:5000" in site and "kubenest.local" in site
    assert f"{IMAGE}:1.0.0" in {
        c.image for c in apps.read_namespaced_deployment("kubenest-operator", NS).spec.template.spec.containers}

    upgrade = _play(own_apiserver, env, "-e", f"kubenest_operator_image={IMAGE}:1.1.0", *answers)
    assert upgrade.returncode == 0, upgrade.stdout[-4000:] + upgrade.stderr[-2000:]
    images = {c.image for c in apps.read_namespaced_deployment("kubenest-operator", NS).spec.template.spec.containers}
    assert images == {f"{IMAGE}:1.1.0"}
    assert "client.key of the operator's agent client" not in upgrade.stdout  # no_log keeps the key out of the log


def _names(items) -> set[str]:
    return {item.metadata.name for item in items}


def test_shards_replace_the_one_deployment_and_give_way_to_it_again(own_apiserver, agent_pair):
    env, quick = _awx_env(agent_pair), ["-e", "kubenest_operator_wait=false"]
    client = kubernetes.config.new_client_from_config(str(own_apiserver.kubeconfig))
    core, apps = kubernetes.client.CoreV1Api(client), kubernetes.client.AppsV1Api(client)
    policy, custom = kubernetes.client.PolicyV1Api(client), kubernetes.client.CustomObjectsApi(client)
    one = _play(own_apiserver, env, *quick)
    assert one.returncode == 0, one.stdout[-4000:] + one.stderr[-2000:]
    for namespace in ("lab-shards", "team-a-shards"):
        if namespace not in _names(core.list_namespace().items):
            core.create_namespace({"metadata": {"name": namespace}})
        custom.create_namespaced_custom_object("kosmos.io", "v1alpha1", namespace, "virtualclusters", {
            "apiVersion": "kosmos.io/v1alpha1", "kind": "VirtualCluster",
            "metadata": {"name": "sharded", "namespace": namespace}, "spec": {}})
    try:
        # A layout that leaves a virtual cluster unserved is refused once the CRDs are in, before anything else.
        team_a_only = json.dumps({"kubenest_operator_shards": [{"name": "team-a", "namespaces": ["team-a-*"]}]})
        refused = _play(own_apiserver, env, *quick, "-e", team_a_only)
        assert refused.returncode != 0
        assert "namespace lab-shards is served by no shard: the CRDs are applied, nothing else was changed" in \
            refused.stdout, refused.stdout[-3000:]
        assert "kubenest-operator" in _names(apps.list_namespaced_deployment(NS).items)

        # As an AWX survey gives it: one JSON text.
        layout = json.dumps([{"name": "team-a", "namespaces": ["team-a-*"]},
                             {"name": "rest", "namespaces": ["!team-a-*"]}])
        sharded = _play(own_apiserver, env, *quick, "-e", json.dumps({"kubenest_operator_shards": layout}))
        assert sharded.returncode == 0, sharded.stdout[-4000:] + sharded.stderr[-2000:]
        deployments = {d.metadata.name: d for d in apps.list_namespaced_deployment(NS).items}
        assert set(deployments) == {"kubenest-operator-team-a", "kubenest-operator-rest", "kubenest-binder"}
        rest = deployments["kubenest-operator-rest"].spec.template.spec.containers[0].args
        assert rest[-3:] == ["--namespace=!team-a-*", "--peering=kubenest-rest", "--no-cluster-scoped"]
        assert _names(policy.list_namespaced_pod_disruption_budget(NS).items) == {
            "kubenest-operator-team-a", "kubenest-operator-rest"}
        peerings = _names_of(custom.list_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings")["items"])
        assert {"kubenest", "kubenest-team-a", "kubenest-rest"} <= peerings

        back = _play(own_apiserver, env, *quick)
        assert back.returncode == 0, back.stdout[-4000:] + back.stderr[-2000:]
        assert _names(apps.list_namespaced_deployment(NS).items) == {"kubenest-operator", "kubenest-binder"}
        assert _names(policy.list_namespaced_pod_disruption_budget(NS).items) == {"kubenest-operator"}
    finally:
        for namespace in ("lab-shards", "team-a-shards"):
            custom.delete_namespaced_custom_object("kosmos.io", "v1alpha1", namespace, "virtualclusters", "sharded")


def _names_of(items: list[dict]) -> set[str]:
    return {item["metadata"]["name"] for item in items}
