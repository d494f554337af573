"""The collection's images in a registry of the site's: every image `make images` builds and the operator image,
each copied with skopeo to `<registry>/<name>:<tag>` (`make push-images REGISTRY=...`).

That is where a site's nodes pull from once a VirtualCluster names the same place as its `imageRepository`, and
where `playbooks/operator_install.yml` takes the operator from. The digests stay those the build wrote, so the
copy is the image that was built; blobs the registry has already are not sent again.
"""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .push import PUSH_TIMEOUT_S, Archive, split_ref
from .server import RegistryError

# host[:port] with an optional path, as an image reference begins: no scheme, no tag, no digest.
_REGISTRY = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


def check_registry(registry: str) -> str:
    """The registry (host[:port][/path]) where images go; a clear error for anything else."""
    registry = registry.rstrip("/")
    if not registry:
        raise RegistryError("no registry given: REGISTRY=host[:port][/path], e.g. registry.example.com/kubenest")
    if "://" in registry:
        raise RegistryError(f"registry {registry!r}: give host[:port][/path] without a scheme")
    if not _REGISTRY.match(registry):
        raise RegistryError(f"registry {registry!r} is not host[:port][/path] (lower case, no tag or digest)")
    return registry


def destinations(archive: Archive, registry: str) -> list[str]:
    """Where each name of `archive` (kubenest.local/<name>:<tag>) goes in `registry`."""
    return [f"{registry}/{repository}:{tag}" for repository, tag in map(split_ref, archive.refs)]


def _copy(source: str, dest: str, cert_dir: Path | None, *, from_registry: bool = False) -> None:
    argv = ["skopeo", "copy", "--quiet", "--preserve-digests"]
    if cert_dir is not None:
        argv += ["--dest-cert-dir", str(cert_dir)] + (["--src-cert-dir", str(cert_dir)] if from_registry else [])
    proc = subprocess.run([*argv, source, f"docker://{dest}"], capture_output=True, text=True,
                          timeout=PUSH_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise RegistryError(f"skopeo could not copy {dest}: {proc.stderr.strip() or proc.stdout.strip()}")


def publish_one(archive: Archive, registry: str, cert_dir: Path | None) -> list[str]:
    if not archive.path.is_file():
        raise RegistryError(f"{archive.path} is missing: build the images again (make images)")
    first, *others = destinations(archive, registry)
    # An archive that names its image more than once is read by the name (skopeo wants one then).
    source = f"oci-archive:{archive.path}" + (f":{archive.refs[0]}" if len(archive.refs) > 1 else "")
    _copy(source, first, cert_dir)
    for dest in others:  # the blobs are there already: only the manifest is copied
        _copy(f"docker://{first}", dest, cert_dir, from_registry=True)
    return [first, *others]


def publish(archives: list[Archive], registry: str, cert_dir: Path | None = None, workers: int = 2) -> list[str]:
    """Copy every archive to `registry`, `workers` at a time; returns the references written there. Every name
    is checked before anything is copied."""
    registry = check_registry(registry)
    if cert_dir is not None and not cert_dir.is_dir():
        raise RegistryError(f"certificate directory {cert_dir} does not exist (skopeo reads ca.crt from it)")
    for archive in archives:
        destinations(archive, registry)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return [ref for written in pool.map(lambda a: publish_one(a, registry, cert_dir), archives)
                for ref in written]
