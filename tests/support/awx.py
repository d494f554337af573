"""AWX's way of running a job template, without AWX: the same private data dir and the same three processes.

AWX renders a credential type's injectors with Jinja2 in a sandbox (files into the job's private data dir, their
paths into `tower.filename.<name>`), runs the inventory source with the credential's environment and hands the job a
script that prints the result, writes survey answers to env/extravars marked !unsafe, and runs
`ansible-runner transmit | ansible-runner worker | ansible-runner process` (the worker in the execution environment).
This does the same on this machine, from the definitions in awx/controller.yml.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from sandbox.machines.config import REPO_ROOT

VENV_BIN = Path(sys.executable).parent
PROJECT_DIRS = ("playbooks", "awx")  # what the AWX project (this repository) contributes to a job


class _Unsafe(str):
    pass


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!unsafe", lambda loader, node: _Unsafe(loader.construct_scalar(node)))


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Unsafe, lambda dumper, value: dumper.represent_scalar("!unsafe", str(value)))


def definitions() -> dict:
    # a SafeLoader that also reads the !unsafe tag
    return yaml.load((REPO_ROOT / "awx/controller.yml").read_text(), Loader=_Loader)


def job_template(name: str) -> dict:
    return next(t for t in definitions()["kubenest_awx_job_templates"] if t["name"] == name)


# AWX's own SSH credential type: AWX hands its key to ansible-runner (env/ssh_key, which runner puts into an
# ssh-agent for the job) and its user to ansible-playbook (-u), as this harness does.
MACHINE = "Machine"


def workflow_template(name: str) -> dict:
    return next(t for t in definitions()["kubenest_awx_workflow_job_templates"] if t["name"] == name)


def passed_to(template: dict, variables: dict) -> dict:
    """What AWX hands a job template of a workflow's variables: with its survey enabled and no prompt for extra
    vars (as every template here), only the variables its survey asks for; the others are dropped."""
    assert not template.get("ask_variables_on_launch"), "this stand-in knows surveys, not open extra vars"
    asked = {q["variable"] for q in template["survey"]}
    return {k: v for k, v in variables.items() if k in asked}


def credential_type(name: str) -> dict:
    return next(t for t in definitions()["kubenest_awx_credential_types"] if t["name"] == name)


def check_answers(template: dict, answers: dict) -> None:
    """What AWX's survey checks before it launches: required answers, choices, lengths and ranges."""
    questions = {q["variable"]: q for q in template["survey"]}
    unknown = set(answers) - set(questions)
    assert not unknown, f"{template['name']}: no survey question for {sorted(unknown)}"
    for variable, q in questions.items():
        if variable not in answers:
            assert not q.get("required") or "default" in q, f"{template['name']}: {variable} is required"
            continue
        value = answers[variable]
        if q["type"] == "integer":
            assert isinstance(value, int) and q.get("min", value) <= value <= q.get("max", value), (variable, value)
        else:
            assert isinstance(value, str) and len(value) <= q.get("max", 1024), (variable, value)
        if q["type"] == "multiplechoice":
            assert value in q["choices"], (variable, value)


def _unsafe(value):
    if isinstance(value, str):
        return _Unsafe(value)
    if isinstance(value, dict):
        return {k: _unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unsafe(v) for v in value]
    return value


@dataclass
class JobResult:
    status: str
    rc: int
    stdout: str
    artifacts: Path

    def events(self) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted((self.artifacts / "job_events").glob("*.json"))]


class AwxJob:
    """One launch of a job template: `credentials` maps credential type names to their inputs."""

    def __init__(self, workdir: Path, template_name: str, answers: dict, credentials: dict[str, dict],
                 inventory: dict | None = None):
        """inventory: for a template that asks for its inventory at launch, the one chosen (AWX's --list JSON);
        the others run on the GlobalNodes inventory source."""
        self.template = job_template(template_name)
        check_answers(self.template, answers)
        missing = set(self.template["credential_types"]) - set(credentials)
        assert not missing, f"{template_name} needs credentials of the types {sorted(missing)}"
        assert (inventory is not None) == bool(self.template.get("ask_inventory_on_launch")), (
            f"{template_name}: an inventory is chosen at launch exactly when the template asks for one")
        self.workdir, self.answers, self.credentials, self.inventory = workdir, answers, credentials, inventory
        self.extra_vars: dict[str, str] = {}  # from the credentials' injectors
        self.cmdline: list[str] = []
        self.private = workdir / "private"    # what the controller prepares and transmits
        self.worker_dir = workdir / "worker"  # where the worker (the execution environment) unpacks it
        self.results = workdir / "results"    # what `process` makes of the worker's stream

    def _inject(self) -> dict[str, str]:
        env, jinja = {}, SandboxedEnvironment(undefined=StrictUndefined)
        for type_name in self.template["credential_types"]:
            inputs = self.credentials[type_name]
            if type_name == MACHINE:
                key = self.private / "env" / "ssh_key"
                key.write_text(inputs["ssh_key_data"])
                key.chmod(0o600)
                self.cmdline += ["-u", inputs["username"]]
                continue
            ctype = credential_type(type_name)
            files = {}
            for key, template in ctype["injectors"].get("file", {}).items():
                name = key.split(".", 1)[1]
                relative = Path("env") / f"cred-{re.sub(r'[^a-z0-9]+', '-', type_name.lower())}-{name}"
                path = self.private / relative
                path.write_text(jinja.from_string(template).render(**inputs))
                path.chmod(0o600)
                files[name] = str(self.worker_dir / relative)
            for key, template in ctype["injectors"].get("env", {}).items():
                env[key] = jinja.from_string(template).render(**inputs, tower={"filename": files})
            for key, template in ctype["injectors"].get("extra_vars", {}).items():
                self.extra_vars[key] = jinja.from_string(template).render(**inputs, tower={"filename": files})
        return env

    def _inventory(self, env: dict[str, str]) -> None:
        """The inventory chosen at launch, or the inventory source's update (ansible-inventory with the
        credential's environment), as a script."""
        if self.inventory is not None:
            data = self.inventory
        else:
            source = definitions()["kubenest_awx_inventory_source"]
            proc = subprocess.run([str(VENV_BIN / "ansible-inventory"), "-i", str(REPO_ROOT / source["source_path"]),
                                   "--list"], capture_output=True, text=True, timeout=120, check=False,
                                  env={**os.environ, **self._local(env)})
            assert proc.returncode == 0, proc.stderr
            data = json.loads(proc.stdout)
        script = self.private / "inventory" / "hosts"
        script.parent.mkdir(parents=True)
        script.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                          f"DATA = {json.dumps(data)!r}\n"
                          "print(DATA if '--list' in sys.argv else '{}')\n")
        script.chmod(0o755)

    def _local(self, env: dict[str, str]) -> dict[str, str]:
        # Before transmission the files live in the controller's copy of the private data dir.
        return {k: v.replace(str(self.worker_dir), str(self.private)) for k, v in env.items()}

    def run(self, timeout: float = 1200) -> JobResult:
        (self.private / "env").mkdir(parents=True)
        for name in PROJECT_DIRS:
            shutil.copytree(REPO_ROOT / name, self.private / "project" / name)
        env = self._inject()
        self._inventory(env)
        envvars = {**env, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
                   "KUBENEST_AGENT_CONTROL_DIR": str(self.workdir / "agent-control")}
        (self.private / "env" / "envvars").write_text(yaml.safe_dump(envvars))
        # Survey answers are marked unsafe; the credentials' extra vars are AWX's own rendering, passed as they are.
        extravars = {**_unsafe(self.answers), **self.extra_vars}
        (self.private / "env" / "extravars").write_text(yaml.dump(extravars, Dumper=_Dumper))
        if self.cmdline:
            (self.private / "env" / "cmdline").write_text(" ".join(self.cmdline))
        runner = str(VENV_BIN / "ansible-runner")
        path_env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}
        transmit = subprocess.Popen([runner, "transmit", str(self.private), "-p", self.template["playbook"],
                                     "--ident", "job"], stdout=subprocess.PIPE, env=path_env)
        worker = subprocess.Popen([runner, "worker", "--private-data-dir", str(self.worker_dir)],
                                  stdin=transmit.stdout, stdout=subprocess.PIPE, env=path_env)
        transmit.stdout.close()
        process = subprocess.run([runner, "process", str(self.results), "--ident", "job"], stdin=worker.stdout,
                                 capture_output=True, text=True, timeout=timeout, env=path_env, check=False)
        worker.stdout.close()
        worker.wait(timeout=60)  # exits with the job's status; the artifacts below say what happened
        assert transmit.wait(timeout=60) == 0, process.stderr
        artifacts = self.results / "artifacts" / "job"
        status = (artifacts / "status").read_text().strip() if (artifacts / "status").is_file() else "missing"
        rc = int((artifacts / "rc").read_text()) if (artifacts / "rc").is_file() else -1
        stdout = (artifacts / "stdout").read_text() if (artifacts / "stdout").is_file() else process.stdout
        return JobResult(status, rc, stdout, artifacts)


class AwxWorkflow:
    """One launch of a workflow job template: a stand-in for AWX's workflow engine, used only by the e2e tests.

    What it keeps of AWX (docs/workflow.md and docs/prompting.md of AWX): the workflow's survey is checked like a
    job template's; the root nodes run first and a node's children run after it, the success nodes when its job
    succeeded, the failure nodes when it failed, the always nodes either way; each job gets the node's own extra
    data overridden by the workflow's answers, of which it keeps only what its template's survey asks for
    (`passed_to`). Each job runs the way AWX runs a job (AwxJob). Not kept: approval nodes, artifacts handed on
    by set_stats, convergence, nodes running side by side (these run one at a time, in the order of the tree).
    tests/unit/collection/test_awx_definitions.py shows this order and filtering on the definitions."""

    def __init__(self, workdir: Path, workflow_name: str, answers: dict, credentials: dict[str, dict]):
        self.workflow = workflow_template(workflow_name)
        check_answers(self.workflow, answers)
        self.workdir, self.answers, self.credentials = workdir, answers, credentials
        self.jobs: list[AwxJob] = []

    def order(self, outcome) -> list[tuple[str, str]]:
        """(node, template name) in the order they run, `outcome(node)` giving True where the job succeeds."""
        nodes = {n["identifier"]: n for n in self.workflow["workflow_nodes"]}
        children = {c["identifier"] for n in nodes.values() for kind in ("success_nodes", "failure_nodes",
                                                                         "always_nodes")
                    for c in (n.get("related") or {}).get(kind, [])}
        ran, queue = [], [i for i in nodes if i not in children]
        while queue:
            identifier = queue.pop(0)
            node = nodes[identifier]
            ran.append((identifier, node["unified_job_template"]["name"]))
            related = node.get("related") or {}
            follow = ["success_nodes" if outcome(identifier) else "failure_nodes", "always_nodes"]
            queue += [c["identifier"] for kind in follow for c in related.get(kind, [])]
        return ran

    def run(self, after=None) -> list[tuple[str, JobResult]]:
        """Runs the jobs; `after(node, result)` is called after each one. Returns each node with its job's result."""
        nodes = {n["identifier"]: n for n in self.workflow["workflow_nodes"]}
        results: dict[str, JobResult] = {}

        def launch(identifier: str) -> bool:
            node = nodes[identifier]
            template = job_template(node["unified_job_template"]["name"])
            answers = passed_to(template, {**node.get("extra_data", {}), **self.answers})
            credentials = {k: self.credentials[k] for k in template["credential_types"]}
            job = AwxJob(self.workdir / identifier, template["name"], answers, credentials)
            self.jobs.append(job)
            results[identifier] = job.run()
            if after is not None:
                after(identifier, results[identifier])
            return results[identifier].status == "successful"

        ran = self.order(launch)
        return [(identifier, results[identifier]) for identifier, _template in ran]
