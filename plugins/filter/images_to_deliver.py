# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: images_to_deliver
short_description: The image archives a node still needs, from what its containerd lists
version_added: 1.4.0
description:
  - Each archive C(<name>.oci.tar) of the image directory comes with C(<name>.oci.tar.json) naming its image
    (C(ref)) and manifest digest (C(manifest_digest)), as C(make images) writes them. An archive is needed when
    the node's containerd has no image of that name with that digest, or when the archive has no such
    description (then nothing tells what the node has).
  - Lets a node that already has every image skip copying and hashing hundreds of MiB of archives.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: Archive names, without C(.oci.tar).
    type: list
    elements: str
    required: true
  images_dir:
    description: Directory of the archives on the controller.
    type: str
    required: true
  listing:
    description: Output of C(ctr images ls) on the node (its columns C(REF TYPE DIGEST ...)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Archives to copy and import
  ansible.builtin.set_fact:
    missing: "{{ ['kube-proxy', 'coredns'] | kosmos.kubenest.images_to_deliver(images_dir, ctr_ls.stdout) }}"
"""

RETURN = r"""
_value:
  description: The names of the archives the node needs, in the order given.
  type: list
  elements: str
"""

import json
import os

from ansible.errors import AnsibleFilterError


def present_images(listing):
    """{ref: digest} of a `ctr images ls` listing."""
    found = {}
    for line in str(listing).splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3:
            found[fields[0]] = fields[2]
    return found


def described(images_dir, name):
    path = os.path.join(str(images_dir), "%s.oci.tar.json" % name)
    try:
        with open(path, encoding="utf-8") as handle:
            entry = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise AnsibleFilterError("images_to_deliver: cannot read %s: %s" % (path, exc)) from None
    if not isinstance(entry, dict) or not entry.get("ref") or not entry.get("manifest_digest"):
        return None
    return entry


def images_to_deliver(names, images_dir, listing):
    present = present_images(listing)
    needed = []
    for name in names:
        entry = described(images_dir, name)
        if entry is None or present.get(entry["ref"]) != entry["manifest_digest"]:
            needed.append(name)
    return needed


class FilterModule:
    def filters(self):
        return {"images_to_deliver": images_to_deliver}
