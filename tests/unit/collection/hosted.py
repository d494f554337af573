"""What the unit tests of a hosted control plane's manifests share: the VirtualCluster CRD, a virtual cluster and
the settings its components are built with."""

from __future__ import annotations

from pathlib import Path

CRD = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "kosmos.io_virtualclusters.yaml"
VC = {"name": "vc1", "namespace": "tenants", "labels": {}, "selector": {"kosmos.io/virtualcluster": "vc1"},
      "owner_references": []}
SETTINGS = {"image_repository": "kubenest.local", "version": "v1.36.3", "etcd_endpoint": "https://vc1-etcd:2379",
            "service_cidr": "10.96.0.0/16", "pod_cidr": "10.244.0.0/16"}
