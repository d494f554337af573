"""Pushing the sandbox's OCI archives to the registry with skopeo; an image the registry already holds with the
same manifest digest is not pushed again (one HEAD request instead of unpacking the archive)."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import NAME
from .server import Registry, RegistryError, manifest_digest

PUSH_TIMEOUT_S = 900


@dataclass(frozen=True)
class Archive:
    path: Path
    refs: tuple[str, ...]
    manifest_digest: str


def split_ref(ref: str) -> tuple[str, str]:
    """(repository, tag) inside the registry of a `kubenest.local/<repository>:<tag>` reference."""
    prefix = NAME + "/"
    if not ref.startswith(prefix):
        raise RegistryError(f"image {ref!r} is not named under {prefix} (only those are served by the registry)")
    repository, sep, tag = ref[len(prefix):].rpartition(":")
    if not sep or not repository or "/" in tag or "@" in ref:
        raise RegistryError(f"image {ref!r} has no tag (want {prefix}<repository>:<tag>)")
    return repository, tag


def archives_of(images_dir: Path) -> list[Archive]:
    """The archives an image directory's catalog (images.json) names, as `make images` and the conformance build
    write it: name -> {archive, manifest_digest, ref or refs}."""
    catalog = images_dir / "images.json"
    try:
        entries = json.loads(catalog.read_text()).values()
    except FileNotFoundError:
        raise RegistryError(f"{images_dir} has no images.json: build the images first (make images)") from None
    except (ValueError, AttributeError) as exc:
        raise RegistryError(f"{catalog} is not an image catalog: {exc}") from None
    try:
        return [Archive(images_dir / e["archive"], tuple(e.get("refs") or [e["ref"]]), e["manifest_digest"])
                for e in entries]
    except (KeyError, TypeError) as exc:
        raise RegistryError(f"{catalog}: an entry lacks {exc} (want archive, manifest_digest, ref or refs)") from None


def _skopeo(reg: Registry, source: str, ref: str, *, from_registry: bool = False) -> None:
    repository, tag = split_ref(ref)
    argv = ["skopeo", "copy", "--quiet", "--preserve-digests", "--dest-cert-dir", str(reg.trust_dir)]
    if from_registry:
        argv += ["--src-cert-dir", str(reg.trust_dir)]
    argv += [source, f"docker://{reg.host}/{repository}:{tag}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=PUSH_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise RegistryError(f"skopeo could not push {ref}: {proc.stderr.strip() or proc.stdout.strip()}")


def push_one(reg: Registry, archive: Archive) -> list[str]:
    """Push one archive under each of its references; returns the references it had to push."""
    missing = [ref for ref in archive.refs if manifest_digest(reg, *split_ref(ref)) != archive.manifest_digest]
    if not missing:
        return []
    if not archive.path.is_file():
        raise RegistryError(f"{archive.path} is missing: build the images again (make images)")
    first, *others = missing
    # An archive that names its image more than once (one index entry per name, as the conformance images have)
    # is read by the name, which skopeo wants then; the reference after the path's first colon is whole.
    source = f"oci-archive:{archive.path}" + (f":{first}" if len(archive.refs) > 1 else "")
    _skopeo(reg, source, first)
    for ref in others:  # the blobs are there already: only the manifest is copied
        repository, tag = split_ref(first)
        _skopeo(reg, f"docker://{reg.host}/{repository}:{tag}", ref, from_registry=True)
    pushed = manifest_digest(reg, *split_ref(first))
    if pushed != archive.manifest_digest:
        raise RegistryError(f"{first}: the registry holds {pushed}, the archive {archive.manifest_digest} "
                            "(skopeo changed the manifest)")
    return missing


def push(reg: Registry, archives: list[Archive], workers: int = 2) -> list[str]:
    """Push every archive the registry lacks, `workers` at a time; returns the references pushed."""
    for archive in archives:
        for ref in archive.refs:
            split_ref(ref)  # every name is checked before anything is pushed
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return [ref for pushed in pool.map(lambda a: push_one(reg, a), archives) for ref in pushed]
