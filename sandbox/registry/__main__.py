"""python -m sandbox.registry {up,down,push,status}: the sandbox's registry on its machines' bridge.

`up` starts it (CA and certificate issued on first use) on the bridge's host address, port
KUBENEST_REGISTRY_PORT (5443); `push DIR` pushes the archives of an image directory (`make images`, or the
conformance images) that it lacks; `down` stops it; `status` exits 0 while it answers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sandbox.machines.config import from_env
from sandbox.machines.errors import SandboxError

from . import of
from .server import RegistryError, answers, start, stop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.registry", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start the registry (needs the machines' bridge: make nodes)")
    sub.add_parser("down", help="stop the registry")
    sub.add_parser("status", help="exit 0 while the registry answers")
    push_parser = sub.add_parser("push", help="push the image archives of a directory the registry lacks")
    push_parser.add_argument("images_dir", type=Path)
    args = parser.parse_args(argv)
    try:
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
