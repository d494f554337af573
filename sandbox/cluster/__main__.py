"""python -m sandbox.cluster up: bootstrap the sandbox host cluster on the node machines.

Starts the sandbox's registry on the machines' bridge and pushes the images there (sandbox/registry), writes
group_vars/host_vars next to the machines' inventory (containerd pulls `kubenest.local/...` from that registry),
runs playbooks/bootstrap.yml through the agent (Cilium as the pod network, node subnets from the
controller-manager), routes the nodes' pod subnets from the host over the bridge, and leaves the admin
kubeconfig at <state dir>/kubeconfig.
`python -m sandbox.cluster routes` brings those routes up to date after nodes left and came back.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from sandbox.machines.config import HOST_NODE_IMAGES, NETWORK_VARS, REPO_ROOT, RETURN_VARS, from_env
from sandbox.machines.errors import SandboxError
from sandbox.registry import hosts_vars
from sandbox.registry import of as registry_of
from sandbox.registry.push import archives_of, push
from sandbox.registry.server import RegistryError, start

from . import pod_routes
from .layout import cidrs

CONTROL_PLANE_IMAGES = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "konnectivity-server"]


def _last_line(cmd: list[str]) -> str:
    out = subprocess.run(cmd, cwd=REPO_ROOT, check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def write_vars(sb, bin_dir: str, images_dir: str, registry_hosts: list[dict]) -> None:
    pod_cidr, service_cidr = cidrs()
    group_vars = {
        "kubenest_bin_dir": bin_dir,
        "kubenest_images_dir": images_dir,
        "kubenest_pki_dir": str(sb.state_dir / "cluster-pki"),
        "kubenest_admin_kubeconfig": str(sb.state_dir / "kubeconfig"),
        "kubenest_service_cidr": service_cidr,
        "kubenest_pod_cidr": pod_cidr,
        "kubenest_pod_network": "cilium",
        "kubenest_registry_hosts": registry_hosts,
        # Room for 50 virtual control planes (four pods and an etcd volume each) on one control-plane machine:
        # make bench-tenants. The volumes are directories; their capacity is what their claims may ask for.
        "kubelet_max_pods": 250,
        "local_volumes_count": 56,
        **NETWORK_VARS,
        **RETURN_VARS,
    }
    (sb.state_dir / "group_vars").mkdir(exist_ok=True)
    (sb.state_dir / "host_vars").mkdir(exist_ok=True)
    (sb.state_dir / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
    for node in sb.nodes:
        images = HOST_NODE_IMAGES + (CONTROL_PLANE_IMAGES if node.role == "control_plane" else [])
        (sb.state_dir / "host_vars" / f"{node.name}.yml").write_text(yaml.safe_dump({"kubelet_images": images}))


def routes(_args=None) -> int:
    sb = from_env()
    for subnet, ip in sorted(pod_routes.refresh(sb, cidrs()[0]).items()):
        print(f"{subnet} via {ip}")
    return 0


def up(args) -> int:
    sb = from_env()
    inventory = sb.inventory_path
    if not inventory.is_file():
        raise SandboxError(f"{inventory} is missing: start the machines first (make nodes)")
    bin_dir = _last_line(["bash", "sandbox/k8s/build.sh"])
    _last_line(["bash", "sandbox/cilium/build.sh"])  # the pod network of the host and of tenants
    images_dir = _last_line([sys.executable, "sandbox/images/build_images.py"])
    registry = registry_of(sb)
    pushing = time.monotonic()
    start(registry)
    pushed = push(registry, archives_of(Path(images_dir)))
    print(f"registry {registry.endpoint}: {len(pushed)} image(s) pushed in {time.monotonic() - pushing:.1f}s",
          file=sys.stderr)
    write_vars(sb, bin_dir, images_dir, hosts_vars(registry))
    env = {**os.environ, "ANSIBLE_FORCE_COLOR": os.environ.get("ANSIBLE_FORCE_COLOR", "0")}
    playbook = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                str(REPO_ROOT / "playbooks" / "bootstrap.yml"), *args.ansible_args]
    rc = subprocess.run(playbook, cwd=REPO_ROOT, env=env, check=False).returncode
    if rc != 0:
        return rc
    pod_routes.refresh(sb, cidrs()[0])
    print(f"host cluster ready: kubectl --kubeconfig {sb.state_dir / 'kubeconfig'} get nodes")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.cluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up_parser = sub.add_parser("up", help="bootstrap (or converge) the host cluster on the machines")
    up_parser.add_argument("ansible_args", nargs="*", help="extra ansible-playbook arguments")
    sub.add_parser("routes", help="route the nodes' pod subnets from this host (after nodes came back)")
    args = parser.parse_args(argv)
    try:
        return up(args) if args.command == "up" else routes(args)
    except (SandboxError, RegistryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"error: {' '.join(exc.cmd)} failed with {exc.returncode}:\n{exc.stderr or ''}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
