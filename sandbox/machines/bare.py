"""A machine the project did not set up: Debian with sshd and no agent, to install the agent on over SSH.

Its image is the base rootfs built with openssh-server (cached next to the node base under its own key) plus only
what any machine on the sandbox bridge needs: its static address and a resolv.conf. Each machine gets its own SSH
host keys and the authorized key it is given; it is not part of any cluster and `make nodes` removes it as
unconfigured, `make nodes-down` with the rest.
"""

from __future__ import annotations

import hashlib
import secrets
import subprocess
import time
from pathlib import Path

from . import image, rootfs, runtime
from .config import Node, Sandbox
from .machine import Machine

PACKAGES = (*rootfs.PACKAGES, "openssh-server")
ROLE = "bare"
ENABLE = ("kubenest-net.service", "ssh.service")
KEY_TYPES = ("ed25519", "rsa")


def ensure_image(sb: Sandbox) -> tuple[Path, str]:
    base = rootfs.ensure_base(sb.cache_dir, PACKAGES)
    net_unit = image.FILES / "kubenest-net.service"
    material = net_unit.read_bytes() + Path(__file__).read_bytes() + runtime.key_material()
    key = f"{base.name}-{hashlib.sha256(material).hexdigest()[:12]}"
    root = sb.cache_dir / "bare-image" / key
    if (root / image.KEY_FILE).is_file():
        return root, key
    with rootfs.locked(root.parent / ".lock"):
        if (root / image.KEY_FILE).is_file():
            return root, key
        work = root.with_name(root.name + ".build")
        rootfs.remove_tree(work)
        subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(work)], check=True)
        image.write_file(work / "etc/systemd/system/kubenest-net.service", net_unit.read_bytes(), 0o644)
        # A machine someone else set up comes with a container runtime; the same one the node image has.
        runtime.install(work, runtime.ensure_built(), image.write_file)
        image.write_file(work / "etc/resolv.conf", image.RESOLV_CONF.encode(), 0o644)
        for host_key in (work / "etc/ssh").glob("ssh_host_*"):
            host_key.unlink()  # every machine gets its own
        image.write_file(work / "etc/ssh/sshd_config.d/kubenest.conf",
                         b"PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n", 0o644)
        for verb, units in (("enable", ENABLE), ("disable", image.DISABLE), ("mask", image.MASK)):
            subprocess.run(["systemctl", "--quiet", f"--root={work}", verb, *units], check=True)
        (work / image.KEY_FILE).write_text(key + "\n")
        work.rename(root)
    return root, key


class BareMachine(Machine):
    def prepare(self, hosts: str, authorized_key: str) -> None:
        """Its identity, address, own SSH host keys and the one key allowed to log in as root."""
        root, write = self.root, image.write_file
        write(root / "etc/hostname", f"{self.name}\n".encode(), 0o644)
        write(root / "etc/hosts", hosts.encode(), 0o644)
        if not (root / "etc/machine-id").read_text().strip():
            write(root / "etc/machine-id", (secrets.token_hex(16) + "\n").encode(), 0o444)
        write(root / "etc/kubenest/network.env",
              f"INTERFACE=host0\nADDRESS={self.sb.node_cidr(self.node)}\n".encode(), 0o644)
        for kind in KEY_TYPES:
            path = root / f"etc/ssh/ssh_host_{kind}_key"
            if not path.exists():
                subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", self.name, "-f", str(path)],
                               check=True)
        (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)
        write(root / "root/.ssh/authorized_keys", authorized_key.encode(), 0o600)


def up(sb: Sandbox, name: str, ip: str, authorized_key: str, hosts: str, timeout: float = 120) -> BareMachine:
    """Create (if needed) and boot a bare machine; returns once sshd accepts connections."""
    machine = BareMachine(sb, Node(name, ip, ROLE))
    if not machine.exists():
        root, key = ensure_image(sb)
        machine.create(root, key)
    machine.save_state(ip=ip, role=ROLE)
    machine.prepare(hosts, authorized_key)
    if not machine.running():
        machine.stop(grace=5)
        machine.start()
    deadline = time.monotonic() + timeout
    machine.wait_booted(deadline)
    while machine.nsenter(["systemctl", "is-active", "ssh.service"], check=False).stdout.strip() != "active":
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: sshd not active in time")
        time.sleep(0.3)
    return machine
