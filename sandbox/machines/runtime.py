"""The machines' container runtime: containerd and runc built from their Go modules (sandbox/runtime/build.sh).

Debian's containerd (1.6) has no image volumes and is older than the Kubernetes the sandbox runs supports, so the
base rootfs carries neither it nor Debian's runc; every machine image gets these programs and a unit of its own.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from .config import REPO_ROOT
from .errors import SandboxError

BUILD = REPO_ROOT / "sandbox/runtime/build.sh"
UNIT = Path(__file__).resolve().parent / "files/containerd.service"
# (program in the build's bin/, path in the machine); /usr/local comes first on systemd's PATH, where containerd
# finds its shim and the shim finds runc.
PROGRAMS = (
    ("containerd", "usr/local/bin/containerd"),
    ("containerd-shim-runc-v2", "usr/local/bin/containerd-shim-runc-v2"),
    ("ctr", "usr/local/bin/ctr"),
    ("runc", "usr/local/sbin/runc"),
)
UNIT_PATH = "etc/systemd/system/containerd.service"
VERSION_KEYS = ("CONTAINERD_VERSION", "RUNC_VERSION")


def versions(env_file: Path | None = None) -> dict[str, str]:
    env_file = env_file or REPO_ROOT / "versions.env"
    pins = {}
    for line in env_file.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key in VERSION_KEYS:
            pins[key] = value.strip()
    missing = [k for k in VERSION_KEYS if k not in pins]
    if missing:
        raise SandboxError(f"{env_file} does not pin {', '.join(missing)}")
    return pins


def key_material() -> bytes:
    """What a machine image keyed on the runtime depends on: the pinned releases, the build and the unit."""
    digest = hashlib.sha256()
    for name, value in sorted(versions().items()):
        digest.update(f"{name}={value}\0".encode())
    for path in (BUILD, UNIT, Path(__file__)):
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest().encode()


def ensure_built() -> Path:
    """The directory holding the runtime's programs, built (minutes) or taken from the cache."""
    proc = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SandboxError(f"building the container runtime failed (status {proc.returncode}):\n"
                           + "\n".join(proc.stderr.strip().splitlines()[-30:]))
    bin_dir = Path(proc.stdout.strip().splitlines()[-1]) / "bin"
    for program, _dst in PROGRAMS:
        if not (bin_dir / program).is_file():
            raise SandboxError(f"the runtime build printed {bin_dir.parent} but {program} is not there")
    return bin_dir


def install(root: Path, bin_dir: Path, write) -> None:
    """Copy the programs and the unit into the machine rootfs `root` with `write(path, data, mode)`."""
    for program, dst in PROGRAMS:
        write(root / dst, (bin_dir / program).read_bytes(), 0o755)
    write(root / UNIT_PATH, UNIT.read_bytes(), 0o644)
