"""Build OCI image-layout archives from the locally built Kubernetes binaries.

No registry is reachable, so each control-plane image is assembled here: one layer holding the static binary,
a minimal /etc/passwd and /etc/group and a /tmp dir. Archives are byte-for-byte reproducible (fixed mtimes,
owners and ordering) and are cached under $KUBENEST_CACHE/images/<kubernetes version>/; an archive whose inputs
did not change is left untouched. `ctr images import` and `skopeo inspect oci-archive:FILE` read them.

Prints the images directory as its last line. Standard library only.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
# Go programs of our own: pause, echo, etcd-snapshot, await-ready, follow-log.
PROGRAMS = Path(__file__).resolve().parent
REGISTRY = "kubenest.local"
ECHO_TAG = "1.0"
EPOCH = "1970-01-01T00:00:00Z"
GZIP_LEVEL = 6

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
ANNOTATION_REF = "org.opencontainers.image.ref.name"
ANNOTATION_CONTAINERD_NAME = "io.containerd.image.name"
CILIUM_CRDS = "cilium-crds.json"  # catalog file: the pinned release's CRDs (see kosmos.kubenest.cilium_crds)

PASSWD = b"root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
GROUP = b"root:x:0:\nnobody:x:65534:\n"


@dataclass(frozen=True)
class ImageSpec:
    name: str
    tag: str
    binary: Path
    # Further files (source on this machine, path in the image) and symlinks (path, target) of the layer.
    extras: tuple[tuple[Path, str], ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    program: str = ""  # the binary's name in the image, when it is not the image's name
    source: str = ""  # where the program comes from (Go module and version), as `skopeo inspect` shows it

    @property
    def ref(self) -> str:
        return f"{REGISTRY}/{self.name}:{self.tag}"

    @property
    def entrypoint(self) -> str:
        return f"/usr/local/bin/{self.program or self.name}"


@dataclass(frozen=True)
class Blob:
    digest: str
    size: int

    def descriptor(self, media_type: str) -> dict:
        return {"mediaType": media_type, "digest": self.digest, "size": self.size}


class DigestWriter(io.RawIOBase):
    """Passes writes through to `sink` while hashing and counting them."""

    def __init__(self, sink):
        self._sink = sink
        self._sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._sha.update(data)
        self._sink.write(data)
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    @property
    def digest(self) -> str:
        return "sha256:" + self._sha.hexdigest()


def read_versions(path: Path) -> dict[str, str]:
    versions = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


def sha256_file(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()


def canonical_json(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def tar_member(name: str, *, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, size: int = 0) -> tarfile.TarInfo:
    # Fixed owner, group and mtime make the layer digest depend on content only.
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_layer(spec: ImageSpec, dest: Path) -> tuple[Blob, str]:
    """Write the gzipped layer to `dest`; returns its blob and the diff_id (digest of the plain tar)."""
    with dest.open("wb") as raw:
        compressed = DigestWriter(raw)
        with gzip.GzipFile(filename="", fileobj=compressed, mode="wb", mtime=0, compresslevel=GZIP_LEVEL) as gz:
            plain = DigestWriter(gz)
            with tarfile.open(fileobj=plain, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                for directory, mode in (("etc/", 0o755), ("tmp/", 0o1777), ("usr/", 0o755),
                                        ("usr/local/", 0o755), ("usr/local/bin/", 0o755)):
                    tar.addfile(tar_member(directory, kind=tarfile.DIRTYPE, mode=mode))
                for name, content in (("etc/group", GROUP), ("etc/passwd", PASSWD)):
                    tar.addfile(tar_member(name, size=len(content)), io.BytesIO(content))
                with spec.binary.open("rb") as binary:
                    info = tar_member(spec.entrypoint.lstrip("/"), mode=0o755, size=spec.binary.stat().st_size)
                    tar.addfile(info, binary)
                fixed = {"etc", "tmp", "usr", "usr/local", "usr/local/bin"}
                paths = [dest for _src, dest in spec.extras] + [name for name, _target in spec.links]
                parents = sorted({str(parent) for path in paths for parent in Path(path).parents} - {"."} - fixed)
                for directory in parents:
                    tar.addfile(tar_member(directory + "/", kind=tarfile.DIRTYPE, mode=0o755))
                for src, dest in sorted(spec.extras, key=lambda e: e[1]):
                    with src.open("rb") as fh:
                        tar.addfile(tar_member(dest, mode=src.stat().st_mode & 0o755, size=src.stat().st_size), fh)
                for name, target in sorted(spec.links):
                    link = tar_member(name, kind=tarfile.SYMTYPE, mode=0o777)
                    link.linkname = target
                    tar.addfile(link)
    return Blob(compressed.digest, compressed.size), plain.digest


def tree_members(root: Path, skip_top: frozenset[str] = frozenset()):
    """(path in the image, path on disk) of every entry under `root`, parents before children, in a fixed
    order; top-level names in `skip_top` are left out."""
    for dirpath, dirnames, filenames in os.walk(root):
        relative = Path(dirpath).relative_to(root)
        if relative == Path("."):
            dirnames[:] = sorted(d for d in dirnames if d not in skip_top)
            filenames = [f for f in filenames if f not in skip_top]
        else:
            dirnames.sort()
        for name in sorted(dirnames + filenames):
            yield str(relative / name) if relative != Path(".") else name, Path(dirpath) / name


def write_tree_layer(root: Path, dest: Path, owner=None, skip_top: frozenset[str] = frozenset()) -> tuple[Blob, str]:
    """The gzipped layer of the directory tree `root` (fixed times and order); returns its blob and diff_id.
    owner(uid, gid) -> (uid, gid) maps each entry's owner (default: kept). Device nodes and sockets are left out:
    the runtime provides /dev."""
    with dest.open("wb") as raw:
        compressed = DigestWriter(raw)
        with gzip.GzipFile(filename="", fileobj=compressed, mode="wb", mtime=0, compresslevel=GZIP_LEVEL) as gz:
            plain = DigestWriter(gz)
            with tarfile.open(fileobj=plain, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name, path in tree_members(root, skip_top):
                    st = path.lstat()
                    if stat.S_ISLNK(st.st_mode):
                        info = tar_member(name, kind=tarfile.SYMTYPE, mode=0o777)
                        info.linkname = os.readlink(path)
                    elif stat.S_ISDIR(st.st_mode):
                        info = tar_member(name + "/", kind=tarfile.DIRTYPE, mode=stat.S_IMODE(st.st_mode))
                    elif stat.S_ISREG(st.st_mode):
                        info = tar_member(name, mode=stat.S_IMODE(st.st_mode), size=st.st_size)
                    else:
                        continue
                    info.uid, info.gid = owner(st.st_uid, st.st_gid) if owner else (st.st_uid, st.st_gid)
                    if info.isreg():
                        with path.open("rb") as fh:
                            tar.addfile(info, fh)
                    else:
                        tar.addfile(info)
    return Blob(compressed.digest, compressed.size), plain.digest


def image_config(spec: ImageSpec, diff_id: str) -> dict:
    return {
        "created": EPOCH,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": "0:0",  # the pod's securityContext chooses; said here so that inspecting shows it
            "Entrypoint": [spec.entrypoint],
            "Env": ["PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "WorkingDir": "/",
            "Labels": {"org.opencontainers.image.title": spec.name, "org.opencontainers.image.version": spec.tag,
                       "org.opencontainers.image.source": spec.source or f"kosmos.kubenest sandbox/images/{spec.name}"},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": EPOCH, "created_by": f"COPY {spec.name} {spec.entrypoint}"}],
    }


def add_bytes(tar: tarfile.TarFile, name: str, content: bytes) -> None:
    tar.addfile(tar_member(name, size=len(content)), io.BytesIO(content))


def write_archive(spec: ImageSpec, dest: Path) -> Blob:
    """Write the OCI image-layout tar for `spec` to `dest`; returns the manifest blob."""
    with tempfile.TemporaryDirectory(dir=dest.parent) as scratch:
        layer_path = Path(scratch) / "layer"
        layer, diff_id = write_layer(spec, layer_path)
        return write_layout(dest, spec.ref, canonical_json(image_config(spec, diff_id)), [(layer, layer_path)])


def write_layout(dest: Path, ref: str, config: bytes, layers: list[tuple[Blob, Path]], also=()) -> Blob:
    """The OCI image-layout tar of an image named `ref` (and each name in `also`) made of `layers` (blob and file,
    the lowest first); returns the manifest blob."""
    config_blob = Blob("sha256:" + hashlib.sha256(config).hexdigest(), len(config))
    manifest = canonical_json({
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": config_blob.descriptor(MEDIA_CONFIG),
        "layers": [layer.descriptor(MEDIA_LAYER) for layer, _path in layers],
    })
    manifest_blob = Blob("sha256:" + hashlib.sha256(manifest).hexdigest(), len(manifest))
    descriptors = []
    for name in (ref, *also):
        descriptor = manifest_blob.descriptor(MEDIA_MANIFEST)
        descriptor["annotations"] = {ANNOTATION_REF: name, ANNOTATION_CONTAINERD_NAME: name}
        descriptor["platform"] = {"architecture": "amd64", "os": "linux"}
        descriptors.append(descriptor)
    index = canonical_json({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                            "manifests": descriptors})

    def blob_name(blob: Blob) -> str:
        return "blobs/sha256/" + blob.digest.split(":", 1)[1]

    partial = dest.with_name(dest.name + ".partial")
    with tarfile.open(partial, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        add_bytes(tar, "oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"}))
        add_bytes(tar, "index.json", index)
        tar.addfile(tar_member("blobs/", kind=tarfile.DIRTYPE, mode=0o755))
        tar.addfile(tar_member("blobs/sha256/", kind=tarfile.DIRTYPE, mode=0o755))
        add_bytes(tar, blob_name(manifest_blob), manifest)
        add_bytes(tar, blob_name(config_blob), config)
        for layer, layer_path in layers:
            with layer_path.open("rb") as f:
                tar.addfile(tar_member(blob_name(layer), size=layer.size), f)
    partial.replace(dest)
    return manifest_blob


def go_build(source_dir: Path, binary: Path, source_key: str, what: str, package: str = ".") -> Path:
    """`go build` of the main `package` (default: the one in `source_dir`) into `binary`, unless it was built from
    `source_key`."""
    stamp = binary.with_name(binary.name + ".source-sha256")
    if binary.is_file() and stamp.is_file() and stamp.read_text().strip() == source_key:
        return binary
    if shutil.which("go") is None:
        sys.exit(f"error: go toolchain not found on PATH (needed to build {what})")
    binary.parent.mkdir(parents=True, exist_ok=True)
    print(f"building {what}", file=sys.stderr)
    env = dict(os.environ, CGO_ENABLED="0", GOTOOLCHAIN="local", GOFLAGS="-mod=mod")
    subprocess.run(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(binary) + ".tmp", package],
                   cwd=source_dir, env=env, check=True)
    Path(str(binary) + ".tmp").replace(binary)
    stamp.write_text(source_key + "\n")
    return binary


def build_program(name: str, out_dir: Path) -> Path:
    """Build sandbox/images/<name> (static Go) unless its sources are unchanged."""
    source_dir = PROGRAMS / name
    sources = sorted(p for p in source_dir.iterdir() if p.suffix in (".go", ".mod", ".sum"))
    source_key = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources)).hexdigest()
    return go_build(source_dir, out_dir / name, source_key, f"the {name} binary")


# The plugins the cluster DNS Corefile uses (plugins/plugin_utils/cluster_dns.py), and a few for debugging. CoreDNS's
# own main imports every plugin, cloud SDKs included, which triples the build for nothing used here.
COREDNS_PLUGINS = ("cache", "errors", "forward", "health", "hosts", "kubernetes", "loadbalance", "log", "loop",
                   "metrics", "ready", "reload", "template")


def build_coredns(version: str, out_dir: Path) -> Path:
    """CoreDNS `version` from its Go module with COREDNS_PLUGINS, unless already built from the same source."""
    go_mod = f"module kubenest.local/corednsbuild\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns {version}\n"
    imports = "".join(f'\t_ "github.com/coredns/coredns/plugin/{name}"\n' for name in COREDNS_PLUGINS)
    main_go = ('package main\n\nimport (\n\t"github.com/coredns/coredns/coremain"\n\n' + imports
               + ')\n\nfunc main() { coremain.Run() }\n')
    source_key = hashlib.sha256((go_mod + main_go).encode()).hexdigest()
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "go.mod").write_text(go_mod)
        (Path(work) / "main.go").write_text(main_go)
        return go_build(Path(work), out_dir / "coredns", source_key, f"CoreDNS {version}")


def build_konnectivity(version: str, out_dir: Path) -> dict[str, Path]:
    """The Konnectivity proxy server and agent from `sigs.k8s.io/apiserver-network-proxy` at `version`. Built as
    packages of a module of our own: the upstream module replaces its konnectivity-client with a nested
    directory, which a dependency's replace does not carry, so the client comes at the version it requires."""
    go_mod = (f"module kubenest.local/konnectivitybuild\n\ngo 1.26.0\n\n"
              f"require sigs.k8s.io/apiserver-network-proxy {version}\n")
    # keeps both commands in the module's build list for `go build <package>`
    tools_go = ('//go:build tools\n\npackage tools\n\nimport (\n'
                '\t_ "sigs.k8s.io/apiserver-network-proxy/cmd/agent"\n'
                '\t_ "sigs.k8s.io/apiserver-network-proxy/cmd/server"\n)\n')
    source_key = hashlib.sha256((go_mod + tools_go).encode()).hexdigest()
    built = {}
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "go.mod").write_text(go_mod)
        (Path(work) / "tools.go").write_text(tools_go)
        for name, package in (("proxy-server", "cmd/server"), ("proxy-agent", "cmd/agent")):
            built[name] = go_build(Path(work), out_dir / name, source_key, f"Konnectivity {name} {version}",
                                   package="sigs.k8s.io/apiserver-network-proxy/" + package)
    return built


def ensure_image(spec: ImageSpec, out_dir: Path) -> dict:
    archive = out_dir / f"{spec.name}.oci.tar"
    input_key = hashlib.sha256(canonical_json({
        "builder": sha256_file(Path(__file__)),
        "binary": sha256_file(spec.binary),
        "extras": sorted([dest, sha256_file(src)] for src, dest in spec.extras),
        "links": sorted(list(link) for link in spec.links),
        "ref": spec.ref,
        "source": spec.source,
    })).hexdigest()
    key_file = out_dir / f"{spec.name}.oci.tar.input-sha256"
    entry_file = out_dir / f"{spec.name}.oci.tar.json"
    if archive.is_file() and key_file.is_file() and entry_file.is_file() \
            and key_file.read_text().strip() == input_key:
        print(f"{spec.ref}: cached", file=sys.stderr)
        return json.loads(entry_file.read_text())
    print(f"{spec.ref}: building {archive.name}", file=sys.stderr)
    manifest = write_archive(spec, archive)
    entry = {"ref": spec.ref, "archive": archive.name, "manifest_digest": manifest.digest,
             "archive_size": archive.stat().st_size}
    entry_file.write_text(json.dumps(entry, indent=2, sort_keys=True) + "\n")
    key_file.write_text(input_key + "\n")
    return entry


def shared_libraries(binaries: list[Path]) -> set[Path]:
    """The shared objects `binaries` load, as ldd resolves them on this machine (the loader included)."""
    found: set[Path] = set()
    for binary in binaries:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            path = parts[2] if len(parts) >= 3 and parts[1] == "=>" else parts[0] if parts else ""
            if path.startswith("/"):
                found.add(Path(path))
    return found


def iptables_files() -> tuple[tuple[tuple[Path, str], ...], tuple[tuple[str, str], ...]]:
    """iptables (nf_tables backend) from this machine's Debian package, for the kube-proxy image: kube-proxy
    calls iptables-save/-restore. Nodes run the same Debian release and backend."""
    multi = Path("/usr/sbin/xtables-nft-multi")
    if not multi.is_file():
        sys.exit("error: /usr/sbin/xtables-nft-multi not found: install the Debian package 'iptables'")
    extensions = sorted(Path("/usr/lib/x86_64-linux-gnu/xtables").glob("*.so"))
    files = [multi, *extensions]
    libs = shared_libraries(files)
    extras = [(multi, "usr/sbin/xtables-nft-multi")]
    extras += [(ext, str(ext).lstrip("/")) for ext in extensions]
    extras += [(lib.resolve(), str(lib).lstrip("/")) for lib in sorted(libs)]
    links = [(f"usr/sbin/{tool}{suffix}", "xtables-nft-multi")
             for tool in ("iptables", "ip6tables") for suffix in ("", "-save", "-restore")]
    return tuple(extras), tuple(links)


def library_files(binaries: list[Path], have: set[str]) -> tuple[list[tuple[Path, str]], list[tuple[str, str]]]:
    """The shared objects of `binaries` at the paths the loader looks for them, each file stored once (a second
    path to the same file becomes a symlink). `have`: image paths already taken."""
    extras: list[tuple[Path, str]] = []
    links: list[tuple[str, str]] = []
    stored: dict[Path, str] = {}
    for lib in sorted(shared_libraries(binaries)):
        dest = os.path.normpath(str(lib)).lstrip("/")
        source = lib.resolve()
        if dest in have:
            continue
        have.add(dest)
        if source in stored:
            links.append((dest, "/" + stored[source]))
        else:
            stored[source] = dest
            extras.append((source, dest))
    return extras, links


def cilium_crds(crds_dir: Path) -> str:
    """The release's CRDs and schema version as the catalog file kosmos.kubenest.cilium_crds reads."""
    schema_version = (crds_dir / "schema-version").read_text().strip()
    if not schema_version:
        sys.exit(f"error: no CRD schema version in {crds_dir}; run `make cilium` again")
    definitions = [doc for path in sorted(crds_dir.glob("*/*.yaml"))
                   for doc in yaml.safe_load_all(path.read_text()) if doc]
    return json.dumps({"schemaVersion": schema_version, "definitions": definitions}, sort_keys=True) + "\n"


def write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)


def cilium_files(cilium_dir: Path) -> tuple[tuple[tuple[Path, str], ...], tuple[tuple[str, str], ...]]:
    """What the Cilium agent needs beside itself: its CNI plugin, the datapath sources and clang to compile them
    on the node (Debian's clang-19), iptables, a static busybox for the init container's steps and iproute2's ip
    for the one busybox cannot do (the flow-based tunnel device)."""
    clang = Path("/usr/lib/llvm-19/bin/clang")
    busybox = Path("/bin/busybox")
    ip_tool = Path("/bin/ip")
    for tool, package in ((clang, "clang-19"), (busybox, "busybox-static"), (ip_tool, "iproute2")):
        if not tool.is_file():
            sys.exit(f"error: {tool} not found: install the Debian package '{package}'")
    ipt_extras, ipt_links = iptables_files()
    extras = [(cilium_dir / "bin" / "cilium-cni", "usr/local/bin/cilium-cni"), (clang, "usr/lib/llvm-19/bin/clang"),
              (busybox, "bin/busybox"), (ip_tool, "usr/sbin/ip"), *ipt_extras]
    links = [("usr/local/bin/clang", "/usr/lib/llvm-19/bin/clang"), *ipt_links]
    have = {dest for _src, dest in extras}
    lib_extras, lib_links = library_files([clang, ip_tool], have)
    extras += lib_extras
    links += lib_links
    bpf = cilium_dir / "bpf"
    extras += [(path, "var/lib/cilium/bpf/" + str(path.relative_to(bpf)))
               for path in sorted(bpf.rglob("*")) if path.is_file()]
    return tuple(extras), tuple(links)


def default_bin_dir(cache: Path, versions: dict[str, str]) -> Path:
    # Same layout as sandbox/k8s/build.sh.
    return cache / "k8s" / f"{versions['KUBERNETES_VERSION']}-etcd-{versions['ETCD_VERSION']}" / "bin"


def main(argv: list[str] | None = None) -> int:
    versions = read_versions(REPO_ROOT / "versions.env")
    cache = Path(os.environ.get("KUBENEST_CACHE") or Path.home() / ".cache" / "kubenest")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    # The previous minor's catalog holds only what differs per Kubernetes release (its control plane and
    # kube-proxy): what a tenant upgraded from it runs before the upgrade. Its binaries: build.sh previous.
    parser.add_argument("--release", choices=("pinned", "previous"), default="pinned",
                        help="the pinned Kubernetes release (every image) or the previous minor (its control plane)")
    parser.add_argument("--bin-dir", type=Path,
                        help="directory with the built binaries (default: the one sandbox/k8s/build.sh fills)")
    parser.add_argument("--out", type=Path,
                        help="output directory (default: $KUBENEST_CACHE/images/<Kubernetes version>)")
    args = parser.parse_args(argv)
    if args.release == "previous":
        versions = {**versions, "KUBERNETES_VERSION": versions["KUBERNETES_PREVIOUS_VERSION"]}
    args.bin_dir = args.bin_dir or default_bin_dir(cache, versions)
    args.out = args.out or cache / "images" / versions["KUBERNETES_VERSION"]
    # One build at a time: make test builds ahead in the background while the tests' workers may ask for the
    # images; a second caller waits, then finds them cached.
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with (args.out.parent / f".{args.out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return build_previous(args, versions) if args.release == "previous" else build(args, versions, cache)


def kubernetes_specs(args: argparse.Namespace, k8s_tag: str) -> list[ImageSpec]:
    """The images of one Kubernetes release: its control plane and kube-proxy."""
    # await-ready: the entry point that holds the API server back until its etcd has a leader, and the
    # controllers until their API server answers, so all start together.
    await_ready = ((build_program("await-ready", args.out / "await-ready-bin"), "usr/local/bin/await-ready"),)
    # follow-log: the API server pod's second container, streaming the tenant's audit log to its own output.
    follow_log = ((build_program("follow-log", args.out / "follow-log-bin"), "usr/local/bin/follow-log"),)
    k8s_source = f"k8s.io/kubernetes {k8s_tag}"
    programs = {"kube-apiserver": await_ready + follow_log}
    specs = [ImageSpec(name, k8s_tag, args.bin_dir / name, programs.get(name, await_ready),
                       source=f"{k8s_source} cmd/{name}")
             for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")]
    extras, links = iptables_files()
    specs.append(ImageSpec("kube-proxy", k8s_tag, args.bin_dir / "kube-proxy", extras, links,
                           source=f"{k8s_source} cmd/kube-proxy"))
    missing = [str(s.binary) for s in specs if not s.binary.is_file()]
    if missing:
        sys.exit(f"error: missing binaries {missing}; run `make k8s` first")
    return specs


def write_catalog(out: Path, specs: list[ImageSpec]) -> None:
    catalog = {spec.name: ensure_image(spec, out) for spec in specs}
    catalog_path = out / "images.json"
    catalog_text = json.dumps(catalog, indent=2, sort_keys=True) + "\n"
    if not catalog_path.is_file() or catalog_path.read_text() != catalog_text:
        catalog_path.write_text(catalog_text)
    print(out)


def build_previous(args: argparse.Namespace, versions: dict[str, str]) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    write_catalog(args.out, kubernetes_specs(args, versions["KUBERNETES_VERSION"]))
    return 0


def build(args: argparse.Namespace, versions: dict[str, str], cache: Path) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    specs = kubernetes_specs(args, versions["KUBERNETES_VERSION"])
    # etcd-snapshot: backups stream out of the member's own pod, restores run as its init container.
    snapshot_tool = build_program("etcd-snapshot", args.out / "etcd-snapshot-bin")
    specs.append(ImageSpec("etcd", versions["ETCD_VERSION"], args.bin_dir / "etcd",
                           ((snapshot_tool, "usr/local/bin/etcd-snapshot"),),
                           source=f"go.etcd.io/etcd/server/v3 {versions['ETCD_VERSION']}"))
    if not (args.bin_dir / "etcd").is_file():
        sys.exit(f"error: missing binaries {[str(args.bin_dir / 'etcd')]}; run `make k8s` first")
    specs.append(ImageSpec("pause", versions["PAUSE_VERSION"], build_program("pause", args.out / "pause-bin")))
    specs.append(ImageSpec("echo", ECHO_TAG, build_program("echo", args.out / "echo-bin")))
    coredns = versions["COREDNS_VERSION"]
    specs.append(ImageSpec("coredns", coredns.removeprefix("v"), build_coredns(coredns, args.out / "coredns-bin"),
                           source=f"github.com/coredns/coredns {coredns}"))

    konnectivity = versions["KONNECTIVITY_VERSION"]
    proxy = build_konnectivity(konnectivity, cache / "konnectivity" / konnectivity)
    proxy_source = f"sigs.k8s.io/apiserver-network-proxy {konnectivity}"
    specs.append(ImageSpec("konnectivity-server", konnectivity, proxy["proxy-server"], program="proxy-server",
                           source=f"{proxy_source} cmd/server"))
    specs.append(ImageSpec("konnectivity-agent", konnectivity, proxy["proxy-agent"], program="proxy-agent",
                           source=f"{proxy_source} cmd/agent"))

    cilium_dir = cache / "cilium" / versions["CILIUM_VERSION"]
    if not (cilium_dir / "bin" / "cilium-agent").is_file():
        sys.exit(f"error: Cilium is not built in {cilium_dir}; run `make cilium` first")
    cilium_tag = versions["CILIUM_VERSION"]
    extras, links = cilium_files(cilium_dir)
    cilium_source = f"github.com/cilium/cilium {cilium_tag}"
    specs.append(ImageSpec("cilium", cilium_tag, cilium_dir / "bin" / "cilium-agent", extras, links, "cilium-agent",
                           source=f"{cilium_source} daemon"))
    specs.append(ImageSpec("cilium-operator", cilium_tag, cilium_dir / "bin" / "cilium-operator-generic",
                           program="cilium-operator-generic", source=f"{cilium_source} operator"))

    write_if_changed(args.out / CILIUM_CRDS, cilium_crds(cilium_dir / "crds"))

    write_catalog(args.out, specs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
