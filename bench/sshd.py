"""A throwaway OpenSSH server on loopback: the baseline the agent is compared against."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


class LoopbackSSHD:
    def __init__(self, root: Path, port: int):
        self.root, self.port = root, port
        self.key = root / "id_ed25519"
        self.proc: subprocess.Popen | None = None

    def start(self) -> LoopbackSSHD:
        self.root.mkdir(parents=True, exist_ok=True)
        for name in ("hostkey", "id_ed25519"):
            if not (self.root / name).exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)], check=True)
        (self.root / "authorized_keys").write_text((self.root / "id_ed25519.pub").read_text())
        config = self.root / "sshd_config"
        config.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {self.root / 'hostkey'}",
            f"PidFile {self.root / 'sshd.pid'}", f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", "StrictModes no", "Subsystem sftp internal-sftp", ""]))
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory sshd insists on
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            probe = subprocess.run(["ssh", *self.client_args(), "-p", str(self.port), "root@127.0.0.1", "true"],
                                   capture_output=True, check=False)
            if probe.returncode == 0:
                return self
            time.sleep(0.2)
        raise RuntimeError(f"sshd on port {self.port} did not accept a login: {probe.stderr.decode()}")

    def client_args(self) -> list[str]:
        return ["-i", str(self.key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR"]

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        # the ControlPersist masters Ansible started
        subprocess.run(["pkill", "-f", f"ControlPath={self.root}"], check=False)
        for _attempt in range(50):
            if subprocess.run(["pgrep", "-f", f"ControlPath={self.root}"], capture_output=True,
                              check=False).returncode:
                break
            time.sleep(0.1)
        os.environ.pop("ANSIBLE_SSH_CONTROL_PATH_DIR", None)
