# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_dns_ip
short_description: The cluster DNS address of a service range
version_added: 1.1.0
description:
  - The tenth address of the service range, where the DNS Service of the cluster listens.
  - The one source of that address for the kubelets of both clusters and the C(coredns) role.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The service CIDR.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Point the kubelet at the cluster DNS
  ansible.builtin.set_fact:
    kubelet_cluster_dns: "{{ '10.96.0.0/12' | kosmos.kubenest.cluster_dns_ip }}"  # 10.96.0.10
"""

RETURN = r"""
_value:
  description: The address.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.cluster_dns import dns_service_ip


def cluster_dns_ip(service_cidr):
    try:
        return dns_service_ip(service_cidr)
    except ValueError as exc:
        raise AnsibleFilterError(run_result.permanent("InvalidRequest", str(exc))) from None


class FilterModule:
    def filters(self):
        return {"cluster_dns_ip": cluster_dns_ip}
