# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: virtualcluster_problems
short_description: What is wrong with a virtual cluster request, before anything is changed
version_added: 1.1.0
description:
  - Checks the C(virtualcluster) variable of P(kosmos.kubenest.virtualcluster#playbook) as the CRD's admission
    would (names, image repository, version and its step from the running one, addresses, the control plane's
    replicas and extra flags), so requests that bypass the API server (a plain playbook run, an AWX survey) are
    held to the same rules, and against an optional registry allow-list.
  - Returns one sentence per problem; an empty list means the request may go ahead.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description:
      - The C(virtualcluster) variable (C(namespace), C(name), C(state), C(spec)), and C(kubernetes_version), the
        version the control plane runs (its status), which C(spec.kubernetesVersion) may move one minor up from.
    type: raw
    required: true
  allowed_registries:
    description: Registries (C(host[:port])) images may come from; empty allows any.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Check the request
  ansible.builtin.assert:
    that: virtualcluster | kosmos.kubenest.virtualcluster_problems | length == 0
"""

RETURN = r"""
_value:
  description: The problems found.
  type: list
  elements: str
"""

import re
from collections.abc import Mapping

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.apiserver_config import (
    audit_settings,
    authentication_configuration,
    flag_conflict,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.control_plane_flags import spec_extra_args
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_etcd import check_restore
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import REPLICA_COUNTS
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import (
    DNS_1123_LABEL,
    VIRTUAL_CLUSTER_NAME_MAX,
    InvalidValue,
    check_client_address,
    check_image_repository,
    check_kubernetes_version,
    check_name,
    check_registry_allowed,
)

POD_NETWORKS = ("cilium", "calico", "bridge")
MEMBER_COUNTS = (1, 3)
SERVICE_TYPES = ("NodePort", "LoadBalancer")


def _checks(request, allowed_registries):
    spec = request.get("spec") or {}
    yield lambda: check_name("namespace", request.get("namespace"), pattern=DNS_1123_LABEL)
    yield lambda: check_name("name", request.get("name"), max_length=VIRTUAL_CLUSTER_NAME_MAX)
    if request.get("state", "present") not in ("present", "absent"):
        yield lambda: _fail("state must be present or absent, got %r" % (request.get("state"),))
    if not isinstance(spec, Mapping):
        yield lambda: _fail("spec must be a mapping")
        return
    if "imageRepository" in spec:
        yield lambda: check_registry_allowed(check_image_repository(spec["imageRepository"]), allowed_registries)
    elif allowed_registries:
        yield lambda: check_registry_allowed("kubenest.local", allowed_registries)
    if "kubernetesVersion" in spec:
        yield lambda: check_kubernetes_version(spec["kubernetesVersion"])
        if request.get("kubernetes_version"):
            yield lambda: check_version_step(request["kubernetes_version"], spec["kubernetesVersion"])
    if spec.get("externalIP"):
        yield lambda: check_client_address("externalIP", spec["externalIP"])
    members = spec.get("etcdMembers", 1)
    if isinstance(members, bool) or members not in MEMBER_COUNTS:
        yield lambda: _fail("etcdMembers must be one of %s, got %r" % (", ".join(map(str, MEMBER_COUNTS)), members))
    replicas = spec.get("apiServerReplicas", 1)
    if isinstance(replicas, bool) or replicas not in REPLICA_COUNTS:
        yield lambda: _fail("apiServerReplicas must be one of %s, got %r"
                            % (", ".join(map(str, REPLICA_COUNTS)), replicas))
    if spec.get("podNetwork", "cilium") not in POD_NETWORKS:
        yield lambda: _fail("podNetwork must be one of %s, got %r" % (", ".join(POD_NETWORKS), spec.get("podNetwork")))
    if spec.get("apiServerServiceType", "NodePort") not in SERVICE_TYPES:
        yield lambda: _fail("apiServerServiceType must be one of %s, got %r"
                            % (", ".join(SERVICE_TYPES), spec.get("apiServerServiceType")))
    if spec.get("controlPlane"):
        yield lambda: _check_control_plane(spec["controlPlane"])
    if request.get("etcd_restore"):
        yield lambda: _check_restore(request["etcd_restore"])


def check_version_step(running, wanted):
    """One minor up at a time from the version that runs, never an older minor (the version-skew policy that
    etcd's data and the nodes' kubelets need); patch releases within a minor go either way. The CRD refuses the
    same at admission; this says it to a run from a playbook, where nothing admits."""
    def minor(version):
        match = re.match(r"^v1\.([0-9]{1,3})\.[0-9]{1,3}$", str(version))
        if not match:
            _fail("kubernetes version %r is not v1.<minor>.<patch>" % (version,))
        return int(match.group(1))

    if minor(wanted) - minor(running) not in (0, 1):
        _fail("kubernetesVersion %s after %s (running): a virtual cluster moves one minor version up at a time and "
              "never to an older minor" % (wanted, running))


def _check_control_plane(control_plane):
    problems = []
    try:
        extra_args = spec_extra_args(control_plane)
    except ValueError as exc:
        problems.append(str(exc))
        extra_args = {}
    api_server = (control_plane.get("apiServer") if isinstance(control_plane, Mapping) else None) or {}
    if isinstance(api_server, Mapping):
        checked = {}
        for key, check in (("authentication", authentication_configuration), ("audit", audit_settings)):
            try:
                checked[key] = check(api_server.get(key))
            except ValueError as exc:
                problems += ["controlPlane.apiServer." + problem for problem in str(exc).split("; ")]
        conflict = flag_conflict(checked.get("authentication"), extra_args.get("apiserver"))
        if conflict:
            problems.append("controlPlane.apiServer: %s" % conflict)
    if problems:
        raise InvalidValue("; ".join(problems))


def _check_restore(restore):
    try:
        check_restore(restore)
    except ValueError as exc:
        raise InvalidValue("etcd_restore: %s" % exc) from None


def _fail(message):
    raise InvalidValue(message)


def virtualcluster_problems(request, allowed_registries=None):
    if not isinstance(request, Mapping):
        return ["virtualcluster must be a mapping with namespace, name, state and spec"]
    problems = []
    for check in _checks(request, list(allowed_registries or [])):
        try:
            check()
        except InvalidValue as exc:
            problems.append(str(exc))
    return problems


class FilterModule:
    def filters(self):
        return {"virtualcluster_problems": virtualcluster_problems}
