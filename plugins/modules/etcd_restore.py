#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_restore
short_description: Restore a virtual cluster's backup into a new VirtualCluster
version_added: 1.1.0
description:
  - Creates the VirtualCluster O(namespace)/O(name) with the spec kept in the backup O(src) (written by
    M(kosmos.kubenest.etcd_backup)), and hands the operator what it starts from - the backed-up PKI as the new
    cluster's own C(<name>-pki) and C(<name>-etcd-pki) Secrets, and the etcd snapshot in Secrets
    C(<name>-etcd-restore-NNN) - all owned by the new VirtualCluster. Each etcd member then starts from the
    snapshot, and the tenant finds its objects, Secrets and service-account tokens as they were.
  - A restore never takes anything over. The VirtualCluster and each of those Secrets must not exist yet; if
    anything fails after the VirtualCluster was created, it is deleted again (its Secrets go with it).
  - The VirtualCluster carries the annotation C(kubenest.kosmos.io/etcd-restore) - C(pending) while the Secrets
    are written (the operator waits), then the snapshot's digest and chunk count.
  - Waiting until the virtual cluster is Ready is left to the caller (playbook kosmos.kubenest.etcd_restore).
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  src:
    description: The backup file.
    type: path
    required: true
  passphrase:
    description: Passphrase of an encrypted backup.
    type: str
  name:
    description: Name of the new VirtualCluster.
    type: str
    required: true
  namespace:
    description: Namespace of the new VirtualCluster; the backed-up one's when omitted.
    type: str
attributes:
  check_mode:
    support: full
    description: Opens and checks the backup and looks for conflicts; creates nothing.
  diff_mode:
    support: none
    description: Backups are not shown.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
requirements:
  - kubernetes (Python library)
  - cryptography (Python library), for encrypted backups
"""

EXAMPLES = r"""
- name: Bring alpha back as alpha-restored
  kosmos.kubenest.etcd_restore:
    src: /srv/backups/alpha.kbk
    passphrase: "{{ vault_backup_passphrase }}"
    name: alpha-restored
"""

RETURN = r"""
name:
  description: The new VirtualCluster.
  returned: always
  type: str
namespace:
  description: Its namespace.
  returned: always
  type: str
uid:
  description: Its UID (empty in check mode).
  returned: always
  type: str
chunks:
  description: Secrets the etcd snapshot was split into.
  returned: always
  type: int
sha256:
  description: SHA-256 of the etcd snapshot.
  returned: always
  type: str
backed_up_from:
  description: namespace/name of the virtual cluster the backup was taken from.
  returned: always
  type: str
"""

import base64
import copy

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils.etcd_backup_file import (
    CHUNK_BYTES,
    HAS_CRYPTOGRAPHY,
    MAX_CHUNKS,
    RESTORE_ANNOTATION,
    VC_GROUP,
    VC_VERSION,
    BackupFileError,
    restore_chunk_names,
    snapshot_of,
    unseal,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import (
    KUBECONFIG_ARGS,
    ConfigError,
    KubeApiError,
    connect,
)

SECRETS = (("pki", "%s-pki", "control-plane"), ("etcd-pki", "%s-etcd-pki", "etcd"))


class RestoreError(Exception):
    pass


def labels(name, component):
    return {"app.kubernetes.io/managed-by": "kosmos.kubenest", "app.kubernetes.io/part-of": "kosmos.kubenest",
            "kosmos.io/virtualcluster": name, "app.kubernetes.io/component": component}


VC_API_VERSION = "%s/%s" % (VC_GROUP, VC_VERSION)


def conflicts(api, namespace, name, secret_names):
    """What exists already under the names the restore would create."""
    found = []
    if api.get(VC_API_VERSION, "VirtualCluster", name, namespace) is not None:
        found.append("VirtualCluster %s/%s" % (namespace, name))
    found += ["Secret %s/%s" % (namespace, s) for s in secret_names
              if api.get("v1", "Secret", s, namespace) is not None]
    return found


def secret(name, namespace, owner, labels_, data):
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": owner, "labels": labels_}}


def restore(module, p):
    try:
        with open(p["src"], "rb") as fh:
            document = unseal(fh.read(), p["passphrase"])
    except OSError as exc:
        raise RestoreError("cannot read the backup %s: %s" % (p["src"], exc.strerror)) from None
    source = document["virtualCluster"]
    namespace, name = p["namespace"] or source.get("namespace"), p["name"]
    snapshot = snapshot_of(document)
    chunks = [snapshot[i:i + CHUNK_BYTES] for i in range(0, len(snapshot), CHUNK_BYTES)]
    if len(chunks) > MAX_CHUNKS:
        raise RestoreError("the snapshot is %d bytes; a restore carries at most %d"
                           % (len(snapshot), CHUNK_BYTES * MAX_CHUNKS))
    names = restore_chunk_names(name, len(chunks))
    result = dict(changed=True, name=name, namespace=namespace, uid="", chunks=len(chunks),
                  sha256=document["etcd"]["sha256"],
                  backed_up_from="%s/%s" % (source.get("namespace"), source.get("name")))
    api = connect(p["kubeconfig"], p["context"], p["request_timeout"])
    try:
        return _restore(module, api, result, document, chunks, names)
    finally:
        api.close()


def _restore(module, api, result, document, chunks, names):
    source, namespace, name = document["virtualCluster"], result["namespace"], result["name"]
    found = conflicts(api, namespace, name, [pattern % name for _key, pattern, _c in SECRETS] + names)
    if found:
        raise RestoreError("%s already exist; a restore creates a new virtual cluster and takes nothing over"
                           % ", ".join(found))
    if module.check_mode:
        return result
    spec = copy.deepcopy(source["spec"])
    if source.get("kubernetesVersion") and not spec.get("kubernetesVersion"):
        # The snapshot was written by that version's apiserver: start the same one.
        spec["kubernetesVersion"] = source["kubernetesVersion"]
    try:
        vc = api.create({
            "apiVersion": VC_API_VERSION, "kind": "VirtualCluster",
            "metadata": {"name": name, "namespace": namespace, "annotations": {RESTORE_ANNOTATION: "pending"}},
            "spec": spec})
    except KubeApiError as exc:
        if exc.status in (400, 422):  # the API's own words on a spec or name it refuses (no Secret in them)
            raise RestoreError("the VirtualCluster %s/%s is refused: %s"
                               % (namespace, name, exc.server_message or exc)) from None
        raise
    result["uid"] = uid = vc["metadata"]["uid"]
    owner = [{"apiVersion": VC_API_VERSION, "kind": "VirtualCluster", "name": name, "uid": uid, "controller": True,
              "blockOwnerDeletion": True}]
    try:
        for key, pattern, component in SECRETS:
            api.create(secret(pattern % name, namespace, owner, labels(name, component),
                              document["secrets"].get(key) or {}))
        for index, chunk_name in enumerate(names):
            api.create(secret(chunk_name, namespace, owner, labels(name, "etcd"),
                              {"chunk": base64.b64encode(chunks[index]).decode()}))
        api.merge_patch(VC_API_VERSION, "VirtualCluster", name, namespace, {"metadata": {
            "annotations": {RESTORE_ANNOTATION: "%s/%d" % (result["sha256"], len(chunks))}}})
    except BaseException:
        # Nothing half-restored stays behind: the Secrets written so far go with their owner.
        try:
            api.delete(VC_API_VERSION, "VirtualCluster", name, namespace)
        except KubeApiError:
            pass
        raise
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            src=dict(type="path", required=True),
            passphrase=dict(type="str", no_log=True),
            name=dict(type="str", required=True),
            namespace=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    if module.params["passphrase"] and not HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"))
    try:
        result = restore(module, module.params)
    except (RestoreError, BackupFileError, ConfigError) as exc:
        module.fail_json(msg=str(exc))
    except KubeApiError as exc:
        module.fail_json(msg="restore into VirtualCluster %s: API call failed: %s" % (module.params["name"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
