#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_backup
short_description: Back up a virtual cluster's etcd and PKI into a file
version_added: 1.1.0
description:
  - Streams a point-in-time snapshot out of a ready member of the VirtualCluster O(namespace)/O(name) (through
    the host API's exec into the member's pod; nothing listens for it on the network) and writes it to O(dest)
    with the virtual cluster's spec and its PKI Secrets (C(<name>-pki), C(<name>-etcd-pki)).
  - The file holds the tenant's CAs and, inside the snapshot, every tenant Secret. It is written with mode 0600
    (atomically; a failed backup leaves no partial file), and encrypted with AES-256-GCM under a key derived
    from O(passphrase) (scrypt) when one is given. Keep it where only its owner can read it.
  - M(kosmos.kubenest.etcd_restore) brings it back as a new VirtualCluster.
  - Nothing of the snapshot or the Secrets appears in the result.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  name:
    description: Name of the VirtualCluster.
    type: str
    required: true
  namespace:
    description: Namespace of the VirtualCluster (its control plane's host namespace).
    type: str
    required: true
  dest:
    description: File to write; its directory must exist.
    type: path
    required: true
  passphrase:
    description: Encrypts the file when given. It is needed again to restore.
    type: str
  force:
    description: Replace O(dest) when it exists; otherwise an existing file is an error and is left alone.
    type: bool
    default: false
  timeout:
    description: Seconds the snapshot may take.
    type: int
    default: 600
attributes:
  check_mode:
    support: full
    description: Takes the snapshot and checks it, but writes no file.
  diff_mode:
    support: none
    description: Backups are not shown.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
requirements:
  - kubernetes (Python library)
  - cryptography (Python library), for O(passphrase)
"""

EXAMPLES = r"""
- name: Back up the virtual cluster alpha, encrypted
  kosmos.kubenest.etcd_backup:
    name: alpha
    namespace: tenants
    dest: /srv/backups/alpha.kbk
    passphrase: "{{ vault_backup_passphrase }}"
"""

RETURN = r"""
dest:
  description: The file written (or, in check mode, that would be written).
  returned: always
  type: str
size:
  description: Size of the etcd snapshot in bytes.
  returned: always
  type: int
sha256:
  description: SHA-256 of the etcd snapshot.
  returned: always
  type: str
encrypted:
  description: Whether the file is encrypted.
  returned: always
  type: bool
member:
  description: The etcd pod the snapshot was taken from.
  returned: always
  type: str
"""

import base64
import datetime
import hashlib
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils.etcd_backup_file import (
    HAS_CRYPTOGRAPHY,
    KIND,
    VC_GROUP,
    VC_VERSION,
    BackupFileError,
    seal,
    snapshot_is_whole,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.files import write_atomic
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import (
    KUBECONFIG_ARGS,
    ConfigError,
    KubeApiError,
    connect,
    exec_in_pod,
)

PKI = "/etc/etcd/pki"
SAVE = ["/usr/local/bin/etcd-snapshot", "save", "--cacert=%s/ca.crt" % PKI, "--cert=%s/server.crt" % PKI,
        "--key=%s/server.key" % PKI]
# The operator writes it back; a restore gets its own.
NOT_BACKED_UP_SPEC = ("kubeconfig",)


class BackupError(Exception):
    pass


def ready_member(api, namespace, name):
    """A running etcd pod of the virtual cluster whose containers are ready, member 0 first."""
    pods = api.list("v1", "Pod", namespace,
                    label_selector="kosmos.io/virtualcluster=%s,app.kubernetes.io/component=etcd" % name)
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        status = pod.get("status") or {}
        statuses = status.get("containerStatuses") or []
        if status.get("phase") == "Running" and statuses and all(s.get("ready") for s in statuses):
            return pod["metadata"]["name"]
    raise BackupError("VirtualCluster %s/%s has no ready etcd member to take a snapshot from (%d pod(s))"
                      % (namespace, name, len(pods)))


def stream_snapshot(api, namespace, pod, timeout):
    ran = exec_in_pod(api, namespace, pod, "etcd", SAVE, timeout)
    message = ran.stderr.decode("utf-8", "replace").strip()[-500:] or ran.message
    if ran.code != 0:
        raise BackupError("the snapshot in %s/%s failed (exit %s): %s" % (namespace, pod, ran.code, message))
    try:
        snapshot = base64.b64decode(ran.stdout, validate=False)
    except ValueError:
        raise BackupError("the snapshot stream from %s/%s is not base64" % (namespace, pod)) from None
    if not snapshot_is_whole(snapshot):
        raise BackupError("the snapshot from %s/%s is incomplete (%d bytes; %s)"
                          % (namespace, pod, len(snapshot), message))
    return snapshot, message


def secret_data(api, namespace, name):
    secret = api.get("v1", "Secret", name, namespace)
    if secret is None:
        raise BackupError("Secret %s/%s is missing: the virtual cluster's PKI cannot be backed up" % (namespace, name))
    return dict(secret.get("data") or {})


def backup(module, p):
    if os.path.exists(p["dest"]) and not p["force"]:
        raise BackupError("%s exists; choose another file or set force" % p["dest"])
    if not os.path.isdir(os.path.dirname(os.path.abspath(p["dest"]))):
        raise BackupError("the directory of %s does not exist" % p["dest"])
    api = connect(p["kubeconfig"], p["context"], p["request_timeout"])
    try:
        return _backup(module, api, p)
    finally:
        api.close()


def _backup(module, api, p):
    vc = api.get("%s/%s" % (VC_GROUP, VC_VERSION), "VirtualCluster", p["name"], p["namespace"])
    if vc is None:
        raise BackupError("VirtualCluster %s/%s not found" % (p["namespace"], p["name"]))
    member = ready_member(api, p["namespace"], p["name"])
    snapshot, note = stream_snapshot(api, p["namespace"], member, p["timeout"])
    digest = hashlib.sha256(snapshot).hexdigest()
    spec = dict((k, v) for k, v in (vc.get("spec") or {}).items() if k not in NOT_BACKED_UP_SPEC)
    document = {
        "kind": KIND,
        "createdAt": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "virtualCluster": {"name": p["name"], "namespace": p["namespace"], "uid": vc["metadata"].get("uid"),
                           "spec": spec,
                           "kubernetesVersion": (vc.get("status") or {}).get("kubernetesVersion")},
        "secrets": {"pki": secret_data(api, p["namespace"], "%s-pki" % p["name"]),
                    "etcd-pki": secret_data(api, p["namespace"], "%s-etcd-pki" % p["name"])},
        "etcd": {"member": member, "note": note, "sha256": digest,
                 "snapshot": base64.b64encode(snapshot).decode()},
    }
    data = seal(document, p["passphrase"])
    if not module.check_mode:
        write_atomic(p["dest"], data, 0o600)
    return dict(changed=True, dest=p["dest"], size=len(snapshot), sha256=digest,
                encrypted=bool(p["passphrase"]), member=member)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            passphrase=dict(type="str", no_log=True),
            force=dict(type="bool", default=False),
            timeout=dict(type="int", default=600),
        ),
        supports_check_mode=True,
    )
    if module.params["passphrase"] and not HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"))
    try:
        result = backup(module, module.params)
    except (BackupError, BackupFileError, ConfigError) as exc:
        module.fail_json(msg=str(exc))
    except KubeApiError as exc:
        module.fail_json(msg="backup of VirtualCluster %s/%s: API call failed: %s"
                         % (module.params["namespace"], module.params["name"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
