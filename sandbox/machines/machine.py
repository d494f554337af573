"""One node machine: a copy of the node image booted with systemd-nspawn as a tracked background process.

State in <state>/machines/<name>/: rootfs/ (the machine's root), nspawn.pid, machine.json (image key and
cgroups), console.log (the boot console).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

from . import cgroups, host_limits, image, mounts, network, processes, rootfs
from .config import AGENT_PORT, Node, Sandbox
from .errors import SandboxError

# What containerd and runc need inside the machine (see SUBSTRATE.md): writable /proc/sys and /sys, every
# capability, and the system calls nspawn filters by default.
SYSCALL_FILTER = "@mount @privileged @keyring @clock bpf perf_event_open"
NSPAWN_ENV = {"SYSTEMD_NSPAWN_API_VFS_WRITABLE": "1"}
PKI_IN_MACHINE = "etc/kubenest-agent/pki"
NSPAWN_PROPAGATE = Path("/run/systemd/nspawn/propagate")
KMSG = "/dev/kmsg"


class Machine:
    def __init__(self, sb: Sandbox, node: Node):
        self.sb = sb
        self.node = node
        self.name = node.name
        self.dir = sb.machine_dir(node.name)
        self.root = self.dir / "rootfs"
        self.pid_file = self.dir / "nspawn.pid"
        self.state_file = self.dir / "machine.json"
        self.console = self.dir / "console.log"

    # -- state ---------------------------------------------------------------------------------------------
    def state(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (FileNotFoundError, ValueError):
            return {}

    def save_state(self, **changes) -> None:
        data = {**self.state(), **changes}
        image.write_file(self.state_file, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), 0o644)

    def exists(self) -> bool:
        return (self.root / image.KEY_FILE).is_file()

    def nspawn_pid(self) -> int | None:
        """The pid of this machine's nspawn if it is alive and really is ours (pid files outlive processes)."""
        try:
            pid = int(self.pid_file.read_text())
        except (FileNotFoundError, ValueError):
            pid = None
        if pid is not None and self._is_our_nspawn(pid):
            return pid
        # The pid file is gone or stale: look for our nspawn among all processes before assuming it is dead.
        return next((p for p in processes.all_pids() if self._is_our_nspawn(p)), None)

    def _is_our_nspawn(self, pid: int) -> bool:
        argv = processes.cmdline(pid)
        return bool(argv) and argv[0].endswith("systemd-nspawn") and str(self.root) in argv and processes.alive(pid)

    def leader_pid(self) -> int | None:
        """The machine's PID 1 (its systemd) as the host sees it."""
        pid = self.nspawn_pid()
        if pid is None:
            return None
        for child in processes.descendants(pid):
            nspids = processes.ns_pids(child)
            if len(nspids) > 1 and nspids[-1] == 1:
                return child
        return None

    def running(self) -> bool:
        return self.leader_pid() is not None

    # -- creating ------------------------------------------------------------------------------------------
    def create(self, image_root: Path, key: str) -> None:
        """Copy the node image (a plain copy: containerd's overlay snapshotter cannot sit on an overlay root)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        work = self.dir / "rootfs.build"
        rootfs.remove_tree(work)
        subprocess.run(["cp", "-a", "--reflink=auto", str(image_root), str(work)], check=True)
        work.rename(self.root)
        self.save_state(image_key=key)

    def personalize(self, hosts: str, pki: dict[str, str]) -> bool:
        """Write this machine's identity, address, agent config and certificates; returns whether the agent's
        own files changed (a running agent must then be restarted)."""
        root = self.root
        write = image.write_file
        write(root / "etc/hostname", f"{self.name}\n".encode(), 0o644)
        write(root / "etc/hosts", hosts.encode(), 0o644)
        machine_id = root / "etc/machine-id"
        if not machine_id.read_text().strip():
            write(machine_id, (secrets.token_hex(16) + "\n").encode(), 0o444)
        # Read by kubenest-net.service; host0 is the machine's end of its veth into the bridge. No gateway.
        network_env = f"INTERFACE=host0\nADDRESS={self.sb.node_cidr(self.node)}\n"
        write(root / "etc/kubenest/network.env", network_env.encode(), 0o644)
        changed = write(root / "etc/kubenest-agent/config.toml", agent_config(self.name).encode(), 0o644)
        changed |= write(root / PKI_IN_MACHINE / "ca.crt", Path(pki["ca"]).read_bytes(), 0o644)
        from .pki import reissued_in_machine  # needs cryptography, which `down` does without

        if not reissued_in_machine(root / PKI_IN_MACHINE, self.node, Path(pki["ca"])):
            changed |= write(root / PKI_IN_MACHINE / "node.crt", Path(pki["cert"]).read_bytes(), 0o644)
            changed |= write(root / PKI_IN_MACHINE / "node.key", Path(pki["key"]).read_bytes(), 0o600)
        return changed

    # -- booting -------------------------------------------------------------------------------------------
    def nspawn_argv(self) -> list[str]:
        argv = ["systemd-nspawn", "-D", str(self.root), f"--machine={self.name}", "--register=no", "--keep-unit",
                "-b", "--capability=all", f"--system-call-filter={SYSCALL_FILTER}",
                f"--network-bridge={self.sb.bridge}", "--resolv-conf=off", "--link-journal=no",
                "--console=read-only"]
        if Path(KMSG).exists():
            # The kubelet refuses to start without /dev/kmsg (its OOM watcher reads it); nspawn provides none.
            argv.append(f"--bind-ro={KMSG}")
        return argv

    def start(self) -> int:
        host_limits.raise_limits()
        self.clean_leftovers()
        dirs = cgroups.create(self.sb.cgroup_group, self.name)
        self.save_state(cgroups=dirs, nspawn_argv=self.nspawn_argv())
        with self.console.open("ab") as log:
            log.write(f"\n=== boot {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n".encode())
            log.flush()
            # Own session: the machine outlives this command and no terminal signal reaches it. Joining the
            # machine's cgroups before exec gives nspawn (and so the machine) its own cgroup tree.
            proc = subprocess.Popen(self.nspawn_argv(), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env={**os.environ, **NSPAWN_ENV},
                                    start_new_session=True, preexec_fn=lambda: cgroups.join(dirs))
        self.pid_file.write_text(f"{proc.pid}\n")
        return proc.pid

    def nsenter(self, argv: list[str], timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        leader = self.leader_pid()
        if leader is None:
            raise SandboxError(f"{self.name} is not running")
        proc = subprocess.run(["nsenter", "-t", str(leader), "-m", "-u", "-i", "-n", "-p", "--", *argv],
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise SandboxError(f"{self.name}: {' '.join(argv)} failed (status {proc.returncode}): "
                               f"{(proc.stderr or proc.stdout).strip()}")
        return proc

    def system_state(self) -> str:
        try:
            return self.nsenter(["systemctl", "is-system-running"], timeout=10, check=False).stdout.strip()
        except (SandboxError, subprocess.TimeoutExpired):
            return "unreachable"

    def wait_booted(self, deadline: float) -> None:
        """Wait until systemd inside reports `running`; fail early if nspawn exits or a unit fails."""
        state = "starting"
        while time.monotonic() < deadline:
            if self.nspawn_pid() is None:
                raise SandboxError(f"{self.name}: systemd-nspawn exited during boot:\n{self.console_tail()}")
            state = self.system_state() if self.leader_pid() else "starting"
            if state == "running":
                return
            if state == "degraded":
                failed = self.nsenter(["systemctl", "--failed", "--no-legend", "--plain"], check=False).stdout
                raise SandboxError(f"{self.name}: boot finished with failed units:\n{failed.strip()}")
            time.sleep(0.3)
        raise SandboxError(f"{self.name}: systemd not running in time (state {state!r}):\n{self.console_tail()}")

    def wait_agent(self, client_files: dict[str, str], deadline: float) -> dict:
        error = "no answer yet"
        while time.monotonic() < deadline:
            try:
                return agent_health(self.node.ip, client_files)
            except Exception as exc:  # any failure to connect is retried until the deadline
                error = f"{type(exc).__name__}: {exc}"
            time.sleep(0.3)
        status = self.nsenter(["systemctl", "status", "--no-pager", "-n", "15", "kubenest-agent"], check=False)
        raise SandboxError(f"{self.name}: agent at {self.node.ip}:{AGENT_PORT} not healthy in time ({error}):\n"
                           f"{status.stdout.strip()}")

    def refresh_layer(self, wheelhouse: Path, key: str) -> None:
        """Install the current agent and layer files into the running machine, keeping everything else."""
        image.install_layer(self.root, wheelhouse, lambda argv: self.nsenter(argv, timeout=300) and None)
        self.nsenter(["systemctl", "daemon-reload"])
        self.restart_agent()
        self.save_state(image_key=key)

    def restart_agent(self) -> None:
        self.nsenter(["systemctl", "restart", "kubenest-agent.service"])

    def console_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.console.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no console log)"

    # -- stopping ------------------------------------------------------------------------------------------
    def stop(self, grace: float = 20) -> None:
        """Power the machine off (nspawn turns SIGTERM into a clean shutdown), then kill whatever is left."""
        pid = self.nspawn_pid()
        if pid is not None:
            processes.signal_all([pid], signal.SIGTERM)
            processes.wait_gone([pid], grace)
        self.kill_remains()
        self.clean_leftovers()

    def reboot(self, client_files: dict[str, str], timeout: float = 180, grace: float = 20) -> float:
        """Ask for a clean shutdown, cut the power after `grace` seconds if it has not finished, and boot again on
        the same root: what is on disk stays, /run, the kernel's tables and every process start anew. A host with
        pods rarely finishes in time (its API server and the containers containerd leaves behind take a minute
        or more), so the power cut is what usually happens, as with a machine reset after a hung shutdown.
        Returns the seconds until the agent answered again."""
        started = time.monotonic()
        self.stop(grace)
        self.start()
        deadline = started + timeout
        self.wait_booted(deadline)
        self.wait_agent(client_files, deadline)
        return time.monotonic() - started

    def kill_remains(self, timeout: float = 15) -> None:
        dirs = self.state().get("cgroups", [])
        deadline = time.monotonic() + timeout
        while True:
            pid = self.nspawn_pid()
            pids = cgroups.pids(dirs) | ({pid} if pid else set())
            pids.discard(os.getpid())
            pids = {p for p in pids if processes.alive(p)}
            if not pids:
                return
            if time.monotonic() > deadline:
                raise SandboxError(f"{self.name}: processes survive SIGKILL: {sorted(pids)}")
            processes.kill_group_and(pids, pid)
            processes.wait_gone(pids, 2)

    def clean_leftovers(self) -> None:
        """What a machine that died without shutting down leaves on the host: cgroups, its veth, nspawn's dir."""
        cgroups.remove(self.state().get("cgroups", []))
        if self.state_file.exists():
            self.save_state(cgroups=[])
        network.delete_link(self.node.veth)
        propagate = NSPAWN_PROPAGATE / self.name
        if propagate.is_dir() and not mounts.under(propagate):
            try:
                propagate.rmdir()
            except OSError:
                pass
        self.pid_file.unlink(missing_ok=True)

    def destroy(self) -> None:
        self.stop()
        stuck = mounts.unmount_all(self.dir)
        if stuck:
            raise SandboxError(f"{self.name}: cannot unmount {', '.join(stuck)}")
        rootfs.remove_tree(self.dir)

    def memory(self) -> dict[str, int]:
        return cgroups.memory_bytes(self.state().get("cgroups", []))


def agent_config(name: str) -> str:
    pki = f"/{PKI_IN_MACHINE}"
    return (f'listen = "0.0.0.0:{AGENT_PORT}"\n'
            f'tls_cert = "{pki}/node.crt"\ntls_key = "{pki}/node.key"\nclient_ca = "{pki}/ca.crt"\n'
            'allowed_clients = ["kubenest-controller"]\n'
            f'node_name = "{name}"\n')


def agent_health(ip: str, client_files: dict[str, str]) -> dict:
    from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import connect_direct

    with connect_direct(ip, AGENT_PORT, ca_file=client_files["ca"], cert_file=client_files["cert"],
                        key_file=client_files["key"], open_timeout=3) as client:
        return client.health()
