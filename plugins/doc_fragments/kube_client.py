# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # Every module that talks to a Kubernetes API, through the collection's one client (module_utils/kube_api,
    # which needs no kubernetes package): the controller-side actions and the modules alike.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Kubeconfig of the cluster to talk to. Default C($K8S_AUTH_KUBECONFIG), C($KUBECONFIG), in-cluster,
        C(~/.kube/config).
      - Its user may authenticate with a client certificate, a token or token file, or an C(exec) credential
        plugin (C(client.authentication.k8s.io/v1) or C(v1beta1), as EKS, GKE, AKS and OIDC logins write them).
        The plugin runs once per task and again when its credential expires or the server refuses it; it runs
        without a terminal, so C(interactiveMode=Always) is refused. C(auth-provider) entries are refused.
      - A cluster's C(proxy-url) is followed for C(http://) proxies, with credentials in the URL sent as basic
        authentication.
    type: path
  context:
    description: Context of O(kubeconfig) to use.
    type: str
  request_timeout:
    description: Seconds one request to the API server may take.
    type: float
    default: 30
"""

    # The modules that approve a kubelet's serving-certificate requests.
    SERVING_CSR = r"""
options:
  node:
    description: Node name.
    type: str
    required: true
  ip_addresses:
    description: Addresses the node's serving certificate may name.
    type: list
    elements: str
    default: []
  dns_names:
    description: DNS names the certificate may name; the node name is always allowed.
    type: list
    elements: str
    default: []
requirements:
  - cryptography >= 3.3
"""
