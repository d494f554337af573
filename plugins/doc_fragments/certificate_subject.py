# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # What a certificate says about its holder, for the modules that issue one (pki_secrets takes the same
    # fields per entry of its certificates list, where a fragment cannot reach).
    DOCUMENTATION = r"""
options:
  common_name:
    description: Subject CN. Kubernetes reads it as the user name of a client certificate.
    type: str
    required: true
  organizations:
    description: Subject O values. Kubernetes reads them as the groups of a client certificate.
    type: list
    elements: str
    default: []
  dns_names:
    description: DNS subject alternative names.
    type: list
    elements: str
    default: []
  ip_addresses:
    description: IP subject alternative names.
    type: list
    elements: str
    default: []
  usages:
    description: Extended key usages of a leaf certificate.
    type: list
    elements: str
    choices: [server, client]
    default: [client]
"""
