"""deploy/operator as an admin applies it: both kustomizations name files that exist and bring the PDB and the
site variables; the Deployment keeps the operator on control-plane nodes, probes it, and reads its agent
credentials and site variables from where the ConfigMap says they are."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubenest_operator.extravars import load_site_vars

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "operator"


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("kustomization", [DEPLOY / "kustomization.yaml", DEPLOY / "namespaced" / "kustomization.yaml"])
def test_each_kustomization_names_existing_files_with_the_pdb_and_the_site_variables(kustomization):
    resources = [kustomization.parent / r for r in yaml.safe_load(kustomization.read_text())["resources"]]
    assert all(r.is_file() for r in resources), [str(r) for r in resources if not r.is_file()]
    kinds = {d["kind"] for r in resources for d in _docs(r)}
    assert {"Deployment", "PodDisruptionBudget", "ConfigMap", "Namespace"} <= kinds


def test_the_deployment_stays_on_control_plane_nodes_and_reads_its_site_variables(tmp_path):
    deployment = _docs(DEPLOY / "deployment.yaml")[0]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert any(t["key"] == "node-role.kubernetes.io/control-plane" for t in pod["tolerations"])
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == container["livenessProbe"]["httpGet"]["path"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    site = _docs(DEPLOY / "site.yaml")[0]
    assert volumes["site"]["configMap"]["name"] == site["metadata"]["name"]
    site_arg = next(a.split("=", 1)[1] for a in container["args"] if a.startswith("--site-vars="))
    assert Path(site_arg).parent == Path(mounts["site"]) and Path(site_arg).name in site["data"]
    (tmp_path / "site.yml").write_text(site["data"][Path(site_arg).name])
    site_vars = load_site_vars(tmp_path / "site.yml")
    for key in ("kubenest_agent_ca_file", "kubenest_agent_cert_file", "kubenest_agent_key_file"):
        assert Path(site_vars[key]).parent == Path(mounts["agent-client"])
    assert volumes["agent-client"]["secret"]["defaultMode"] == 0o440 and pod["securityContext"]["fsGroup"] == 65532
    pdb = _docs(DEPLOY / "pdb.yaml")[0]
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_the_default_install_binds_the_tenant_role_through_the_binder_only():
    resources = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert "binder.yaml" in resources and "binder-deployment.yaml" in resources
    assert "rbac-all-namespaces.yaml" not in resources
    binder_objects = [item for doc in _docs(DEPLOY / "binder.yaml") for item in doc["items"]]
    [role] = [o for o in binder_objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "kubenest-binder"]
    # Nothing of the tenant role's own rights: it reads, writes RoleBindings and binds that one role.
    assert {r for rule in role["rules"] for r in rule["resources"]} == {
        "virtualclusters", "globalnodes", "rolebindings", "clusterroles"}
    [bind] = [rule for rule in role["rules"] if rule["resources"] == ["clusterroles"]]
    assert bind == {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                    "resourceNames": ["kubenest-operator-tenant"], "verbs": ["bind"]}
    operator = _docs(DEPLOY / "deployment.yaml")[0]["spec"]["template"]["spec"]
    binder = _docs(DEPLOY / "binder-deployment.yaml")[0]["spec"]["template"]["spec"]
    assert binder["serviceAccountName"] == "kubenest-binder" != operator["serviceAccountName"]
    assert binder["securityContext"]["runAsNonRoot"] and binder["nodeSelector"] == operator["nodeSelector"]
    assert binder["containers"][0]["image"] == operator["containers"][0]["image"]
    assert binder["containers"][0]["securityContext"] == operator["containers"][0]["securityContext"]
