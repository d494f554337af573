"""``kubenest-operator`` entry point."""

from __future__ import annotations

import argparse
import sys

from . import __version__


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kubenest-operator")
    parser.add_argument("--version", action="version", version=f"kubenest-operator {__version__}")
    parser.add_argument("--kubeconfig", help="kubeconfig of the host cluster (default: in-cluster or ~/.kube/config)")
    parser.parse_args(argv)
    print("kubenest-operator: reconcile handlers are not part of this release yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
