# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: catalog_versions
short_description: Kubernetes versions a local image catalog has control-plane images for
version_added: 1.1.0
description:
  - Reads C(images.json) of an image directory (as C(make images) writes it) on the controller and returns the
    versions of its C(kube-apiserver), C(kube-controller-manager) and C(kube-scheduler) images, when the images are
    asked from the repository the catalog's images are named after.
  - Returns an empty list when the directory is empty or has no catalog, or the repository is another one, since
    then nothing is known about which versions exist.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The image repository the control plane is pulled from.
    type: str
    required: true
  images_dir:
    description: Directory of the image catalog on the controller.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Versions with images
  ansible.builtin.debug:
    msg: "{{ 'kubenest.local' | kosmos.kubenest.catalog_versions(kubenest_images_dir) }}"
"""

RETURN = r"""
_value:
  description: The versions every control-plane image exists for, sorted.
  type: list
  elements: str
"""

import json
import os

from ansible.errors import AnsibleFilterError

COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def catalog_versions(repository, images_dir):
    if not images_dir:
        return []
    path = os.path.join(str(images_dir), "images.json")
    try:
        with open(path) as fh:
            catalog = json.load(fh)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise AnsibleFilterError("image catalog %s cannot be read: %s" % (path, exc)) from None
    versions = None
    for component in COMPONENTS:
        ref = str((catalog.get(component) or {}).get("ref", ""))
        name, _sep, tag = ref.rpartition(":")
        if name != "%s/%s" % (repository, component):
            return []
        versions = {tag} if versions is None else versions & {tag}
    return sorted(versions or ())


class FilterModule:
    def filters(self):
        return {"catalog_versions": catalog_versions}
