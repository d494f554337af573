"""The node image: the cached base rootfs plus the agent, the container runtime, their units and the machine-level
fixes nspawn needs.

It is cached next to the base rootfs under $KUBENEST_CACHE/node-image/<key>, keyed by the base and everything the
layer is made of (agent sources, pinned dependencies, layer files), so a sandbox torn down and brought up again only
copies it; a new key (seconds to build) replaces the old one. Machines are copies of it. The same layer can be
re-applied to a running machine so it picks up a changed agent in place.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import cgroups, rootfs, runtime
from .config import REPO_ROOT, Sandbox
from .errors import SandboxError

AGENT_SRC = REPO_ROOT / "agent"
FILES = Path(__file__).resolve().parent / "files"
CONSTRAINTS = REPO_ROOT / "constraints.txt"
VENV = "/opt/kubenest-agent"
WHEELS_IN_MACHINE = "var/cache/kubenest-agent/wheels"
KEY_FILE = ".kubenest-image-key"
# (source, path in the machine, mode)
LAYER_FILES = (
    (REPO_ROOT / "roles/agent/files/kubenest-agent.service", "etc/systemd/system/kubenest-agent.service", 0o644),
    (FILES / "kubenest-cgroup-rw.service", "etc/systemd/system/kubenest-cgroup-rw.service", 0o644),
    (FILES / "cgroup_rw.py", "usr/local/lib/kubenest/cgroup_rw.py", 0o644),
    (FILES / "kubenest-net.service", "etc/systemd/system/kubenest-net.service", 0o644),
)
ENABLE = ("kubenest-agent.service", "kubenest-cgroup-rw.service", "kubenest-net.service")
# Roles configure and start containerd themselves; timers that reach for a mirror are pointless offline.
DISABLE = ("containerd.service", "apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer",
           "e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer")
# nspawn's console is read-only (logged to console.log): a login prompt there is of no use.
MASK = ("console-getty.service",)
# Nodes resolve each other through /etc/hosts; there is no DNS server on the sandbox network.
RESOLV_CONF = "# no DNS server on the sandbox network; node names are in /etc/hosts\noptions timeout:1 attempts:1\n"

Runner = Callable[[list[str]], None]


def _hash_inputs() -> list[Path]:
    inputs = [AGENT_SRC / "pyproject.toml", CONSTRAINTS, Path(__file__)]
    inputs += sorted((AGENT_SRC / "kubenest_agent").rglob("*.py"))
    inputs += [src for src, _dst, _mode in LAYER_FILES]
    return inputs


def image_key(base: Path) -> str:
    digest = hashlib.sha256(base.name.encode())
    for path in _hash_inputs():
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(runtime.key_material())
    return digest.hexdigest()[:16]


def python_tag(root: Path) -> str:
    """The machine's python3 version, e.g. '3.11' (Debian bookworm), read from its /usr/bin/python3 link."""
    target = os.readlink(root / "usr/bin/python3")
    match = re.fullmatch(r"python(3\.\d+)", target)
    if not match:
        raise SandboxError(f"cannot tell the python3 version of {root}: usr/bin/python3 -> {target}")
    return match.group(1)


def glibc_minor(root: Path) -> int:
    status = (root / "var/lib/dpkg/status").read_text()
    match = re.search(r"^Package: libc6\n(?:.+\n)*?Version: 2\.(\d+)", status, re.M)
    if not match:
        raise SandboxError(f"cannot find the libc6 version in {root}/var/lib/dpkg/status")
    return int(match.group(1))


def _prune(directory: Path) -> None:
    """Drop entries of older keys (caller holds the cache lock)."""
    if directory.is_dir():
        for old in directory.iterdir():
            if not old.name.startswith("."):
                rootfs.remove_tree(old)


def build_wheelhouse(sb: Sandbox, base: Path, key: str) -> Path:
    """Wheels of the agent and its dependencies for the machine's Python (machines cannot reach PyPI)."""
    wheelhouse = sb.cache_dir / "wheels" / key
    if (wheelhouse / ".complete").is_file():
        return wheelhouse
    _prune(wheelhouse.parent)
    wheelhouse.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run([*pip, "wheel", "--no-deps", "-w", str(wheelhouse), str(AGENT_SRC)], "building the agent wheel")
    agent_wheel = next(wheelhouse.glob("kubenest_agent-*.whl"))
    arch = platform.machine()
    pyver = python_tag(base)
    platforms = [f"manylinux_2_{m}_{arch}" for m in range(glibc_minor(base), 16, -1)]
    platforms += [f"manylinux2014_{arch}", f"linux_{arch}"]
    argv = [*pip, "download", "--only-binary=:all:", "-d", str(wheelhouse), "--python-version", pyver,
            "--implementation", "cp", "-c", str(CONSTRAINTS)]
    for tag in platforms:
        argv += ["--platform", tag]
    _run([*argv, str(agent_wheel)], f"downloading the agent's dependencies for Python {pyver}")
    (wheelhouse / ".complete").write_text("")
    return wheelhouse


def _run(argv: list[str], what: str, cgroup_dirs: list[str] | None = None) -> None:
    join = (lambda: cgroups.join(cgroup_dirs)) if cgroup_dirs else None
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, preexec_fn=join)
    if proc.returncode != 0:
        raise SandboxError(f"{what} failed (status {proc.returncode}): {' '.join(argv)}\n{proc.stderr.strip()}")


def nspawn_runner(root: Path, cgroup_dirs: list[str]) -> Runner:
    """Run commands in a stopped rootfs: a throwaway container with no network, nothing left mounted on the host.

    --keep-unit because there is no systemd on the host to make a scope; nspawn then splits the cgroup it runs in,
    so it gets a cgroup of its own.
    """
    def run(argv: list[str]) -> None:
        _run(["systemd-nspawn", "-q", "-D", str(root), "--register=no", "--keep-unit", "--private-network",
              "--resolv-conf=off", "--timezone=off", "--link-journal=no", "--pipe", "--", *argv],
             f"{argv[0]} in {root.name}", cgroup_dirs)
    return run


def install_layer(root: Path, wheelhouse: Path, run: Runner) -> None:
    """Install the agent venv, the container runtime and the layer files into `root`; `run` executes a command
    inside it. A running machine's containerd keeps its old program until containerd restarts (the roles restart
    it when a node changes clusters)."""
    runtime_bin = runtime.ensure_built()
    wheels = root / WHEELS_IN_MACHINE
    rootfs.remove_tree(wheels)
    shutil.copytree(wheelhouse, wheels)
    if not (root / VENV.lstrip("/") / "bin/python").exists():
        run(["/usr/bin/python3", "-m", "venv", VENV])
    run([f"{VENV}/bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
         "--force-reinstall", "--find-links", f"/{WHEELS_IN_MACHINE}", "kubenest-agent"])
    rootfs.remove_tree(wheels)
    link = root / "usr/local/bin/kubenest-agent"
    if not link.is_symlink():
        link.unlink(missing_ok=True)
        link.symlink_to(f"{VENV}/bin/kubenest-agent")
    for src, dst, mode in LAYER_FILES:
        write_file(root / dst, src.read_bytes(), mode)
    runtime.install(root, runtime_bin, write_file)
    write_file(root / "etc/resolv.conf", RESOLV_CONF.encode(), 0o644)
    _systemctl(root, "enable", *ENABLE)
    _systemctl(root, "disable", *DISABLE)
    _systemctl(root, "mask", *MASK)


def _systemctl(root: Path, verb: str, *units: str) -> None:
    # Offline: only symlinks under the machine's /etc change, whether it is running or not.
    _run(["systemctl", "--quiet", f"--root={root}", verb, *units], f"systemctl {verb}")


def write_file(path: Path, data: bytes, mode: int) -> bool:
    """Atomically write `data` unless the file already holds it; returns whether it changed."""
    if path.is_symlink():
        path.unlink()  # e.g. a resolv.conf link: replace it, never write through it
    elif path.is_file() and path.read_bytes() == data and (path.stat().st_mode & 0o7777) == mode:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return True


def ensure_image(sb: Sandbox) -> tuple[Path, Path, str]:
    """Return (image rootfs, wheelhouse, key), building the image when its inputs changed."""
    base = rootfs.ensure_base(sb.cache_dir)
    key = image_key(base)
    image = sb.cache_dir / "node-image" / key
    wheelhouse = sb.cache_dir / "wheels" / key
    if _key_of(image) == key and (wheelhouse / ".complete").is_file():
        return image, wheelhouse, key
    with rootfs.locked(image.parent / ".lock"):
        wheelhouse = build_wheelhouse(sb, base, key)
        if _key_of(image) == key:
            return image, wheelhouse, key
        _prune(image.parent)
        rootfs.log(f"building node image {key} (base {base.name})")
        started = time.monotonic()
        work = image.with_name(image.name + ".build")
        subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(work)], check=True)
        dirs = cgroups.create(sb.cgroup_group, "image-build")
        try:
            install_layer(work, wheelhouse, nspawn_runner(work, dirs))
        finally:
            cgroups.remove(dirs)
        (work / KEY_FILE).write_text(key + "\n")
        work.rename(image)
        rootfs.log(f"node image ready in {time.monotonic() - started:.0f}s: {image}")
    return image, wheelhouse, key


def _key_of(root: Path) -> str | None:
    try:
        return (root / KEY_FILE).read_text().strip()
    except FileNotFoundError:
        return None
