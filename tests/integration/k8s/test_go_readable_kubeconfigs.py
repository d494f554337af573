"""Kubeconfigs as the collection writes them, read by a real Go client (kubectl at the pinned version, whose
loader the control-plane components share): cluster, user, context and namespace named with words Go's YAML 1.1
would take for booleans, numbers or dates if they were written plain."""

from __future__ import annotations

import subprocess

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import kubeconfig as kc
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

from tests.support import k8sbin


@pytest.mark.parametrize("name", ["n", "off", "yes", "null", "0123", "1e3", "2026-12-01"])
def test_kubectl_reads_the_names_as_written_and_reaches_the_server(apiserver, tmp_path, name):
    config = kc.client_cert_kubeconfig(apiserver.url, pki.certificate_pem(apiserver.ca.cert),
                                       pki.certificate_pem(apiserver.admin.cert),
                                       pki.private_key_pem(apiserver.admin.key),
                                       cluster_name=name, user_name=name, namespace=name)
    path = tmp_path / "kubeconfig"
    path.write_text(kc.dump_kubeconfig(config))
    kubectl = [str(k8sbin.binary("kubectl")), "--kubeconfig", str(path)]
    view = subprocess.run(kubectl + ["config", "view", "-o",
                                     "jsonpath={.clusters[0].name}/{.users[0].name}/{.contexts[0].context.namespace}"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert view.returncode == 0 and view.stdout == f"{name}/{name}/{name}", view.stderr
    ready = subprocess.run(kubectl + ["get", "--raw", "/readyz"], capture_output=True, text=True, timeout=60,
                           check=False)
    assert ready.returncode == 0 and ready.stdout.strip() == "ok", ready.stderr
