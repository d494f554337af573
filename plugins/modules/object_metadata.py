#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: object_metadata
short_description: List the metadata of several kinds of objects in a namespace, in one run
version_added: 1.2.0
description:
  - For each entry of O(queries), lists the objects of that kind in O(namespace) (optionally by label selector
    and by name) and returns only their metadata, which the API server sends as
    C(PartialObjectMetadataList), so that the content of Secrets never leaves the API server.
  - The result has the shape of a registered M(kubernetes.core.k8s_info) loop (C(results), each with C(item)
    and C(resources)), so that filters written for such loops read it unchanged, e.g.
    P(kosmos.kubenest.ownership#filter).
  - Read-only; one module run instead of one per kind.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  namespace:
    description: Namespace to list in.
    type: str
    required: true
  queries:
    description: What to list; each entry comes back as the C(item) of its result.
    type: list
    elements: dict
    required: true
    suboptions:
      api_version:
        description: C(group/version), or C(v1) for the core group.
        type: str
        required: true
      kind:
        description: Kind, as in the objects' C(kind).
        type: str
        required: true
      names:
        description: Only objects with one of these names (all when absent).
        type: list
        elements: str
      label_selector:
        description: Label selector, as C(kubectl -l) takes it.
        type: str
attributes:
  check_mode:
    support: full
    description: Only reads.
  diff_mode:
    support: none
    description: Only reads.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
"""

EXAMPLES = r"""
- name: Objects a virtual cluster would write
  kosmos.kubenest.object_metadata:
    namespace: tenants
    queries:
      - {api_version: v1, kind: Secret, names: [vc1-pki, vc1-etcd-pki]}
      - {api_version: apps/v1, kind: Deployment, label_selector: "kosmos.io/virtualcluster=vc1"}
  register: listed

- name: Say which are someone else's
  ansible.builtin.debug:
    msg: "{{ (listed.results | kosmos.kubenest.ownership({'name': 'vc1', 'uid': vc_uid})).foreign }}"
"""

RETURN = r"""
results:
  description: One entry per query, in order.
  returned: always
  type: list
  elements: dict
  contains:
    item:
      description: The query.
      type: dict
    resources:
      description: The objects found, each C({apiVersion, kind, metadata}).
      type: list
      elements: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_client import (
    HAS_KUBERNETES,
    KUBECONFIG_ARGS,
    KUBERNETES_IMPORT_ERROR,
    ApiException,
    KubeClientError,
    api_client,
    describe,
)

# The server strips every object down to its metadata.
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
TIMEOUT = 30


def list_metadata(dynamic, namespace, query):
    resource = dynamic.resources.get(api_version=query["api_version"], kind=query["kind"])
    kwargs = dict(namespace=namespace, header_params={"Accept": METADATA_ONLY}, _request_timeout=TIMEOUT)
    if query.get("label_selector"):
        kwargs["label_selector"] = query["label_selector"]
    listing = dynamic.get(resource, **kwargs).to_dict()
    names = query.get("names")
    return [dict(apiVersion=query["api_version"], kind=query["kind"], metadata=item.get("metadata") or {})
            for item in listing.get("items") or []
            if names is None or (item.get("metadata") or {}).get("name") in names]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            namespace=dict(type="str", required=True),
            queries=dict(type="list", elements="dict", required=True, options=dict(
                api_version=dict(type="str", required=True),
                kind=dict(type="str", required=True),
                names=dict(type="list", elements="str"),
                label_selector=dict(type="str"),
            )),
        ),
        supports_check_mode=True,
    )
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    p = module.params
    query = None
    try:
        from kubernetes.dynamic import DynamicClient
        from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError

        dynamic = DynamicClient(api_client(p["kubeconfig"], p["context"]))
        results = []
        for query in p["queries"]:
            results.append(dict(item=query, resources=list_metadata(dynamic, p["namespace"], query)))
    except KubeClientError as exc:
        module.fail_json(msg=str(exc))
    except ResourceNotFoundError:
        module.fail_json(msg="queries: the API server has no kind %s in %s" % (query["kind"], query["api_version"]))
    except ApiException as exc:
        module.fail_json(msg="listing %s in %s failed: %s" % (query["kind"], p["namespace"], describe(exc)))
    except DynamicApiError as exc:
        failed = (query["kind"], p["namespace"], exc.status, exc.reason)
        module.fail_json(msg="listing %s in %s failed: HTTP %s %s" % failed)
    module.exit_json(changed=False, results=results)


if __name__ == "__main__":
    main()
