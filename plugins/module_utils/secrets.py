# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Secrets that hold generated credentials: read them, and write them only when their content differs."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_client import ApiException

# Left by client-side apply in earlier versions: a second copy of the data, dropped on the next write.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
TIMEOUT = 30


def read_secret(core, namespace, name):
    """The V1Secret, or None when there is none."""
    try:
        return core.read_namespaced_secret(name, namespace, _request_timeout=TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def put_secret(k8s, core, current, namespace, name, data, labels, owner_references, check_mode=False):
    """Make the Secret hold exactly `data` (base64 values), `labels` and `owner_references`; True if it changed.

    `current` is what read_secret() returned. An update replaces with the resourceVersion that was read, so a
    concurrent writer makes it fail instead of being overwritten unseen.
    """
    if current is None:
        if not check_mode:
            core.create_namespaced_secret(namespace, k8s.V1Secret(
                metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels=labels or None,
                                          owner_references=owner_references or None),
                type="Opaque", data=data), _request_timeout=TIMEOUT)
        return True
    annotations = dict(current.metadata.annotations or {})
    owners = [k8s.ApiClient().sanitize_for_serialization(o) for o in current.metadata.owner_references or []]
    if ((current.data or {}) == data and (current.metadata.labels or {}) == labels
            and owners == owner_references and LAST_APPLIED not in annotations):
        return False
    if not check_mode:
        annotations.pop(LAST_APPLIED, None)
        current.metadata.annotations = annotations or None
        current.metadata.labels = labels or None
        current.metadata.owner_references = owner_references or None
        current.data = data
        core.replace_namespaced_secret(name, namespace, current, _request_timeout=TIMEOUT)
    return True
