"""The operator's OCI image, built here from local parts: no registry and no Dockerfile.

- Python from Debian: a debootstrap (minbase, python3, python3-venv, ca-certificates), cached like the node rootfs;
- /opt/kubenest: a virtualenv with the operator and its dependencies (ansible-core, ansible-runner, kopf and the
  collection's requirements.txt), installed offline from wheels built on this machine with the pinned versions;
- /opt/kubenest/collections: kosmos.kubenest installed from the tarball `ansible-galaxy collection build` makes,
  and its declared dependency (ansible.posix) taken from the `ansible` package of this venv;
- user 65532 (what deploy/operator runs it as); the root filesystem can be read-only (runs, artifacts and HOME
  live on the emptyDirs the Deployment mounts).

One layer with fixed owners and times and sorted entries, cached under
$KUBENEST_CACHE/operator-image/<key>/kubenest-operator.oci.tar, keyed by the base and every input. Prints the
archive's path as its last line. Needs root (debootstrap, systemd-nspawn).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from sandbox.images import build_images as oci  # noqa: E402  (the repository root is on the path only now)
from sandbox.machines import cgroups, rootfs  # noqa: E402
from sandbox.machines.image import nspawn_runner  # noqa: E402

NAME, USER = "kubenest-operator", 65532
PACKAGES = ("python3", "python3-venv", "ca-certificates")
VENV = "/opt/kubenest"
COLLECTIONS = f"{VENV}/collections"
HOME = "/var/lib/kubenest-operator/home"
DEPENDENCY_COLLECTIONS = ("ansible/posix",)
# Nothing in the image reads these; they are most of a minbase's size that is not Python.
TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/zoneinfo",
        "usr/share/common-licenses", "var/cache/apt", "var/cache/debconf", "var/lib/apt/lists", "var/log",
        "usr/share/lintian", "usr/share/bash-completion")
SKIP_TOP = {"dev", "proc", "sys", "run"}  # filled by the runtime
BUILD_CGROUP_GROUP = "kubenest-image-builds"
WHEELS_IN_IMAGE = "/var/cache/kubenest-wheels"  # not /tmp: nspawn mounts a tmpfs there


def version() -> str:
    text = (REPO_ROOT / "operator/pyproject.toml").read_text()
    return next(line.split('"')[1] for line in text.splitlines() if line.startswith("version"))


def _inputs_digest(base: Path) -> str:
    digest = hashlib.sha256(base.name.encode())
    files = [Path(__file__), REPO_ROOT / "constraints.txt", REPO_ROOT / "requirements.txt",
             REPO_ROOT / "galaxy.yml", REPO_ROOT / "operator/pyproject.toml"]
    for package in ("kubenest_operator", "kubenest_binder"):
        files += sorted((REPO_ROOT / "operator" / package).rglob("*.py"))
    for top in ("plugins", "roles", "playbooks", "meta", "deploy/crds"):
        files += sorted(p for p in (REPO_ROOT / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _run(argv: list[str], what: str, **kwargs) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if proc.returncode != 0:
        sys.exit(f"error: {what} failed (status {proc.returncode}):\n{(proc.stderr or proc.stdout)[-3000:]}")


def wheelhouse(dest: Path) -> None:
    """Wheels of the operator and everything it imports, for this Python (the image's is the same 3.11)."""
    core = next(line for line in (REPO_ROOT / "constraints.txt").read_text().splitlines()
                if line.startswith("ansible-core=="))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "-w", str(dest),
          "-c", str(REPO_ROOT / "constraints.txt"), str(REPO_ROOT / "operator"), core,
          "-r", str(REPO_ROOT / "requirements.txt")], "building the operator's wheels")


def install_collections(root: Path, scratch: Path) -> None:
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    _run([str(galaxy), "collection", "build", "--force", "--output-path", str(scratch), str(REPO_ROOT)],
         "building the collection tarball", cwd=REPO_ROOT)
    tarball = next(scratch.glob("kosmos-kubenest-*.tar.gz"))
    target = root / COLLECTIONS.lstrip("/")
    _run([str(galaxy), "collection", "install", "--no-deps", "--force", "-p", str(target), str(tarball)],
         "installing the collection from its tarball")
    import ansible_collections

    for name in DEPENDENCY_COLLECTIONS:
        source = next(Path(p) / name for p in ansible_collections.__path__
                      if (Path(p) / name / "MANIFEST.json").is_file())
        shutil.copytree(source, target / "ansible_collections" / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "tests"))


def build_root(base: Path, work: Path, scratch: Path) -> None:
    subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(work)], check=True)
    wheels = work / WHEELS_IN_IMAGE.lstrip("/")
    wheelhouse(wheels)
    # A cgroup of its own, outside the sandbox's: `make down` must not kill a build that runs meanwhile.
    dirs = cgroups.create(BUILD_CGROUP_GROUP, f"operator-image-{os.getpid()}")
    try:
        run = nspawn_runner(work, dirs)
        run(["/usr/bin/python3", "-m", "venv", VENV])
        run([f"{VENV}/bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
             "--find-links", WHEELS_IN_IMAGE, "kubenest-operator", "ansible-core",
             "cryptography", "websockets"])
        run([f"{VENV}/bin/python", "-m", "pip", "uninstall", "-q", "-y", "pip"])  # nothing installs at run time
    finally:
        cgroups.remove(dirs)
    rootfs.remove_tree(wheels)
    install_collections(work, scratch)
    for relative in TRIM:
        rootfs.remove_tree(work / relative)
    for cache in work.rglob("__pycache__"):
        if cache.is_dir() and not str(cache.relative_to(work)).startswith("opt/"):
            shutil.rmtree(cache)
    with (work / "etc/passwd").open("a") as fh:
        fh.write(f"kubenest:x:{USER}:{USER}:kosmos.kubenest operator:{HOME}:/usr/sbin/nologin\n")
    with (work / "etc/group").open("a") as fh:
        fh.write(f"kubenest:x:{USER}:\n")
    home = work / HOME.lstrip("/")
    home.mkdir(parents=True, exist_ok=True)
    for owned in (home, home.parent):
        os.chown(owned, USER, USER)


def write_layer(root: Path, dest: Path) -> tuple[oci.Blob, str]:
    # Everything root's but the operator's own home.
    return oci.write_tree_layer(root, dest, owner=lambda uid, _gid: (uid, uid) if uid == USER else (0, 0),
                                skip_top=frozenset(SKIP_TOP))


def image_config(tag: str, diff_id: str) -> dict:
    return {
        "created": oci.EPOCH, "architecture": "amd64", "os": "linux",
        "config": {
            "User": f"{USER}:{USER}",
            "Entrypoint": [f"{VENV}/bin/kubenest-operator"],
            "Env": [f"PATH={VENV}/bin:/usr/sbin:/usr/bin:/sbin:/bin", f"HOME={HOME}",
                    f"ANSIBLE_COLLECTIONS_PATH={COLLECTIONS}", "PYTHONDONTWRITEBYTECODE=1", "LANG=C.UTF-8",
                    # the operator imports the collection's module_utils and finds its playbooks through it
                    f"PYTHONPATH={COLLECTIONS}"],
            "WorkingDir": "/",
            "Labels": {"org.opencontainers.image.version": tag, "org.opencontainers.image.title": NAME},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": oci.EPOCH, "created_by": "sandbox/images/operator_image.py"}],
    }


def ensure_archive(cache: Path) -> Path:
    base = rootfs.ensure_base(cache, PACKAGES)
    out = cache / "operator-image" / _inputs_digest(base)
    archive = out / f"{NAME}.oci.tar"
    if archive.is_file():
        return archive
    with rootfs.locked(out.parent / ".lock"):
        if archive.is_file():
            return archive
        for old in (p for p in out.parent.iterdir() if p.is_dir()):
            rootfs.remove_tree(old)
        out.mkdir(parents=True)
        ref = f"{oci.REGISTRY}/{NAME}:{version()}"
        with tempfile.TemporaryDirectory(dir=out) as scratch_dir:
            scratch = Path(scratch_dir)
            work = scratch / "operator-root"
            print(f"{ref}: building (Python rootfs, wheels, collection)", file=sys.stderr)
            build_root(base, work, scratch)
            layer_path = scratch / "layer"
            layer, diff_id = write_layer(work, layer_path)
            oci.write_layout(archive, ref, oci.canonical_json(image_config(version(), diff_id)), [(layer, layer_path)])
            rootfs.remove_tree(work)
        (out / "image.json").write_text(json.dumps({"ref": ref, "archive": archive.name,
                                                    "archive_size": archive.stat().st_size}, indent=2) + "\n")
    return archive


def main() -> int:
    cache = Path(os.environ.get("KUBENEST_CACHE", Path.home() / ".cache/kubenest"))
    archive = ensure_archive(cache)
    print(f"{archive.stat().st_size / 2**20:.1f} MiB", file=sys.stderr)
    print(archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
