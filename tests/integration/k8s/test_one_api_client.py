"""The collection's one API client (module_utils/kube_api) where the kubernetes SDK used to be: the GlobalNodes
inventory plugin on a real API server, and the API modules on a Python that has no kubernetes package."""

from __future__ import annotations

import json
import os
import subprocess

import kubernetes
import pytest
import yaml

from tests.support.globalnodes import GROUP, PLURAL, VERSION, put_globalnode
from tests.support.playbook import VENV_BIN, run_module
from tests.support.virtualclusters import ensure_namespace

NS = "one-api-client"


def plain(value):
    """ansible-inventory's JSON without its {"__ansible_unsafe": ...} wrappers."""
    if isinstance(value, dict) and set(value) == {"__ansible_unsafe"}:
        return value["__ansible_unsafe"]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return [plain(v) for v in value] if isinstance(value, list) else value


@pytest.fixture
def without_kubernetes(tmp_path):
    """Environment in which `import kubernetes` fails, for the processes Ansible starts (modules, plugins)."""
    shim = tmp_path / "no-sdk"
    shim.mkdir()
    (shim / "kubernetes.py").write_text('raise ImportError("no kubernetes package on this machine")\n')
    return {"PYTHONPATH": os.pathsep.join([str(shim), *filter(None, [os.environ.get("PYTHONPATH")])])}


@pytest.fixture
def globalnodes(api_client, kosmos_crds):
    api = kubernetes.client.CustomObjectsApi(api_client)
    made = []

    def make(name, ip, labels, status):
        put_globalnode(api, name, {"nodeIP": ip, "labels": labels}, status)
        made.append(name)

    yield make
    for name in made:
        api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_the_globalnodes_inventory_groups_nodes_by_state_and_tenant_without_the_sdk(
        apiserver, globalnodes, tmp_path, without_kubernetes):
    globalnodes("inv-free", "198.18.7.1", {"zone": "a"}, {"state": "free"})
    globalnodes("inv-used", "198.18.7.2", {"zone": "b"},
                {"state": "occupied", "virtualCluster": "team-a/dev"})
    source = tmp_path / "host.globalnodes.yml"
    source.write_text(yaml.safe_dump({"plugin": "kosmos.kubenest.globalnodes", "kubeconfig": str(apiserver.kubeconfig),
                                      "keyed_groups": [{"key": "kosmos_globalnode.labels.zone", "prefix": "zone"}]}))
    env = {**os.environ, **without_kubernetes}
    proc = subprocess.run([str(VENV_BIN / "ansible-inventory"), "-i", str(source), "--list"], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    hostvars = listed["_meta"]["hostvars"]
    # Other tests' GlobalNodes may share this API server: these two are looked at.
    assert "inv-free" in listed["globalnodes_free"]["hosts"] and "inv-used" not in listed["globalnodes_free"]["hosts"]
    assert "inv-used" in listed["globalnodes_occupied"]["hosts"]
    assert listed["vc_team_a_dev"]["hosts"] == ["inv-used"] and listed["zone_b"]["hosts"] == ["inv-used"]
    used = plain(hostvars["inv-used"])
    assert used["ansible_connection"] == "kosmos.kubenest.nodeagent" and used["ansible_host"] == "198.18.7.2"
    assert used["kosmos_globalnode"] == {"state": "occupied", "virtualCluster": "team-a/dev", "nodeIP": "198.18.7.2",
                                         "labels": {"zone": "b"}}

    # A kubeconfig it cannot use: a clear error, no inventory.
    source.write_text(yaml.safe_dump({"plugin": "kosmos.kubenest.globalnodes",
                                      "kubeconfig": str(tmp_path / "missing.kubeconfig")}))
    proc = subprocess.run([str(VENV_BIN / "ansible-inventory"), "-i", str(source), "--list"], capture_output=True,
                          text=True, env={**env, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1"}, timeout=120, check=False)
    assert proc.returncode != 0 and "cannot read the kubeconfig" in proc.stderr, proc.stderr


def test_the_api_modules_need_no_kubernetes_package(apiserver, api_client, tmp_path, without_kubernetes):
    ensure_namespace(api_client, NS)
    # The module really runs where the SDK cannot be imported.
    proof = subprocess.run([str(VENV_BIN / "python"), "-c", "import kubernetes"], capture_output=True, text=True,
                           env={**os.environ, **without_kubernetes}, check=False)
    assert proof.returncode != 0 and "no kubernetes package" in proof.stderr
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "tls.crt").write_bytes(b"certificate")
    rc, result, _out = run_module("secret_files", apiserver.kubeconfig, extra_env=without_kubernetes, namespace=NS,
                                  name="no-sdk", directory=str(src), state="stored", files=["tls.crt"])
    assert rc == 0 and result["changed"], result
    rc, result, _out = run_module("secret_files", apiserver.kubeconfig, extra_env=without_kubernetes, namespace=NS,
                                  name="no-sdk", directory=str(dst), state="restored")
    assert rc == 0 and result["keys"] == ["tls.crt"] and (dst / "tls.crt").read_bytes() == b"certificate", result
    rc, result, _out = run_module("kubelet_serving_csr", apiserver.kubeconfig, extra_env=without_kubernetes,
                                  node="no-such-node", require=False)
    assert rc == 0 and result["approved"] == [] and not result["changed"], result
