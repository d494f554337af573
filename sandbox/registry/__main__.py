"""python -m sandbox.registry {up,down,push,status,publish}: the sandbox's registry on its machines' bridge, and
the images in a registry of your own.

`up` starts it (CA and certificate issued on first use) on the bridge's host address, port
KUBENEST_REGISTRY_PORT (5443); `push DIR` pushes the archives of an image directory (`make images`, or the
conformance images) that it lacks; `down` stops it; `status` exits 0 while it answers. `publish REGISTRY`
(`make push-images`) copies every image `make images` builds and the operator image to REGISTRY
(host[:port][/path]), as <REGISTRY>/<name>:<tag>, with skopeo; it needs no sandbox.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from sandbox.machines.config import from_env
from sandbox.machines.errors import SandboxError

from . import of
from .server import RegistryError, answers, start, stop


def _publish(args: argparse.Namespace) -> int:
    from sandbox.images import operator_image
    from sandbox.machines.config import REPO_ROOT

    from .publish import check_registry, publish
    from .push import Archive, archives_of

    registry = check_registry(args.registry)  # before any build
    images_dir = args.images
    if images_dir is None:
        proc = subprocess.run([sys.executable, "sandbox/images/build_images.py"], cwd=REPO_ROOT, capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            raise RegistryError(f"make images failed:\n{proc.stderr[-3000:]}")
        images_dir = Path(proc.stdout.strip().splitlines()[-1])
    operator = operator_image.ensure_archive(from_env().cache_dir)
    operator_ref = f"{operator_image.oci.REGISTRY}/{operator_image.NAME}:{operator_image.version()}"
    t0 = time.monotonic()
    written = publish([*archives_of(images_dir), Archive(operator, (operator_ref,), "")], registry, args.cert_dir)
    for ref in written:
        print(ref)
    print(f"{len(written)} image reference(s) in {registry} ({time.monotonic() - t0:.1f}s)", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.registry", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start the registry (needs the machines' bridge: make nodes)")
    sub.add_parser("down", help="stop the registry")
    sub.add_parser("status", help="exit 0 while the registry answers")
    push_parser = sub.add_parser("push", help="push the image archives of a directory the registry lacks")
    push_parser.add_argument("images_dir", type=Path)
    publish_parser = sub.add_parser("publish", help="copy the collection's images to a registry of your own")
    publish_parser.add_argument("registry",
                                help="host[:port][/path] the images go to, e.g. registry.example.com/kubenest")
    publish_parser.add_argument("--cert-dir", type=Path, default=None,
                                help="skopeo's certificate directory for that registry (its CA as ca.crt)")
    publish_parser.add_argument("--images", type=Path, default=None,
                                help="image directory (default: the one `make images` fills)")
    args = parser.parse_args(argv)
    try:
        if args.command == "publish":
            return _publish(args)
        reg = of(from_env())
        if args.command == "down":
            print("registry stopped" if stop(reg) else "registry was not running")
            return 0
        if args.command == "status":
            ok = answers(reg)
            print(f"registry {reg.endpoint}: {'answers' if ok else 'does not answer'}")
            return 0 if ok else 1
        started = start(reg)
        print(f"registry {reg.endpoint} {'started' if started else 'running'} (CA {reg.ca_file})", file=sys.stderr)
        if args.command == "push":
            from .push import archives_of, push

            t0 = time.monotonic()
            pushed = push(reg, archives_of(args.images_dir))
            print(f"pushed {len(pushed)} image(s) in {time.monotonic() - t0:.1f}s"
                  + (f": {', '.join(pushed)}" if pushed else " (the registry had them all)"), file=sys.stderr)
        return 0
    except (RegistryError, SandboxError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
