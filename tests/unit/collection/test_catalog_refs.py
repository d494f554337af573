"""The names the image catalog's archives are imported under: what a promoted node keeps of its images."""

from __future__ import annotations

import json

from ansible_collections.kosmos.kubenest.plugins.filter.catalog_refs import catalog_refs


def test_each_described_archive_gives_its_name_once_in_order(tmp_path):
    for name, ref in (("coredns", "kubenest.local/coredns:v1.13.1"), ("kube-proxy", "kubenest.local/kube-proxy:v1"),
                      ("again", "kubenest.local/coredns:v1.13.1")):
        (tmp_path / f"{name}.oci.tar.json").write_text(json.dumps({"ref": ref, "manifest_digest": "sha256:00"}))
    (tmp_path / "broken.oci.tar.json").write_text(json.dumps({"manifest_digest": "sha256:00"}))
    names = ["kube-proxy", "coredns", "again", "missing", "broken"]
    assert catalog_refs(names, str(tmp_path)) == ["kubenest.local/kube-proxy:v1", "kubenest.local/coredns:v1.13.1"]
