"""Which image archives a node still needs, from its containerd listing and the archives' descriptions."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.images_to_deliver import images_to_deliver

LISTING = """REF TYPE DIGEST SIZE PLATFORMS LABELS
kubenest.local/coredns:1.15.0     application/vnd.oci.image.manifest.v1+json sha256:aaa 15.7 MiB linux/amd64 -
kubenest.local/kube-proxy:v1.36.3 application/vnd.oci.image.manifest.v1+json sha256:bbb 21.3 MiB linux/amd64 -
"""


def describe(tmp_path, name, ref, digest):
    (tmp_path / f"{name}.oci.tar.json").write_text(json.dumps({"ref": ref, "manifest_digest": digest}))


def test_only_archives_whose_image_is_missing_or_different_are_needed(tmp_path):
    describe(tmp_path, "coredns", "kubenest.local/coredns:1.15.0", "sha256:aaa")
    describe(tmp_path, "kube-proxy", "kubenest.local/kube-proxy:v1.36.3", "sha256:new")  # rebuilt, same tag
    describe(tmp_path, "cilium", "kubenest.local/cilium:v1.20.2", "sha256:ccc")  # not on the node
    assert images_to_deliver(["coredns", "kube-proxy", "cilium"], tmp_path, LISTING) == ["kube-proxy", "cilium"]


def test_an_archive_without_a_description_is_always_needed(tmp_path):
    (tmp_path / "odd.oci.tar.json").write_text(json.dumps({"ref": "kubenest.local/odd:1"}))
    assert images_to_deliver(["coredns", "odd"], tmp_path, LISTING) == ["coredns", "odd"]


def test_an_empty_node_needs_everything(tmp_path):
    describe(tmp_path, "coredns", "kubenest.local/coredns:1.15.0", "sha256:aaa")
    assert images_to_deliver(["coredns"], tmp_path, "REF TYPE DIGEST SIZE PLATFORMS LABELS\n") == ["coredns"]


def test_an_unreadable_description_is_named(tmp_path):
    (tmp_path / "bad.oci.tar.json").write_text("{not json")
    with pytest.raises(AnsibleFilterError, match="cannot read .*bad.oci.tar.json"):
        images_to_deliver(["bad"], tmp_path, LISTING)
