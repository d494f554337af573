"""What the collection builds for an existing tenant stays what it built before, unless a change means it.

A changed pod template rolls that component of every tenant when a new collection and operator reach the host:
an upgrade is meant to leave tenants alone unless their desired state changed. The hosted manifests of typical
tenants are kept in tenant_manifests.json; a change to them fails here until the file is written again on
purpose (KUBENEST_UPDATE_GOLDEN=1) and the changelog says which tenants roll and why.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest

GOLDEN = Path(__file__).with_name("tenant_manifests.json")
VC = {"name": "vc1", "namespace": "tenants", "labels": {"kosmos.io/virtualcluster": "vc1"},
      "selector": {"kosmos.io/virtualcluster": "vc1"},
      "owner_references": [{"apiVersion": "kosmos.io/v1alpha1", "kind": "VirtualCluster", "name": "vc1",
                            "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]}
SETTINGS = {"image": "kubenest.local/etcd:v3.6.16", "advertise_ip": "10.96.0.20", "image_repository": "kubenest.local",
            "version": "v1.36.3", "etcd_endpoint": "https://10.96.0.20:2379", "service_cidr": "198.18.128.0/17",
            "pod_cidr": "198.18.64.0/18", "node_cidr_mask": 24, "pki_revision": "ab" * 32,
            "node_selector": {"node-role.kubernetes.io/control-plane": ""},
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "konnectivity_image": "kubenest.local/konnectivity-server:v0.34.0"}
# Typical tenants: the default one, three etcd members, two API servers on enough host nodes and on too few.
TENANTS = {
    "default": {},
    "etcd-members-3": {"members": 3, "host_nodes": 3},
    "api-servers-2": {"replicas": 2, "host_nodes": 3},
    "api-servers-2-one-node": {"replicas": 2, "host_nodes": 1},
}
COMPONENTS = ("etcd", "apiserver-config", "apiserver", "controller-manager", "scheduler", "etcd-budget",
              "apiserver-budget", "controller-manager-budget", "scheduler-budget")


def built() -> dict:
    return {tenant: {component: hosted_manifest(component, VC, dict(SETTINGS, **extra)) for component in COMPONENTS}
            for tenant, extra in TENANTS.items()}


def test_existing_tenants_get_the_manifests_they_had():
    now = json.loads(json.dumps(built()))
    if os.environ.get("KUBENEST_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    kept = json.loads(GOLDEN.read_text())
    changed = [f"{tenant}/{component}" for tenant in sorted(set(now) | set(kept))
               for component in sorted(set(now.get(tenant, {})) | set(kept.get(tenant, {})))
               if now.get(tenant, {}).get(component) != kept.get(tenant, {}).get(component)]
    if changed:
        first = changed[0].split("/")
        diff = difflib.unified_diff(
            json.dumps(kept.get(first[0], {}).get(first[1]), indent=1, sort_keys=True).splitlines(),
            json.dumps(now.get(first[0], {}).get(first[1]), indent=1, sort_keys=True).splitlines(),
            "before", "now", lineterm="", n=2)
        pytest.fail(f"the manifests of existing tenants changed ({', '.join(changed)}): every such tenant rolls "
                    "when the release reaches its host. If that is meant, write the file again with "
                    "KUBENEST_UPDATE_GOLDEN=1 and say in a changelog fragment which tenants roll.\n"
                    + "\n".join(list(diff)[:60]))


def test_the_kept_manifests_cover_every_component_and_tenant():
    kept = json.loads(GOLDEN.read_text())
    assert set(kept) == set(TENANTS)
    assert all(set(components) == set(COMPONENTS) for components in kept.values())
