"""sandbox/conformance/images.py: which base each image starts from, the shared base layers, Alpine's minirootfs."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from sandbox.conformance import images
from sandbox.machines import rootfs

VERSIONS = {"KUBERNETES_VERSION": "v1.36.3", "BUSYBOX_VERSION": "1.37.0", "ETCD_VERSION": "v3.6.16",
            "ALPINE_VERSION": "3.24.1", "ALPINE_MODULE_VERSION": "v0.0.0-20260614000913-398ff0c866d2"}
OS_RELEASE = b'NAME="Alpine Linux"\nID=alpine\nVERSION_ID=3.24.1\n'


def test_the_images_whose_specs_read_alpine_are_built_on_alpine_and_agnhost_on_debian(tmp_path):
    built = {image.name: image for image in images.specs(tmp_path, tmp_path, tmp_path / "coredns",
                                                         tmp_path / "pause", tmp_path, VERSIONS)}
    assert {name for name, image in built.items() if image.base == images.ALPINE} == {"kitten", "nautilus"}
    assert built["agnhost"].base == images.DEBIAN
    assert built["busybox"].base == built["pause"].base == ""


def _tree(path: Path, marker: str) -> Path:
    for directory in ("etc", "run", "tmp"):
        (path / directory).mkdir(parents=True)
    (path / "etc/marker").write_text(marker)
    return path


def test_a_base_layer_replaces_its_own_older_layers_and_keeps_the_other_bases(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "base-alpine-0000000000000000.layer").write_bytes(b"older alpine")
    (out / "base-0123456789abcdef.layer").write_bytes(b"named before bases had kinds")
    (out / "base-0123456789abcdef.layer.json").write_text("{}")
    debian = images.ensure_base_layer(images.DEBIAN, _tree(tmp_path / "bookworm-x", "debian"), out)
    alpine = images.ensure_base_layer(images.ALPINE, _tree(tmp_path / "alpine-minirootfs-x", "alpine"), out)
    assert Path(debian["path"]).is_file() and Path(alpine["path"]).is_file()
    assert debian["digest"] != alpine["digest"]
    assert sorted(path.name for path in out.glob("base-*.layer")) == sorted(
        [Path(debian["path"]).name, Path(alpine["path"]).name])
    assert images.ensure_base_layer(images.DEBIAN, tmp_path / "bookworm-x", out) == debian  # cached


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    """What `go mod download` of Alpine's docker-alpine module gives (a stub of the go command only)."""
    moddir = tmp_path / "mod"
    (moddir / "x86_64").mkdir(parents=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("./usr/lib/os-release")
        info.size = len(OS_RELEASE)
        tar.addfile(info, io.BytesIO(OS_RELEASE))
        link = tarfile.TarInfo("./etc/os-release")
        link.type, link.linkname = tarfile.SYMTYPE, "../usr/lib/os-release"
        tar.addfile(link)
    tarball = moddir / "x86_64" / f"alpine-minirootfs-{VERSIONS['ALPINE_VERSION']}-x86_64.tar.gz"
    tarball.write_bytes(buf.getvalue())
    real_run = subprocess.run

    def run(argv, *args, **kwargs):
        if argv[0] == "go":
            assert argv[1:4] == ["mod", "download", "-json"]
            assert argv[4] == f"{images.ALPINE_MODULE}@{VERSIONS['ALPINE_MODULE_VERSION']}"
            return subprocess.CompletedProcess(argv, 0, json.dumps({"Dir": str(moddir)}), "")
        return real_run(argv, *args, check=kwargs.pop("check", False), **kwargs)

    monkeypatch.setattr(images.subprocess, "run", run)
    return hashlib.sha512(tarball.read_bytes()).hexdigest()


def test_alpine_is_unpacked_from_the_pinned_release_once(tmp_path, module_dir):
    cache = tmp_path / "cache"
    cache.mkdir()
    root = images.ensure_alpine(cache, {**VERSIONS, "ALPINE_MINIROOTFS_SHA512": module_dir})
    assert root.name == "alpine-minirootfs-3.24.1"
    assert (root / "etc/os-release").read_bytes() == OS_RELEASE
    assert (root / rootfs.COMPLETE_MARK).is_file()
    assert images.ensure_alpine(cache, {**VERSIONS, "ALPINE_MINIROOTFS_SHA512": "not looked at again"}) == root


def test_a_minirootfs_without_the_pinned_checksum_is_refused_and_nothing_unpacked(tmp_path, module_dir):
    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(SystemExit, match="sha512 .* not the one versions.env pins"):
        images.ensure_alpine(cache, {**VERSIONS, "ALPINE_MINIROOTFS_SHA512": "0" * 128})
    assert not list((cache / "rootfs").glob("alpine-*"))


def test_versions_env_pins_the_alpine_release_it_names():
    pinned = images.read_versions()
    assert pinned["ALPINE_MODULE_VERSION"].startswith("v0.0.0-")
    assert len(pinned["ALPINE_MINIROOTFS_SHA512"]) == 128
    assert pinned["ALPINE_VERSION"].count(".") == 2
