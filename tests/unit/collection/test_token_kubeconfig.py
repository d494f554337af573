"""The bootstrap kubeconfig a joining kubelet gets, built on the controller as text."""

from __future__ import annotations

import base64

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.token_kubeconfig import token_kubeconfig
from kubernetes import config as k8s_config

CA = "-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n"
TOKEN = "abcdef.0123456789abcdef"


def test_one_cluster_one_token_user_one_context(tmp_path):
    text = token_kubeconfig("https://198.18.0.11:31443", CA, TOKEN, "vc1", "kubelet-bootstrap")
    doc = yaml.safe_load(text)
    [cluster], [user], [context] = doc["clusters"], doc["users"], doc["contexts"]
    assert cluster == {"name": "vc1", "cluster": {
        "server": "https://198.18.0.11:31443", "certificate-authority-data": base64.b64encode(CA.encode()).decode()}}
    assert user == {"name": "kubelet-bootstrap", "user": {"token": TOKEN}}
    assert doc["current-context"] == context["name"]
    assert context["context"] == {"cluster": "vc1", "user": "kubelet-bootstrap"}
    # A Kubernetes client reads it as it is.
    path = tmp_path / "bootstrap-kubelet.conf"
    path.write_text(text)
    loader = k8s_config.kube_config.KubeConfigLoader(config_dict=yaml.safe_load(path.read_text()))
    assert loader.current_context["context"]["user"] == "kubelet-bootstrap"


@pytest.mark.parametrize(("server", "ca", "token", "message"), [
    ("http://198.18.0.11:31443", CA, TOKEN, "must be an https:// URL"),
    ("https://198.18.0.11:31443", "not a certificate", TOKEN, "ca_pem is not a PEM certificate"),
    ("https://198.18.0.11:31443", CA, "", "the token is empty"),
    ("https://198.18.0.11:31443", CA, "abc def", "holds white space"),
])
def test_bad_input_is_refused_with_what_is_wrong(server, ca, token, message):
    with pytest.raises(AnsibleFilterError, match=message):
        token_kubeconfig(server, ca, token)
