"""The images the upstream conformance specs start, assembled here from what sandbox/conformance/build.sh builds.

Each one behaves for the suite as the upstream image does (test/images/<name>/ of the k8s.io/kubernetes module
says what that is). The upstream ones that install Alpine packages are built on Debian here, as no Alpine package
repository can be reached; those whose specs look at Alpine itself are built on Alpine's own minirootfs:

- agnhost (both tags the suite names): the agnhost binary, the tools its Dockerfile installs (dig and nslookup,
  curl, netcat, ip, iperf, bash), CoreDNS as /coredns, porter's certificate, the user and group defined in it;
- kitten and nautilus: agnhost's own files with their page and data file, serving test-webserver, on Alpine's
  minirootfs of the release versions.env pins (the image volume spec reads the image's os-release). Upstream
  they inherit agnhost's Alpine packages too; no spec runs those tools in them;
- busybox (both tags): the upstream release built static, every applet linked in /bin;
- nginx (both tags): Debian's nginx, in the foreground, logging to the container's output;
- glibc-dns-testing: Debian with dnsutils and /coredns; nonroot: Debian as user 1234; nonewprivs: a set-uid
  nnp; sample-apiserver: the k8s.io/sample-apiserver module at the pinned minor; etcd: the etcd this sandbox
  runs; pause: this sandbox's pause.

Every image is named under kubenest.local/e2e-test-images/ with the tags e2e.test lists (`--list-images`), so the
suite finds them through the registry list (KUBE_TEST_REPO_LIST) of `repo_list()`: the names say where they come
from, and nothing pretends to be registry.k8s.io. Archives are cached under
$KUBENEST_CACHE/conformance/<kubernetes version>/images/, each keyed by its inputs; prints that directory last.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from sandbox.images import build_images as oci  # noqa: E402  (the repository root is on the path only now)
from sandbox.machines import rootfs  # noqa: E402

PREFIX = "kubenest.local/e2e-test-images"
# The upstream agnhost and glibc-dns-testing images ship these tools; nginx is the nginx images' server.
PACKAGES = ("bash", "curl", "wget", "dnsutils", "netcat-openbsd", "iproute2", "iperf", "util-linux", "procps",
            "iputils-ping", "ca-certificates", "nginx-light")
SKIP_TOP = frozenset({"dev", "proc", "sys", rootfs.COMPLETE_MARK})  # the runtime mounts these
EMPTIED = ("run", "tmp")  # kept as directories (nginx writes its pid to /run), without the build's leftovers
TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt",
        "var/cache/debconf", "var/lib/apt/lists", "var/log/apt", "usr/share/lintian")
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BUSYBOX_PASSWD = ("root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/bin/false\n"
                  "bin:x:2:2:bin:/bin:/bin/false\nsys:x:3:3:sys:/dev:/bin/false\nsync:x:4:100:sync:/bin:/bin/sync\n"
                  "mail:x:8:8:mail:/var/spool/mail:/bin/false\nwww-data:x:33:33:www-data:/var/www:/bin/false\n"
                  "operator:x:37:37:Operator:/var:/bin/false\nnobody:x:65534:65534:nobody:/home:/bin/false\n")
BUSYBOX_GROUP = ("root:x:0:\ndaemon:x:1:\nbin:x:2:\nsys:x:3:\nadm:x:4:\ntty:x:5:\ndisk:x:6:\nwheel:x:10:root\n"
                 "mail:x:8:\nwww-data:x:33:\noperator:x:37:\nstaff:x:50:\nusers:x:100:\nnogroup:x:65534:\n")


ALPINE_MODULE = "github.com/alpinelinux/docker-alpine"  # Alpine's minirootfs releases, by architecture
DEBIAN, ALPINE = "debian", "alpine"


@dataclass
class Image:
    """One image: a root tree made by `fill(tree)` and its runtime configuration."""

    name: str
    fill: object  # callable(tree: Path) -> None
    inputs: list[Path]  # files whose content decides the archive (with this module and `config`)
    config: dict = field(default_factory=dict)
    base: str = ""  # the shared layer it starts from: DEBIAN, ALPINE or none
    source: str = ""  # what it is built from, for its labels


def read_versions() -> dict[str, str]:
    return oci.read_versions(REPO_ROOT / "versions.env")


def listed_tags(e2e_test: Path) -> dict[str, list[str]]:
    """Tags by image name of the images e2e.test starts from the upstream registries this module replaces."""
    out = subprocess.run([str(e2e_test), "--list-images"], capture_output=True, text=True, check=True).stdout
    tags: dict[str, list[str]] = {}
    for line in out.split():
        if ":" not in line:
            continue
        repo, tag = line.rsplit(":", 1)
        registry, name = repo.rsplit("/", 1) if "/" in repo else ("", repo)
        if registry in ("registry.k8s.io/e2e-test-images", "registry.k8s.io"):
            tags.setdefault(name, []).append(tag)
    return tags


def repo_list() -> dict[str, str]:
    """The suite's registry list (KUBE_TEST_REPO_LIST): every registry of the images built here is PREFIX; the
    invalid one stays invalid (specs that expect a pull to fail)."""
    return {"promoterE2eRegistry": PREFIX, "gcRegistry": PREFIX, "gcEtcdRegistry": PREFIX,
            "invalidRegistry": "invalid.registry.k8s.io/invalid"}


def _write(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(mode)


def _copy(src: Path, dest: Path, mode: int = 0o755) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    dest.chmod(mode)


def _busybox_tree(busybox: Path):
    def fill(tree: Path) -> None:
        _copy(busybox, tree / "bin/busybox")
        applets = subprocess.run([str(busybox), "--list-full"], capture_output=True, text=True,
                                 check=True).stdout.split()
        # Every applet in /bin, as the upstream image has them (specs run /bin/sysctl, say).
        for applet in sorted({Path(path).name for path in applets} - {"busybox"}):
            (tree / "bin" / applet).symlink_to("busybox")
        _write(tree / "etc/passwd", BUSYBOX_PASSWD)
        _write(tree / "etc/group", BUSYBOX_GROUP)
        for directory, mode in (("tmp", 0o1777), ("root", 0o700), ("home", 0o755), ("var/www", 0o755)):
            (tree / directory).mkdir(parents=True, exist_ok=True)
            (tree / directory).chmod(mode)
    return fill


def _agnhost_files(agnhost: Path, coredns: Path, images: Path):
    def fill(tree: Path) -> None:
        _copy(agnhost, tree / "agnhost")
        (tree / "agnhost-2").symlink_to("agnhost")
        _copy(coredns, tree / "coredns")
        (tree / "uploads").mkdir()
        for name in ("localhost.crt", "localhost.key"):
            _copy(images / "agnhost/porter" / name, tree / name, 0o644)
        # The user and group the upstream Dockerfile adds (specs check that images' own users resolve).
        with (tree / "etc/passwd").open("a") as fh:
            fh.write("user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n")
        with (tree / "etc/group").open("a") as fh:
            fh.write("user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n")
        (tree / "home/user-defined-in-image").mkdir(parents=True, exist_ok=True)
        os.chown(tree / "home/user-defined-in-image", 1000, 1000)
    return fill


def _then(*fills):
    def fill(tree: Path) -> None:
        for one in fills:
            one(tree)
    return fill


def _web_page(images: Path, name: str):
    def fill(tree: Path) -> None:
        _copy(images / name / "html" / f"{name}.jpg", tree / f"{name}.jpg", 0o644)
        _copy(images / name / "html/data.json", tree / "data.json", 0o644)
    return fill


def _nginx(tree: Path) -> None:
    # The upstream image logs to the container's output and serves /usr/share/nginx/html.
    logs = tree / "var/log/nginx"
    logs.mkdir(parents=True, exist_ok=True)
    for name, target in (("access.log", "/dev/stdout"), ("error.log", "/dev/stderr")):
        (logs / name).unlink(missing_ok=True)
        (logs / name).symlink_to(target)
    html = tree / "usr/share/nginx/html"
    html.mkdir(parents=True, exist_ok=True)
    _write(html / "index.html", "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>"
                                "<body><h1>Welcome to nginx!</h1></body></html>\n")
    # Debian's default site, replaced (a file in this layer over the base's link: no whiteout needed).
    _write(tree / "etc/nginx/sites-enabled/default",
           "server {\n    listen 80;\n    listen [::]:80;\n    server_name localhost;\n"
           "    location / {\n        root /usr/share/nginx/html;\n        index index.html index.htm;\n    }\n}\n")


def _single(binary: Path, dest: str, mode: int = 0o755):
    def fill(tree: Path) -> None:
        _copy(binary, tree / dest.lstrip("/"), mode)
        _write(tree / "etc/passwd", oci.PASSWD)
        _write(tree / "etc/group", oci.GROUP)
        (tree / "tmp").mkdir(exist_ok=True)
        (tree / "tmp").chmod(0o1777)
    return fill


def specs(bins: Path, k8s_bins: Path, coredns: Path, pause: Path, images: Path, versions: dict) -> list[Image]:
    k8s, busybox_version = versions["KUBERNETES_VERSION"], versions["BUSYBOX_VERSION"]
    agnhost = _agnhost_files(bins / "agnhost", coredns, images)
    agnhost_config = {"Entrypoint": ["/agnhost"], "Cmd": ["pause"]}
    agnhost_inputs = [bins / "agnhost", coredns, images / "agnhost/porter/localhost.crt"]
    return [
        Image("agnhost", agnhost, agnhost_inputs, agnhost_config, base=DEBIAN,
              source=f"k8s.io/kubernetes {k8s} test/images/agnhost"),
        *[Image(name, _then(agnhost, _web_page(images, name)), [*agnhost_inputs, images / name / "html/data.json"],
                {**agnhost_config, "Cmd": ["test-webserver"]}, base=ALPINE,
                source=f"k8s.io/kubernetes {k8s} test/images/{name}") for name in ("kitten", "nautilus")],
        Image("busybox", _busybox_tree(bins / "busybox"), [bins / "busybox"], {"Cmd": ["sh"]},
              source=f"busybox {busybox_version} release source"),
        Image("nginx", _nginx, [], {"Cmd": ["nginx", "-g", "daemon off;"], "StopSignal": "SIGQUIT",
                                    "ExposedPorts": {"80/tcp": {}}}, base=DEBIAN, source="Debian nginx-light"),
        Image("glibc-dns-testing", lambda tree: _copy(coredns, tree / "coredns"), [coredns], {"Cmd": ["bash"]},
              base=DEBIAN, source="Debian dnsutils"),
        Image("nonroot", lambda tree: None, [], {"User": "1234", "Cmd": ["bash"]}, base=DEBIAN,
              source=f"k8s.io/kubernetes {k8s} test/images/nonroot"),
        Image("nonewprivs", lambda tree: _copy(bins / "nnp", tree / "usr/local/bin/nnp", 0o4755), [bins / "nnp"],
              {"Cmd": ["nnp"]}, base=DEBIAN, source=f"k8s.io/kubernetes {k8s} test/images/nonewprivs"),
        Image("sample-apiserver", _single(bins / "sample-apiserver", "/sample-apiserver"),
              [bins / "sample-apiserver"], {"Entrypoint": ["/sample-apiserver"]},
              source=f"k8s.io/sample-apiserver v0.{k8s.removeprefix('v1.')}"),
        Image("etcd", _single(k8s_bins / "etcd", "/usr/local/bin/etcd"), [k8s_bins / "etcd"],
              {"Entrypoint": ["/usr/local/bin/etcd"]}, source=f"go.etcd.io/etcd {versions['ETCD_VERSION']}"),
        Image("pause", _single(pause, "/pause"), [pause], {"Entrypoint": ["/pause"]},
              source="sandbox/images/pause"),
    ]


def image_config(image: Image, tag: str, diff_ids: list[str]) -> dict:
    config = {"Env": [PATH_ENV], "WorkingDir": "/", **image.config,
              "Labels": {"org.opencontainers.image.version": tag, "org.opencontainers.image.title": image.name,
                         "org.opencontainers.image.source": image.source}}
    return {"created": oci.EPOCH, "architecture": "amd64", "os": "linux", "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created": oci.EPOCH, "created_by": f"sandbox/conformance/images.py {image.name}"}
                        for _diff_id in diff_ids]}


def input_key(image: Image, refs: list[str], base_layer: dict | None) -> str:
    return hashlib.sha256(oci.canonical_json({
        "builder": oci.sha256_file(Path(__file__)), "oci": oci.sha256_file(Path(oci.__file__)),
        "inputs": sorted([str(path.name), oci.sha256_file(path)] for path in image.inputs),
        "config": image.config, "refs": refs, "base": base_layer["digest"] if base_layer else None,
        "source": image.source,
    })).hexdigest()


def ensure_alpine(cache: Path, versions: dict) -> Path:
    """Alpine's minirootfs of the pinned release, unpacked. Alpine publishes it in its docker-alpine repository,
    which the Go module proxy serves (the go command checks the download against the checksum database; this
    against the sha512 versions.env pins)."""
    version = versions["ALPINE_VERSION"]
    root = cache / "rootfs" / f"alpine-minirootfs-{version}"
    if (root / rootfs.COMPLETE_MARK).is_file():
        return root
    with rootfs.locked(root.with_name(".lock")):
        if (root / rootfs.COMPLETE_MARK).is_file():
            return root
        module = f"{ALPINE_MODULE}@{versions['ALPINE_MODULE_VERSION']}"
        print(f"alpine: minirootfs {version} from the module {module}", file=sys.stderr)
        proc = subprocess.run(["go", "mod", "download", "-json", module], cwd=cache, capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            sys.exit(f"error: cannot download {module}: {(proc.stdout + proc.stderr).strip()[-800:]}")
        tarball = Path(json.loads(proc.stdout)["Dir"]) / "x86_64" / f"alpine-minirootfs-{version}-x86_64.tar.gz"
        if not tarball.is_file():
            sys.exit(f"error: {module} has no {tarball.name}: ALPINE_VERSION and ALPINE_MODULE_VERSION disagree")
        digest = hashlib.sha512(tarball.read_bytes()).hexdigest()
        if digest != versions["ALPINE_MINIROOTFS_SHA512"]:
            sys.exit(f"error: {tarball.name} has sha512 {digest}, not the one versions.env pins")
        work = root.with_name(root.name + ".build")
        rootfs.remove_tree(work)
        work.mkdir(parents=True)
        subprocess.run(["tar", "-xzf", str(tarball), "--numeric-owner", "-C", str(work)], check=True)
        (work / rootfs.COMPLETE_MARK).write_text(f"{version}\n")
        rootfs.remove_tree(root)
        work.rename(root)
    return root


def ensure_base_layer(kind: str, base: Path, out: Path) -> dict:
    """A base rootfs as one layer, shared by every image built on it: a node unpacks it once."""
    trim, emptied = (TRIM, EMPTIED) if kind == DEBIAN else ((), ())
    key = hashlib.sha256(oci.canonical_json({"base": base.name, "trim": trim, "emptied": emptied,
                                             "skip": sorted(SKIP_TOP), "oci": oci.sha256_file(Path(oci.__file__))}
                                            )).hexdigest()[:16]
    layer_file, entry_file = out / f"base-{kind}-{key}.layer", out / f"base-{kind}-{key}.layer.json"
    if layer_file.is_file() and entry_file.is_file():
        return {**json.loads(entry_file.read_text()), "path": str(layer_file)}
    for old in out.glob("base-*.layer*"):  # this kind's older layers, and those named before kinds were
        if old.name.startswith(f"base-{kind}-") or re.fullmatch(r"base-[0-9a-f]{16}\.layer(\.json)?", old.name):
            old.unlink()
    print(f"base layer: {base.name}", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=out) as scratch_dir:
        tree = Path(scratch_dir) / "root"
        subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(tree)], check=True)
        for trimmed in trim:
            rootfs.remove_tree(tree / trimmed)
        for directory in emptied:
            for leftover in (tree / directory).iterdir():
                rootfs.remove_tree(leftover)
        blob, diff_id = oci.write_tree_layer(tree, Path(scratch_dir) / "layer", skip_top=SKIP_TOP)
        (Path(scratch_dir) / "layer").replace(layer_file)
        rootfs.remove_tree(tree)
    entry = {"digest": blob.digest, "size": blob.size, "diff_id": diff_id}
    entry_file.write_text(json.dumps(entry, indent=2, sort_keys=True) + "\n")
    return {**entry, "path": str(layer_file)}


def ensure_image(image: Image, tags: list[str], bases: dict[str, tuple[Path, dict]], out: Path) -> dict:
    refs = [f"{PREFIX}/{image.name}:{tag}" for tag in tags]
    archive = out / f"{image.name}.oci.tar"
    base, base_layer = bases[image.base] if image.base else (None, None)
    key = input_key(image, refs, base_layer)
    entry_file = out / f"{image.name}.oci.tar.json"
    if archive.is_file() and entry_file.is_file():
        entry = json.loads(entry_file.read_text())
        if entry.get("input_key") == key:
            print(f"{image.name}: cached", file=sys.stderr)
            return entry
    print(f"{image.name}: building {archive.name} ({', '.join(refs)})", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=out) as scratch_dir:
        scratch = Path(scratch_dir)
        tree = scratch / "root"
        tree.mkdir()
        layers, diff_ids = [], []
        if base is not None:
            layers.append((oci.Blob(base_layer["digest"], base_layer["size"]), Path(base_layer["path"])))
            diff_ids.append(base_layer["diff_id"])
            # what the image's own layer changes of the base starts as the base's
            for name in ("etc/passwd", "etc/group"):
                _copy(base / name, tree / name, 0o644)
        image.fill(tree)
        layer, diff_id = oci.write_tree_layer(tree, scratch / "layer")
        layers.append((layer, scratch / "layer"))
        diff_ids.append(diff_id)
        config = oci.canonical_json(image_config(image, tags[-1], diff_ids))
        manifest = oci.write_layout(archive, refs[0], config, layers, also=refs[1:])
    entry = {"name": image.name, "refs": refs, "archive": archive.name, "manifest_digest": manifest.digest,
             "archive_size": archive.stat().st_size, "source": image.source, "input_key": key}
    entry_file.write_text(json.dumps(entry, indent=2, sort_keys=True) + "\n")
    return entry


def main(argv: list[str] | None = None) -> int:
    versions = read_versions()
    cache = Path(os.environ.get("KUBENEST_CACHE") or Path.home() / ".cache" / "kubenest")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--bin-dir", type=Path, required=True, help="what sandbox/conformance/build.sh printed")
    parser.add_argument("--out", type=Path, default=cache / "conformance" / versions["KUBERNETES_VERSION"] / "images")
    args = parser.parse_args(argv)
    k8s_bins = oci.default_bin_dir(cache, versions)
    component_images = cache / "images" / versions["KUBERNETES_VERSION"]
    coredns, pause = component_images / "coredns-bin/coredns", component_images / "pause-bin/pause"
    for needed, how in ((k8s_bins / "etcd", "make k8s"), (coredns, "make images"), (pause, "make images"),
                        (args.bin_dir / "e2e.test", "sandbox/conformance/build.sh")):
        if not needed.is_file():
            sys.exit(f"error: {needed} is missing; run `{how}` first")
    tags = listed_tags(args.bin_dir / "e2e.test")
    images_src = Path(subprocess.run(
        ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()) \
        / f"k8s.io/kubernetes@{versions['KUBERNETES_VERSION']}" / "test/images"
    wanted = specs(args.bin_dir, k8s_bins, coredns, pause, images_src, versions)
    unlisted = [image.name for image in wanted if image.name not in tags]
    if unlisted:
        sys.exit(f"error: e2e.test lists no image named {unlisted}; the suite changed, update {__file__}")
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        debian, alpine = rootfs.ensure_base(cache, PACKAGES), ensure_alpine(cache, versions)
        bases = {kind: (tree, ensure_base_layer(kind, tree, args.out))
                 for kind, tree in ((DEBIAN, debian), (ALPINE, alpine))}
        catalog = {image.name: ensure_image(image, sorted(tags[image.name]), bases, args.out) for image in wanted}
        oci.write_if_changed(args.out / "images.json", json.dumps(catalog, indent=2, sort_keys=True) + "\n")
        oci.write_if_changed(args.out / "repo-list.yaml", json.dumps(repo_list(), indent=2, sort_keys=True) + "\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
