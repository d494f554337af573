# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: token_kubeconfig
short_description: A kubeconfig that authenticates with a bearer token, as text
version_added: 1.4.0
description:
  - The kubeconfig document, as YAML text, for one cluster (its server and CA embedded) and one user holding a
    bearer token, such as a bootstrap token.
  - Built on the controller, so that it is written to a node in the same module run as the node's other files
    (M(kosmos.kubenest.node_files)), whose contents never show in results.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The API server's URL; it must be C(https://).
    type: str
    required: true
  ca_pem:
    description: The cluster's CA certificate, PEM.
    type: str
    required: true
  token:
    description: The bearer token.
    type: str
    required: true
  cluster_name:
    description: Name of the cluster entry.
    type: str
    default: kubernetes
  user_name:
    description: Name of the user entry.
    type: str
    default: bootstrap
"""

EXAMPLES = r"""
- name: Kubelet files, the bootstrap kubeconfig among them
  kosmos.kubenest.node_files:
    files:
      - path: /etc/kubernetes/bootstrap-kubelet.conf
        mode: "0600"
        content: >-
          {{ 'https://198.18.0.11:31443' | kosmos.kubenest.token_kubeconfig(ca_pem, token, 'vc1', 'kubelet') }}
"""

RETURN = r"""
_value:
  description: The kubeconfig, YAML.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils import kubeconfig as kc


def token_kubeconfig(server, ca_pem, token, cluster_name="kubernetes", user_name="bootstrap"):
    server, token = str(server), str(token)
    if not server.startswith("https://"):
        raise AnsibleFilterError("token_kubeconfig: server %r must be an https:// URL" % server)
    if "BEGIN CERTIFICATE" not in str(ca_pem):
        raise AnsibleFilterError("token_kubeconfig: ca_pem is not a PEM certificate")
    if not token or any(c.isspace() for c in token):
        raise AnsibleFilterError("token_kubeconfig: the token is empty or holds white space")
    config = kc.token_kubeconfig(server, str(ca_pem).encode("ascii"), token, cluster_name=str(cluster_name),
                                 user_name=str(user_name))
    return kc.dump_kubeconfig(config)


class FilterModule:
    def filters(self):
        return {"token_kubeconfig": token_kubeconfig}
