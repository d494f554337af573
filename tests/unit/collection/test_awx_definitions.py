"""awx/controller.yml against what it points at: playbooks that read every survey answer, injectors that render
from their own inputs into the variables the collection reads, and a configure playbook that parses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from tests.support.awx import MACHINE, AwxWorkflow, check_answers, definitions, job_template, passed_to

REPO = Path(__file__).resolve().parents[3]
DEFS = definitions()
TEMPLATES = DEFS["kubenest_awx_job_templates"]
TYPES = {t["name"]: t for t in DEFS["kubenest_awx_credential_types"]}
WORKFLOWS = DEFS["kubenest_awx_workflow_job_templates"]
CREATE_THEN_NODES = "kosmos.kubenest create a virtual cluster, then add its nodes"
# What makes a create step promote nodes: the node questions of the create template.
CREATE_NODE_VARIABLES = {"kubenest_vc_nodes", "kubenest_vc_node_count", "kubenest_vc_node_labels"}
CONNECTION_DOC = yaml.safe_load(
    (REPO / "plugins/connection/nodeagent.py").read_text().split('DOCUMENTATION = r"""')[1].split('"""')[0])


def _playbook_text(playbook: str) -> str:
    """The playbook and the shared files it may read (vars_files, included tasks)."""
    shared = sorted((REPO / "playbooks/vars").glob("*.yml")) + sorted((REPO / "playbooks/tasks").glob("*.yml"))
    return "\n".join(p.read_text() for p in [REPO / playbook, *shared])


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t["name"])
def test_every_survey_answer_is_read_by_the_playbook(template):
    text = _playbook_text(template["playbook"])
    for question in template["survey"]:
        assert question["variable"] in text, f"{template['playbook']} never reads {question['variable']}"
    assert set(template["credential_types"]) <= set(TYPES) | {MACHINE}
    # AWX's own SSH credential is chosen at launch, with the machines' inventory.
    assert (MACHINE in template["credential_types"]) == bool(template.get("ask_inventory_on_launch"))


def test_every_playbook_asked_for_is_a_job_template():
    assert {t["playbook"] for t in TEMPLATES} == {
        "playbooks/virtualcluster_apply.yml", "playbooks/virtualcluster_nodes.yml",
        "playbooks/virtualcluster_delete.yml", "playbooks/etcd_backup.yml", "playbooks/etcd_restore.yml",
        "playbooks/agent_check.yml", "playbooks/operator_install.yml", "playbooks/install_agent.yml",
        "playbooks/remove_agent.yml", "playbooks/globalnode_clear.yml"}


@pytest.mark.parametrize("name", sorted(TYPES))
def test_injectors_render_from_their_inputs_into_what_the_collection_reads(name):
    ctype = TYPES[name]
    inputs = {f["id"]: f"value of {f['id']}" for f in ctype["inputs"]["fields"]}
    jinja = SandboxedEnvironment(undefined=StrictUndefined)
    files = {key.split(".", 1)[1]: f"/runner/env/{key}" for key in ctype["injectors"]["file"]}
    rendered = {key: jinja.from_string(t).render(**inputs) for key, t in ctype["injectors"]["file"].items()}
    assert sorted(rendered.values()) == sorted(inputs.values())  # each input lands in a file of its own
    env, extra_vars = ({k: jinja.from_string(t).render(**inputs, tower={"filename": files})
                        for k, t in ctype["injectors"].get(kind, {}).items()} for kind in ("env", "extra_vars"))
    assert sorted([*env.values(), *extra_vars.values()]) == sorted(files.values())
    connection_env = {e["name"] for option in CONNECTION_DOC["options"].values() for e in option.get("env", [])}
    for variable in env:
        assert variable == "K8S_AUTH_KUBECONFIG" or variable in connection_env, variable
    role_defaults = "\n".join(p.read_text() for p in REPO.glob("roles/*/defaults/**/*.yml"))
    for variable in extra_vars:
        assert f"{variable} |" in role_defaults, f"no role reads {variable}"
    secret = {f["id"] for f in ctype["inputs"]["fields"] if f.get("secret")}
    assert secret & {"kubeconfig", "client_key", "ca_key"}  # the private parts are masked in AWX


def test_answers_are_checked_like_awx_checks_them():
    create = next(t for t in TEMPLATES if t["playbook"].endswith("virtualcluster_apply.yml"))
    check_answers(create, {"kubenest_vc_namespace": "t", "kubenest_vc_name": "a", "kubenest_vc_etcd_members": "3"})
    with pytest.raises(AssertionError, match="required"):
        check_answers(create, {"kubenest_vc_namespace": "t"})
    with pytest.raises(AssertionError):
        check_answers(create, {"kubenest_vc_namespace": "t", "kubenest_vc_name": "a", "kubenest_vc_etcd_members": "2"})
    with pytest.raises(AssertionError, match="no survey question"):
        check_answers(create, {"kubenest_vc_namespace": "t", "kubenest_vc_name": "a", "virtualcluster": "x"})


def test_the_configure_playbook_parses():
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run([str(bin_dir / "ansible-playbook"), "--syntax-check", str(REPO / "awx/configure.yml")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: w["name"])
def test_a_workflow_is_a_tree_of_job_templates_that_asks_what_its_steps_read(workflow):
    nodes = {n["identifier"]: n for n in workflow["workflow_nodes"]}
    assert len(nodes) == len(workflow["workflow_nodes"]), "node identifiers are unique"
    parents: dict[str, str] = {}
    for identifier, node in nodes.items():
        assert node["unified_job_template"]["type"] == "job_template"
        job_template(node["unified_job_template"]["name"])  # one of ours
        for kind, children in (node.get("related") or {}).items():
            assert kind in ("success_nodes", "failure_nodes", "always_nodes"), kind
            for child in children:
                assert child["identifier"] in nodes, child
                # AWX refuses a node with two parents (convergence) and cycles
                assert child["identifier"] not in parents, f"{child['identifier']} has two parents"
                parents[child["identifier"]] = identifier
    assert set(nodes) - set(parents), "a root node"
    steps = [job_template(n["unified_job_template"]["name"]) for n in nodes.values()]
    for question in workflow["survey"]:
        asking = [s for s in steps if question["variable"] in {q["variable"] for q in s["survey"]}]
        # AWX gives a step only what its survey asks for: a question no step asks for would be dropped
        assert asking, f"no step of {workflow['name']} reads {question['variable']}"
        for step in asking:
            assert question == next(q for q in step["survey"] if q["variable"] == question["variable"]), (
                f"{question['variable']} is asked differently by {step['name']}")


def test_create_then_add_nodes_creates_the_control_plane_alone_and_promotes_after_it_is_ready():
    answers = {"kubenest_vc_namespace": "tenants", "kubenest_vc_name": "alpha", "kubenest_vc_etcd_members": "3",
               "kubenest_vc_pod_network": "bridge", "kubenest_nodes_names": "kn-w1\nkn-w2", "kubenest_nodes_count": 1,
               "kubenest_nodes_labels": "pool=a"}
    workflow = AwxWorkflow(Path("/nonexistent"), CREATE_THEN_NODES, answers, {})
    assert workflow.order(lambda node: True) == [
        ("control-plane", "kosmos.kubenest create or update a virtual cluster"),
        ("nodes", "kosmos.kubenest promote or return nodes")]
    # no nodes are asked for when the control plane failed
    assert [node for node, _template in workflow.order(lambda node: False)] == ["control-plane"]

    create, nodes = (job_template(name) for _node, name in workflow.order(lambda node: True))
    step = next(n for n in workflow.workflow["workflow_nodes"] if n["identifier"] == "control-plane")
    to_create, to_nodes = passed_to(create, {**step["extra_data"], **answers}), passed_to(nodes, answers)
    asked = {q["variable"] for q in workflow.workflow["survey"]}
    assert not CREATE_NODE_VARIABLES & asked
    # The create step keeps the nodes a virtual cluster that exists holds: no answer of the workflow overrides it.
    assert "kubenest_vc_keep_nodes" not in asked
    assert to_create == {**{k: v for k, v in answers.items() if not k.startswith("kubenest_nodes_")},
                         "kubenest_vc_keep_nodes": "yes"}
    assert to_nodes == {k: v for k, v in answers.items() if k.startswith("kubenest_nodes_")
                        or k in ("kubenest_vc_namespace", "kubenest_vc_name")}
    check_answers(create, to_create)
    check_answers(nodes, to_nodes)


def test_the_node_step_reads_its_own_names_and_the_create_templates_names(tmp_path):
    """The nodes playbook maps kubenest_nodes_* onto the request's kubenest_vc_node* variables; extra vars of the
    create template's names win (extra vars outrank play vars)."""
    bin_dir = Path(sys.executable).parent
    playbook = yaml.safe_load((REPO / "playbooks/virtualcluster_nodes.yml").read_text())[0]
    probe = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
              "vars_files": [str(REPO / "playbooks/vars/virtualcluster_request.yml")], "vars": playbook["vars"],
              "tasks": [{"ansible.builtin.debug": {"msg": "{{ kubenest_request_node_spec | to_json }}"}}]}]
    path = tmp_path / "probe.yml"
    path.write_text(yaml.safe_dump(probe))

    def spec(*extra: str) -> dict:
        proc = subprocess.run([str(bin_dir / "ansible-playbook"), str(path), *extra], capture_output=True,
                              text=True, timeout=120, check=False, env={"ANSIBLE_STDOUT_CALLBACK": "json",
                                                                        "PATH": str(bin_dir)})
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
        return json.loads(json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"])

    assert spec("-e", "kubenest_nodes_names='kn-w1, kn-w2'") == {
        "promoteResources": {"nodes": ["kn-w1", "kn-w2"]}, "promotePolicies": None}
    assert spec("-e", "kubenest_nodes_count=2", "-e", "kubenest_nodes_labels=pool=a")["promotePolicies"] == [
        {"labelSelector": {"matchLabels": {"pool": "a"}}, "nodeCount": 2}]
    assert spec("-e", "kubenest_vc_nodes=kn-w3", "-e", "kubenest_nodes_names=kn-w1")["promoteResources"] == {
        "nodes": ["kn-w3"]}
    assert spec() == {"promoteResources": None, "promotePolicies": None}  # every node returns
    # an answer, marked !unsafe by AWX, stays data through the mapping
    marker = tmp_path / "evaluated"
    answers = tmp_path / "answers.yml"
    answers.write_text(f"kubenest_nodes_names: !unsafe \"{{{{lookup('pipe','touch {marker}')}}}}\"\n")
    # split on commas and spaces like any node list, never evaluated
    assert spec("-e", f"@{answers}")["promoteResources"] == {"nodes": ["{{lookup('pipe'", "'touch", f"{marker}')}}}}"]}
    assert not marker.exists()
