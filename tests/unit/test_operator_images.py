"""The derived operator images of the upgrade test (tests/support/operator_images.py): the base image's layers
unchanged, one layer on top holding the replaced collection files, and a config that lists it."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

from sandbox.images import build_images as oci
from tests.support import operator_images

DEFAULTS = "roles/control_plane/defaults/main/hosted.yml"


def _base_archive(tmp_path):
    layer_path = tmp_path / "layer"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        oci.add_bytes(tar, f"{operator_images.COLLECTION_IN_IMAGE}/{DEFAULTS}", b"scheduler: 25\n")
        oci.add_bytes(tar, "etc/passwd", b"root:x:0:0::/root:/bin/sh\n")
    layer_path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    layer = oci.Blob("sha256:" + oci.sha256_file(layer_path), layer_path.stat().st_size)
    diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
    config = {"config": {"Labels": {"org.opencontainers.image.version": "1.0.0"}}, "history": [],
              "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
    archive = tmp_path / "base.oci.tar"
    oci.write_layout(archive, "kubenest.local/kubenest-operator:1.0.0", oci.canonical_json(config),
                     [(layer, layer_path)])
    return archive, layer


def _read(archive):
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))
        manifest = json.load(tar.extractfile("blobs/sha256/" + index["manifests"][0]["digest"].split(":")[1]))
        config = json.load(tar.extractfile("blobs/sha256/" + manifest["config"]["digest"].split(":")[1]))
        layers = [tar.extractfile("blobs/sha256/" + d["digest"].split(":")[1]).read() for d in manifest["layers"]]
    return index, manifest, config, layers


def test_a_derived_image_keeps_the_base_layer_and_adds_the_replaced_files_on_top(tmp_path):
    archive, base_layer = _base_archive(tmp_path)
    assert operator_images.collection_file(archive, DEFAULTS) == b"scheduler: 25\n"
    ref = operator_images.derive(archive, tmp_path / "derived.oci.tar", "upgrade-x", {DEFAULTS: b"scheduler: 50\n"})
    assert ref == "kubenest.local/kubenest-operator:upgrade-x"
    index, manifest, config, layers = _read(tmp_path / "derived.oci.tar")
    assert index["manifests"][0]["annotations"][oci.ANNOTATION_CONTAINERD_NAME] == ref
    assert manifest["layers"][0]["digest"] == base_layer.digest
    assert len(config["rootfs"]["diff_ids"]) == 2 and config["config"]["Labels"][
        "org.opencontainers.image.version"] == "upgrade-x"
    top = gzip.decompress(layers[1])
    assert "sha256:" + hashlib.sha256(top).hexdigest() == config["rootfs"]["diff_ids"][1]
    with tarfile.open(fileobj=io.BytesIO(top)) as tar:
        assert tar.getnames() == [f"{operator_images.COLLECTION_IN_IMAGE}/{DEFAULTS}"]
        assert tar.extractfile(tar.getnames()[0]).read() == b"scheduler: 50\n"
