# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: operator_deployment
short_description: The operator's Deployment from deploy/operator with a site's image, volumes and variables
version_added: 1.2.0
description:
  - Returns a copy of the Deployment with the operator container's image replaced, further volumes and mounts
    added (one of the same name is replaced), and the digest of the site variables as a pod annotation, so that
    changed variables roll the replicas.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The Deployment of C(deploy/operator/deployment.yaml).
    type: dict
    required: true
  image:
    description: Image of the operator container; empty keeps the manifest's.
    type: str
    default: ""
  volumes:
    description: Pod volumes to add.
    type: list
    elements: dict
    default: []
  mounts:
    description: Volume mounts to add to the operator container.
    type: list
    elements: dict
    default: []
  site_digest:
    description: Digest of the site variables (annotation C(kosmos.io/site-vars-sha256)).
    type: str
    default: ""
  container:
    description: The container whose image and mounts are set (C(binder) for C(deploy/operator/binder-deployment.yaml)).
    type: str
    default: operator
"""

EXAMPLES = r"""
- name: The operator's Deployment with a mirrored image
  kosmos.kubenest.kube_apply:
    definition: "{{ deployment | kosmos.kubenest.operator_deployment(image=mirrored) }}"
  vars:
    mirrored: registry.example.com/kubenest-operator:1.0.0
"""

RETURN = r"""
_value:
  description: The Deployment.
  type: dict
"""

import copy

from ansible.errors import AnsibleFilterError

CONTAINER = "operator"
SITE_ANNOTATION = "kosmos.io/site-vars-sha256"


def _merged(items, extra, what):
    for entry in extra:
        if not isinstance(entry, dict) or not entry.get("name"):
            raise AnsibleFilterError("operator_deployment: every %s needs a name, got %r" % (what, entry))
    names = set(entry["name"] for entry in extra)
    return [item for item in items if item.get("name") not in names] + [dict(entry) for entry in extra]


def operator_deployment(deployment, image="", volumes=None, mounts=None, site_digest="", container=CONTAINER):
    if not isinstance(deployment, dict) or deployment.get("kind") != "Deployment":
        raise AnsibleFilterError("operator_deployment: expected the operator's Deployment")
    result = copy.deepcopy(deployment)
    pod = result["spec"]["template"]["spec"]
    name = container
    container = next((c for c in pod["containers"] if c.get("name") == name), None)
    if container is None:
        raise AnsibleFilterError("operator_deployment: the Deployment has no container named %s" % name)
    if image:
        container["image"] = image
    if volumes:
        pod["volumes"] = _merged(pod.get("volumes", []), volumes, "volume")
    if mounts:
        container["volumeMounts"] = _merged(container.get("volumeMounts", []), mounts, "mount")
    if site_digest:
        metadata = result["spec"]["template"].setdefault("metadata", {})
        metadata.setdefault("annotations", {})[SITE_ANNOTATION] = site_digest
    return result


class FilterModule:
    def filters(self):
        return {"operator_deployment": operator_deployment}
