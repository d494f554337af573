"""The base root filesystem shared by all node machines: a debootstrap of Debian, cached outside the repository.

Building it takes minutes, so it lives under $KUBENEST_CACHE/rootfs/<key>, keyed by the release and the package
list; machines never modify it (they get copies).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from .aptsources import mirror_for
from .errors import SandboxError

SUITE = "bookworm"
VARIANT = "minbase"
# What node roles need later: systemd as init, the CNI plugins, the tools kubelet and kube-proxy call, and python3
# (+ venv) for Ansible modules and the agent. The container runtime is built, not Debian's (runtime.py); runc
# links libseccomp, which systemd already pulls in.
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "iproute2", "iputils-ping", "python3", "python3-venv", "ca-certificates",
    "libseccomp2", "containernetworking-plugins", "iptables", "conntrack", "socat", "ethtool", "kmod",
    "util-linux", "procps",
)
COMPLETE_MARK = ".kubenest-rootfs-complete"


def cache_key(packages=PACKAGES) -> str:
    spec = "\n".join([SUITE, VARIANT, *sorted(set(packages))])
    return f"{SUITE}-{hashlib.sha256(spec.encode()).hexdigest()[:12]}"


@contextmanager
def locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def log(message: str) -> None:
    print(f"[nodes] {message}", file=sys.stderr, flush=True)


def remove_tree(path: Path) -> None:
    """rm -rf that never follows a mount into another filesystem (a stray bind mount must not be emptied)."""
    if path.exists() or path.is_symlink():
        subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=True)


def ensure_base(cache_dir: Path, packages=PACKAGES) -> Path:
    """Return the cached base rootfs, building it with debootstrap first if needed."""
    root = cache_dir / "rootfs" / cache_key(packages)
    if (root / COMPLETE_MARK).is_file():
        return root
    with locked(root.with_name(".lock")):
        if (root / COMPLETE_MARK).is_file():
            return root
        _build(root, packages)
    return root


def _build(root: Path, packages) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise SandboxError("debootstrap not found: install the Debian package 'debootstrap' (make system-deps)")
    if os.geteuid() != 0:
        raise SandboxError("building the node rootfs needs root (debootstrap)")
    source = mirror_for(SUITE)
    work = root.with_name(root.name + ".build")
    remove_tree(work)
    remove_tree(root)
    logfile = root.with_name(root.name + ".log")
    argv = [debootstrap, f"--variant={VARIANT}", "--components=main", f"--include={','.join(sorted(packages))}"]
    if source.signed_by and Path(source.signed_by).is_file():
        argv.append(f"--keyring={source.signed_by}")
    argv += [SUITE, str(work), source.uri]
    log(f"building base rootfs {root.name} from {source.uri} (a few minutes; log: {logfile})")
    started = time.monotonic()
    with logfile.open("w") as out:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, check=False,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"})
    if proc.returncode != 0:
        tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-15:])
        remove_tree(work)
        raise SandboxError(f"debootstrap failed with status {proc.returncode}:\n{tail}")
    _trim(work)
    (work / COMPLETE_MARK).write_text(" ".join(sorted(packages)) + "\n")
    work.rename(root)
    log(f"base rootfs ready in {time.monotonic() - started:.0f}s: {root}")


def _trim(root: Path) -> None:
    # Downloaded .debs and apt lists are useless on machines that cannot reach a mirror.
    for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_Packages", "var/cache/apt/*.bin"):
        for path in root.glob(pattern):
            path.unlink()
    # Every machine must get its own identity (kubelet reports it as the node's system UUID).
    (root / "etc/machine-id").write_text("")
    dbus_id = root / "var/lib/dbus/machine-id"
    if dbus_id.exists() and not dbus_id.is_symlink():
        dbus_id.unlink()
