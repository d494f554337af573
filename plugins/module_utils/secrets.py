# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Secrets that hold generated credentials, over the collection's API client: written only when their content
differs, and replaced with compare-and-swap on the resourceVersion that was read."""

from __future__ import annotations

import copy

# Left by client-side apply in earlier versions: a second copy of the data, dropped on the next write.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def read_secret(api, namespace, name):
    """The Secret as a dict, or None when there is none."""
    return api.get("v1", "Secret", name, namespace)


def put_secret(api, current, namespace, name, data, labels, owner_references, check_mode=False, annotations=None):
    """Make the Secret hold exactly `data` (base64 values), `labels` and `owner_references`, and the
    `annotations` given (others it has are kept); True if it changed.

    A concurrent writer makes the replace fail (HTTP 409) instead of being overwritten unseen."""
    wanted = dict(annotations or {})
    if current is None:
        if not check_mode:
            metadata = {"name": name, "namespace": namespace}
            if labels:
                metadata["labels"] = labels
            if wanted:
                metadata["annotations"] = wanted
            if owner_references:
                metadata["ownerReferences"] = owner_references
            api.create({"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque", "data": data})
        return True
    meta = current.get("metadata") or {}
    annotations = dict(meta.get("annotations") or {})
    if ((current.get("data") or {}) == data and (meta.get("labels") or {}) == labels
            and (meta.get("ownerReferences") or []) == owner_references and LAST_APPLIED not in annotations
            and all(annotations.get(k) == v for k, v in wanted.items())):
        return False
    annotations.update(wanted)
    if not check_mode:
        replaced = copy.deepcopy(current)
        annotations.pop(LAST_APPLIED, None)
        replaced["metadata"].pop("managedFields", None)
        for key, value in (("annotations", annotations), ("labels", labels), ("ownerReferences", owner_references)):
            if value:
                replaced["metadata"][key] = value
            else:
                replaced["metadata"].pop(key, None)
        replaced["data"] = data
        api.request("PUT", api.path("v1", "Secret", namespace, name), body=replaced)
    return True
