"""Operator images derived from the one this checkout builds, for the upgrade test.

A release's image differs from the one before it in the collection it carries (and the operator's code). The
upgrade test needs releases that differ from this checkout's in a way it chooses (prose only, or one
component's desired state): each is this checkout's image with a second layer that replaces files of its
collection, made in seconds instead of the minutes a build from a changed tree takes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from sandbox.images import build_images as oci
from sandbox.images import operator_image

REPO_ROOT = Path(__file__).resolve().parents[2]
COLLECTION_IN_IMAGE = f"{operator_image.COLLECTIONS}/ansible_collections/kosmos/kubenest".lstrip("/")


def _blob_member(digest: str) -> str:
    return "blobs/sha256/" + digest.split(":", 1)[1]


def collection_file(archive: Path, relative: str) -> bytes:
    """A file of the collection in an image archive made by sandbox/images/operator_image.py (its one layer)."""
    with tarfile.open(archive) as outer:
        index = json.load(outer.extractfile("index.json"))
        manifest = json.load(outer.extractfile(_blob_member(index["manifests"][0]["digest"])))
        layer = outer.extractfile(_blob_member(manifest["layers"][0]["digest"]))
        with tarfile.open(fileobj=layer, mode="r|gz") as inner:
            for member in inner:
                if member.name == f"{COLLECTION_IN_IMAGE}/{relative}":
                    return inner.extractfile(member).read()
    raise FileNotFoundError(f"{relative} is not in the collection of {archive}")


def derive(archive: Path, dest: Path, tag: str, files: Mapping[str, bytes]) -> str:
    """Write to `dest` the image of `archive` with `files` (paths in the collection -> content) replaced, named
    kubenest.local/kubenest-operator:<tag>; returns that name."""
    ref = f"{oci.REGISTRY}/{operator_image.NAME}:{tag}"
    with tempfile.TemporaryDirectory(dir=dest.parent) as scratch_dir, tarfile.open(archive) as outer:
        scratch = Path(scratch_dir)
        index = json.load(outer.extractfile("index.json"))
        manifest = json.load(outer.extractfile(_blob_member(index["manifests"][0]["digest"])))
        config = json.load(outer.extractfile(_blob_member(manifest["config"]["digest"])))
        layers = []
        for number, descriptor in enumerate(manifest["layers"]):
            path = scratch / f"layer-{number}"
            with outer.extractfile(_blob_member(descriptor["digest"])) as src, path.open("wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            layers.append((oci.Blob(descriptor["digest"], descriptor["size"]), path))
        if files:
            top = scratch / "layer-top"
            with top.open("wb") as raw:
                compressed = oci.DigestWriter(raw)
                with gzip.GzipFile(filename="", fileobj=compressed, mode="wb", mtime=0) as gz:
                    plain = oci.DigestWriter(gz)
                    with tarfile.open(fileobj=plain, mode="w", format=tarfile.PAX_FORMAT) as tar:
                        for relative, content in sorted(files.items()):
                            oci.add_bytes(tar, f"{COLLECTION_IN_IMAGE}/{relative}", content)
            layers.append((oci.Blob(compressed.digest, compressed.size), top))
            config["rootfs"]["diff_ids"].append(plain.digest)
            config["history"].append({"created": oci.EPOCH, "created_by": f"COPY {len(files)} collection file(s)"})
        config["config"]["Labels"]["org.opencontainers.image.version"] = tag
        oci.write_layout(dest, ref, oci.canonical_json(config), layers)
    return ref


def last_release() -> str | None:
    """The commit that released the collection last (it wrote changelogs/changelog.yaml); None when this clone's
    history does not reach it (a shallow clone)."""
    proc = subprocess.run(["git", "log", "-1", "--format=%H", "--", "changelogs/changelog.yaml"], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=False)
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and commit and not _shallow_boundary(commit) else None


def _shallow_boundary(commit: str) -> bool:
    shallow = REPO_ROOT / ".git" / "shallow"
    return shallow.is_file() and commit in shallow.read_text().split()


def release_image(commit: str, cache: Path, work: Path) -> tuple[str, Path]:
    """The operator image of `commit`, built from that commit's own tree by its own image script (its base rootfs
    taken from `cache`, so only the Python parts are built again), named kubenest.local/kubenest-operator:release-
    <commit's first 12 digits>; returns that name and the archive."""
    tree = work / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=REPO_ROOT, capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    own_cache = work / "cache"
    own_cache.mkdir()
    (own_cache / "rootfs").symlink_to(cache / "rootfs", target_is_directory=True)
    proc = subprocess.run([sys.executable, str(tree / "sandbox/images/operator_image.py")], cwd=tree,
                          env={**os.environ, "KUBENEST_CACHE": str(own_cache)}, capture_output=True, text=True,
                          timeout=1800, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the operator image of {commit} did not build:\n{proc.stderr[-3000:]}")
    built = Path(proc.stdout.strip().splitlines()[-1])
    dest = work / "release.oci.tar"
    ref = derive(built, dest, f"release-{commit[:12]}", {})
    shutil.rmtree(tree)
    shutil.rmtree(own_cache)  # its rootfs is a link to the shared base, which stays
    return ref, dest
