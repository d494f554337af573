"""awx/controller.yml against what it points at: playbooks that read every survey answer, injectors that render
from their own inputs into the variables the collection reads, and a configure playbook that parses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from tests.support.awx import MACHINE, check_answers, definitions

REPO = Path(__file__).resolve().parents[3]
DEFS = definitions()
TEMPLATES = DEFS["kubenest_awx_job_templates"]
TYPES = {t["name"]: t for t in DEFS["kubenest_awx_credential_types"]}
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
        "playbooks/remove_agent.yml"}


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
