# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: kubelet_skew
short_description: Why a kubelet may not serve API servers of a Kubernetes version, by the version-skew policy
version_added: 1.4.0
description:
  - The upstream version-skew policy allows a kubelet to be older than its API servers by up to three minor
    versions, and never newer. This says, in one phrase, how the kubelet of version O(_input) breaks that policy
    with API servers of version O(apiserver), or nothing when it keeps it.
  - Patch releases do not matter. A version that is not C(v<major>.<minor>.<patch>) (with an optional suffix,
    such as C(-rc.1) or C(+build)) is an error.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The kubelet's version, as a Node's C(status.nodeInfo.kubeletVersion) or C(kubelet --version) gives it.
    type: str
    required: true
  apiserver:
    description: The API servers' version, such as the virtual cluster's C(spec.kubernetesVersion).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse a host kubelet newer than the tenant's API servers
  ansible.builtin.assert:
    that: skew | length == 0
    fail_msg: "{{ skew | join('; ') }}"
  vars:
    skew: "{{ node.status.nodeInfo.kubeletVersion | kosmos.kubenest.kubelet_skew('v1.30.2') }}"
"""

RETURN = r"""
_value:
  description: Empty when the policy holds, else one phrase such as C(kubelet v1.31.0 is newer than the API
    servers' v1.30.2).
  type: list
  elements: str
"""

import re

from ansible.errors import AnsibleFilterError

# A kubelet may trail its API servers by this many minor versions (the upstream version-skew policy).
OLDEST_BEHIND = 3
_VERSION = re.compile(r"^(?:Kubernetes )?v?([0-9]{1,3})\.([0-9]{1,3})\.[0-9]{1,3}(?:[-+][0-9A-Za-z.+-]*)?$")


def _minor(what, version):
    match = _VERSION.match(str(version).strip())
    if not match:
        raise AnsibleFilterError("kubelet_skew: the %s version %r is not v<major>.<minor>.<patch>" % (what, version))
    return int(match.group(1)), int(match.group(2))


def kubelet_skew(kubelet, apiserver):
    kubelet_major, kubelet_minor = _minor("kubelet", kubelet)
    server_major, server_minor = _minor("API server", apiserver)
    shown_kubelet, shown_server = str(kubelet).strip().removeprefix("Kubernetes "), str(apiserver).strip()
    if kubelet_major != server_major:
        return ["kubelet %s and the API servers' %s are of different major versions" % (shown_kubelet, shown_server)]
    if kubelet_minor > server_minor:
        return ["kubelet %s is newer than the API servers' %s" % (shown_kubelet, shown_server)]
    if server_minor - kubelet_minor > OLDEST_BEHIND:
        return ["kubelet %s is more than %d minor versions older than the API servers' %s"
                % (shown_kubelet, OLDEST_BEHIND, shown_server)]
    return []


class FilterModule:
    def filters(self):
        return {"kubelet_skew": kubelet_skew}
