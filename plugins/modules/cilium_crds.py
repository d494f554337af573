#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cilium_crds
short_description: Register Cilium's CRDs in a cluster ahead of its operator
version_added: 1.4.0
description:
  - Cilium's agent waits until Cilium's operator has registered Cilium's CRDs, and the operator only starts once
    a node can run it. On a cluster's first node that costs the agent about as long as the operator takes to
    start and register them one after another. This action registers them before nodes join, as the operator
    would, so the agent finds them at once.
  - Reads the definitions of one Cilium release from O(crds_file) on the controller, labels each with
    C(io.cilium.k8s.crd.schema.version) as the operator does, applies those missing or labelled with another
    version, and waits until they are Established unless O(wait) is off.
  - CRDs already labelled with this version are not sent again; a converge costs one list of CRD metadata.
  - Runs as an action on the controller, so a task costs its requests only.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  crds_file:
    description:
      - JSON file on the controller with the release's CRD schema version (C(schemaVersion)) and its CRDs
        (C(definitions), each a C(CustomResourceDefinition) of group C(cilium.io)).
      - C(make images) writes it for the pinned release as C(cilium-crds.json) in the image catalog, from the
        release's C(pkg/k8s/apis/cilium.io/client/crds) tree and C(CustomResourceDefinitionSchemaVersion).
    type: path
    required: true
  wait:
    description:
      - Wait until the applied CRDs are Established.
      - Off, the task returns once the API server has stored them; Cilium's agent and operator wait for the
        CRDs they use themselves, so a cluster whose nodes join later loses nothing, and the task does not
        stand in the way of the work after it (about 2 s for the release's 22 CRDs on a busy API server).
    type: bool
    default: true
  timeout:
    description: Seconds to wait for the applied CRDs to be Established.
    type: float
    default: 60
attributes:
  check_mode:
    support: full
    description: Applies as a server-side dry run and does not wait.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: Cilium's CRDs, before the first node joins
  kosmos.kubenest.cilium_crds:
    kubeconfig: tenant-admin.conf
    crds_file: /var/lib/kubenest/images/cilium-crds.json

- name: Cilium's CRDs, left for the agents to wait for
  kosmos.kubenest.cilium_crds:
    kubeconfig: tenant-admin.conf
    crds_file: /var/lib/kubenest/images/cilium-crds.json
    wait: false
"""

RETURN = r"""
registered:
  description: Names of the CRDs this call applied.
  returned: success
  type: list
  elements: str
current:
  description: How many of the release's CRDs were registered with its schema version already.
  returned: success
  type: int
"""
