"""The AWX job templates (awx/controller.yml) run the way AWX runs them (tests/support/awx.py): transmit, worker,
process, with the survey answers as !unsafe extra vars and the credentials injected by their credential types,
against the sandbox and its operator."""

from __future__ import annotations

import base64
import time
import uuid
from pathlib import Path

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import etcd_backup_file
from kubernetes import client as k8s

from sandbox.machines.config import from_env
from sandbox.machines.pki import client_files
from tests.support import rotation
from tests.support.awx import AwxJob, AwxWorkflow, JobResult, job_template
from tests.support.nodes import assert_back_in_host_clean, globalnode, tenant_api
from tests.support.virtualclusters import (
    delete_all_vcs,
    get_vc,
    own_operator,
    wait_for,
)

NS = "kubenest-e2e-awx"
CREATE = "kosmos.kubenest create or update a virtual cluster"
NODES = "kosmos.kubenest promote or return nodes"
DELETE = "kosmos.kubenest delete a virtual cluster"
BACKUP, CHECK = "kosmos.kubenest back up a virtual cluster", "kosmos.kubenest check the node agents"
RESTORE = "kosmos.kubenest restore a virtual cluster"
CLEAR = "kosmos.kubenest clear held nodes"
CREATE_THEN_NODES = "kosmos.kubenest create a virtual cluster, then add its nodes"


@pytest.fixture(scope="module")
def awx(host_cluster, tmp_path_factory):
    sb, api = host_cluster
    kubeconfig = sb.state_dir / "kubeconfig"
    files = client_files(from_env())
    credentials = {
        "kosmos.kubenest host cluster": {"kubeconfig": kubeconfig.read_text()},
        "kosmos.kubenest node agent client": {"ca_cert": Path(files["ca"]).read_text(),
                                              "client_cert": Path(files["cert"]).read_text(),
                                              "client_key": Path(files["key"]).read_text()}}
    jobs: list[AwxJob] = []

    def launch(template: str, answers: dict) -> JobResult:
        needed = job_template(template)["credential_types"]
        job = AwxJob(tmp_path_factory.mktemp("job"), template, answers, {k: credentials[k] for k in needed})
        jobs.append(job)
        started = time.monotonic()
        result = job.run()
        print(f"\n{template}: {result.status} in {time.monotonic() - started:.0f}s")
        return result

    def launch_workflow(workflow: str, answers: dict, after) -> list[tuple[str, JobResult]]:
        """A workflow through the stand-in for AWX's workflow engine (tests/support/awx.py, AwxWorkflow)."""
        started = time.monotonic()
        run = AwxWorkflow(tmp_path_factory.mktemp("workflow"), workflow, answers, credentials)
        try:
            ran = run.run(after)
        finally:
            jobs.extend(run.jobs)
        print(f"\n{workflow}: {[(node, r.status) for node, r in ran]} in {time.monotonic() - started:.0f}s")
        return ran

    # Returned nodes are held until someone clears them, so the clear template has nodes to give back.
    with own_operator(sb, api, (), tmp_path_factory.mktemp("operator"), "--node-wait-interval", "5",
                      "--resync-interval", "10", site={"node_promote_hold_returned": True}):
        try:
            yield sb, api, launch, jobs, launch_workflow
        finally:
            delete_all_vcs(api, NS, timeout=600)
            _clear_held(api)


def _clear_held(api) -> None:
    """Whatever a failed test left held goes back, so the tests after this module find the pool whole."""
    custom = k8s.CustomObjectsApi(api)
    held = [n["metadata"]["name"] for n in custom.list_cluster_custom_object("kosmos.io", "v1alpha1", "globalnodes")
            ["items"] if (n.get("status") or {}).get("state") == "held"]
    for name in held:
        custom.patch_cluster_custom_object("kosmos.io", "v1alpha1", "globalnodes", name,
                                           {"metadata": {"annotations": {"kubenest.kosmos.io/clear": "asked"}}})
    wait_for(lambda: all(globalnode(api, n)["status"]["state"] != "held" for n in held), 900, f"{held} cleared")


def _field(kubeconfig_b64: str, name: str) -> str:
    """One field of a base64 kubeconfig, read as data."""
    config = yaml.safe_load(base64.b64decode(kubeconfig_b64))
    return config["clusters"][0]["cluster"][name]


def _successful(result: JobResult) -> JobResult:
    assert (result.status, result.rc) == ("successful", 0), result.stdout[-6000:]
    return result


def _tenant_nodes(api, name: str) -> set[str]:
    tenant = tenant_api(api, NS, name)
    return {n.metadata.name for n in k8s.CoreV1Api(tenant).list_node().items
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)}


def test_a_survey_answer_is_data_never_a_template(awx):
    _sb, _api, launch, _jobs, _workflow = awx
    marker = Path(f"/tmp/kn-awx-{uuid.uuid4().hex[:8]}")
    hostile = f"{{{{ lookup('pipe','touch {marker}') }}}}"
    result = launch(CREATE, {"kubenest_vc_namespace": NS, "kubenest_vc_name": hostile})
    assert result.status == "failed"
    assert not marker.exists()
    # refused as the text it is
    assert "must be DNS labels" in result.stdout and f"touch {marker}" in result.stdout, result.stdout[-3000:]


# The whole life cycle through the job templates repeats what the operator's tests show through a VirtualCluster:
# it runs in make test-long, and in make test on its turn (tests/support/rotation.py).
@rotation.turn("awx-life-cycle")
def test_create_promote_return_back_up_check_and_delete_through_the_job_templates(awx, tmp_path):
    sb, api, launch, jobs, launch_workflow = awx
    seen = {}

    def after(node: str, result: JobResult) -> None:
        _successful(result)
        vc = get_vc(api, NS, "portal")
        seen[node] = (vc["spec"].get("promoteResources"), _tenant_nodes(api, "portal"))

    # The workflow: the control plane alone, Ready without nodes, then its node.
    ran = launch_workflow(CREATE_THEN_NODES, {"kubenest_vc_namespace": NS, "kubenest_vc_name": "portal",
                                              "kubenest_vc_pod_network": "bridge", "kubenest_nodes_names": "kn-w1"},
                          after)
    assert [node for node, _result in ran] == ["control-plane", "nodes"]
    assert seen == {"control-plane": (None, set()), "nodes": ({"nodes": ["kn-w1"]}, {"kn-w1"})}
    assert _tenant_nodes(api, "portal") == {"kn-w1"}
    assert globalnode(api, "kn-w1")["status"]["virtualCluster"] == f"{NS}/portal"
    admin_kubeconfig = k8s.CoreV1Api(api).read_namespaced_secret("portal-admin-kubeconfig", NS).data["kubeconfig"]

    _successful(launch(NODES, {"kubenest_vc_namespace": NS, "kubenest_vc_name": "portal",
                               "kubenest_nodes_names": "kn-w2"}))
    assert _tenant_nodes(api, "portal") == {"kn-w2"}
    # Returned, and held until cleared: a node that is not held is refused, and nothing is asked for.
    assert globalnode(api, "kn-w1")["status"]["state"] == "held"
    refused = launch(CLEAR, {"kubenest_clear_names": "kn-w1, kn-w3"})
    assert refused.status == "failed" and "kn-w3 is free, not held" in refused.stdout, refused.stdout[-3000:]
    assert "kubenest.kosmos.io/clear" not in (globalnode(api, "kn-w1")["metadata"].get("annotations") or {})
    assert get_vc(api, NS, "portal")["spec"]["podNetwork"] == "bridge"  # the rest of the spec stayed

    # The workflow again, on the virtual cluster as it is: its node stays in through the create step.
    seen.clear()
    launch_workflow(CREATE_THEN_NODES, {"kubenest_vc_namespace": NS, "kubenest_vc_name": "portal",
                                        "kubenest_vc_pod_network": "bridge", "kubenest_nodes_names": "kn-w2"}, after)
    assert seen == {"control-plane": ({"nodes": ["kn-w2"]}, {"kn-w2"}), "nodes": ({"nodes": ["kn-w2"]}, {"kn-w2"})}

    dest, passphrase = tmp_path / "portal.kbk", "correct horse battery staple"
    _successful(launch(BACKUP, {"kubenest_backup_namespace": NS, "kubenest_backup_name": "portal",
                                "kubenest_backup_dest": str(dest), "kubenest_backup_passphrase": passphrase}))
    assert dest.stat().st_size > 0 and (dest.stat().st_mode & 0o777) == 0o600
    document = etcd_backup_file.unseal(dest.read_bytes(), passphrase)
    assert document["virtualCluster"]["name"] == "portal" and document["etcd"]["snapshot"]

    check = _successful(launch(CHECK, {"kubenest_check_nodes": "globalnodes"}))
    for node in ("kn-w1", "kn-w2", "kn-w3"):
        assert f"{node}: Linux" in check.stdout, check.stdout[-3000:]

    refused = launch(DELETE, {"kubenest_vc_namespace": NS, "kubenest_vc_name": "portal",
                              "kubenest_vc_confirm": "other"})
    assert refused.status == "failed" and get_vc(api, NS, "portal") is not None
    _successful(launch(DELETE, {"kubenest_vc_namespace": NS, "kubenest_vc_name": "portal",
                                "kubenest_vc_confirm": "portal"}))
    assert get_vc(api, NS, "portal") is None
    # The delete returned kn-w2 and left kn-w1, held since it came back, as it was; both go back in one job.
    assert [globalnode(api, n)["status"]["state"] for n in ("kn-w1", "kn-w2")] == ["held", "held"]
    cleared = _successful(launch(CLEAR, {"kubenest_clear_names": "kn-w1,kn-w2"}))
    for node in ("kn-w1", "kn-w2"):
        assert f"{node}: held" in cleared.stdout and f"{node}: free" in cleared.stdout, cleared.stdout[-3000:]
        assert_back_in_host_clean(sb, api, node)

    # The backup comes back as a new virtual cluster with the same CAs: the old admin kubeconfig's CA signs it.
    _successful(launch(RESTORE, {"kubenest_restore_src": str(dest), "kubenest_restore_name": "portal-again",
                                 "kubenest_restore_namespace": NS, "kubenest_restore_passphrase": passphrase}))
    restored = get_vc(api, NS, "portal-again")
    assert next(c for c in restored["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    again = k8s.CoreV1Api(api).read_namespaced_secret("portal-again-admin-kubeconfig", NS).data["kubeconfig"]
    ca = "certificate-authority-data"
    assert _field(again, ca) == _field(admin_kubeconfig, ca)
    _successful(launch(DELETE, {"kubenest_vc_namespace": NS, "kubenest_vc_name": "portal-again",
                                "kubenest_vc_confirm": "portal-again"}))
    held = [n for n in ("kn-w1", "kn-w2", "kn-w3") if globalnode(api, n)["status"]["state"] == "held"]
    if held:  # the restored virtual cluster took the backed-up spec, its node included
        _successful(launch(CLEAR, {"kubenest_clear_names": ",".join(held)}))

    # What AWX keeps of the jobs (events, stdout) holds none of the credentials and secrets they handled.
    host_key = next(line.split(":", 1)[1].strip() for line in (sb.state_dir / "kubeconfig").read_text().splitlines()
                    if "client-key-data" in line)
    secrets = {"host key": host_key, "tenant kubeconfig": admin_kubeconfig, "passphrase": passphrase,
               "agent key": Path(client_files(from_env())["key"]).read_text().splitlines()[1]}
    for job in jobs:
        for directory in (job.results, job.worker_dir / "artifacts"):
            for path in (p for p in directory.rglob("*") if p.is_file()):
                text = path.read_text(errors="replace")
                leaked = [what for what, value in secrets.items() if value in text]
                assert not leaked, f"{path} holds {leaked}"
