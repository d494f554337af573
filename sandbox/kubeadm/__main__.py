"""python -m sandbox.kubeadm {up,status}: a host cluster built by upstream kubeadm on the sandbox's machines.

`KUBENEST_HOST=kubeadm make up` runs `up`: bare machines (sshd, containerd, no agent) on the sandbox bridge,
provisioned the way a site provisions nodes for kubeadm (sandbox/kubeadm/provision.py), `kubeadm init` on the
control-plane machine and `kubeadm join` on the workers with every image pulled from the sandbox's registry,
then the agent installed over SSH by playbooks/install_agent.yml. The admin kubeconfig is left at
<state dir>/kubeconfig and the agents' inventory at <state dir>/inventory.yml, as for the other host.
`make down` removes it like the other host.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from sandbox.machines.config import from_env
from sandbox.machines.errors import SandboxError
from sandbox.registry.server import RegistryError

from . import host


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.kubeadm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up_parser = sub.add_parser("up", help="build or converge the kubeadm host cluster")
    up_parser.add_argument("--no-agents", action="store_true", help="leave the agent off the machines")
    sub.add_parser("status", help="say which host the sandbox carries")
    args = parser.parse_args(argv)
    sb = from_env()
    try:
        if args.command == "status":
            print(host.flavour(sb) or "collection-built (or none)")
            return 0
        host.up(sb, agents=not args.no_agents)
        return 0
    except (SandboxError, RegistryError) as exc:
        print(f"sandbox.kubeadm: error: {exc}", file=sys.stderr)
        return 2
    except subprocess.TimeoutExpired as exc:
        print(f"sandbox.kubeadm: error: {exc.cmd[0]} did not finish in {exc.timeout:.0f}s", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
