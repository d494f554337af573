"""A virtual cluster that goes away is not kept by a node whose agent does not answer: the real virtualcluster
playbook on a real API server, the node's agent address refusing connections (as when its tenant stopped it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes

from kubenest_operator.extravars import dump_unsafe
from tests.support.agentproc import AgentProcess, free_port
from tests.support.globalnodes import GROUP, PLURAL, VERSION, put_globalnode

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
NODE, OWNER = "gm-unreachable", "gone-ns/vc1"


def test_deleting_a_virtual_cluster_holds_a_node_whose_agent_does_not_answer_and_finishes(
        api_client, kosmos_crds, apiserver, tmp_path):
    api = kubernetes.client.CustomObjectsApi(api_client)
    put_globalnode(api, NODE, {"nodeIP": "127.0.0.1", "labels": {}}, {"state": "occupied", "virtualCluster": OWNER})
    files = AgentProcess.with_fresh_pki(tmp_path / "node").client_files  # credentials, and no agent listening
    extravars = tmp_path / "vc.yml"
    extravars.write_text(dump_unsafe({
        "kubenest_host_kubeconfig": str(apiserver.kubeconfig), "kubenest_return_reach_timeout": 3,
        "kubenest_agent_ca_file": files["ca_file"], "kubenest_agent_cert_file": files["cert_file"],
        "kubenest_agent_key_file": files["key_file"], "kubenest_agent_port": free_port(),
        "virtualcluster": {"namespace": "gone-ns", "name": "vc1", "uid": "", "state": "absent", "spec": {}},
    }))
    proc = subprocess.run([ANSIBLE_PLAYBOOK, str(REPO / "playbooks" / "virtualcluster.yml"), "-e", f"@{extravars}"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    status = api.get_cluster_custom_object(GROUP, VERSION, PLURAL, NODE)["status"]
    assert (status["state"], status["virtualCluster"]) == ("held", OWNER)
    claimed = [c for c in status["conditions"] if c["type"] == "Claimed"][0]
    assert claimed["reason"] == "AgentUnreachable"
    assert "did not answer in 3 s while gone-ns/vc1 was deleted" in claimed["message"]
    assert "playbooks/node_clear.yml" in claimed["message"]
    api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, NODE)
