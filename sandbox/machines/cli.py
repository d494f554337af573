"""python -m sandbox.machines {up,down,status,run,reboot}: the sandbox's node machines.

`up` is idempotent: it builds what is missing, boots machines that are not running, refreshes the agent in
running machines whose image is out of date, and leaves everything else alone.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from . import cgroups, image, mounts, network, processes, rootfs
from .config import Node, Sandbox, from_env
from .errors import SandboxError
from .machine import Machine, agent_health

BOOT_TIMEOUT = 180
REQUIRED_COMMANDS = {"systemd-nspawn": "systemd-container", "nsenter": "util-linux", "ip": "iproute2",
                     "systemctl": "systemd"}


def log(message: str) -> None:
    rootfs.log(message)


@contextmanager
def state_lock(sb: Sandbox):
    sb.state_dir.mkdir(parents=True, exist_ok=True)
    with (sb.state_dir / ".nodes.lock").open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SandboxError(f"another `sandbox.machines` command is working on {sb.state_dir}") from None
        yield


def check_host() -> None:
    if os.geteuid() != 0:
        raise SandboxError("node machines need root (systemd-nspawn, bridges, cgroups)")
    missing = [f"{cmd} (Debian package {pkg})" for cmd, pkg in REQUIRED_COMMANDS.items() if not shutil.which(cmd)]
    if missing:
        raise SandboxError(f"missing commands: {', '.join(missing)}")


def existing_machines(sb: Sandbox) -> list[Machine]:
    """Every machine with a directory in the state dir, configured or not."""
    configured = {n.name: n for n in sb.nodes}
    found = []
    if sb.machines_dir.is_dir():
        for directory in sorted(p for p in sb.machines_dir.iterdir() if p.is_dir()):
            node = configured.get(directory.name)
            if node is None:
                state = Machine(sb, Node(directory.name, "", "")).state()
                node = Node(directory.name, state.get("ip", ""), state.get("role", ""))
            found.append(Machine(sb, node))
    return found


def check_settings(sb: Sandbox) -> None:
    try:
        saved = json.loads(sb.settings_path.read_text())
    except (FileNotFoundError, ValueError):
        return
    if saved != sb.settings() and existing_machines(sb):
        diff = ", ".join(f"{k} {saved.get(k)!r} -> {v!r}" for k, v in sb.settings().items() if saved.get(k) != v)
        raise SandboxError(f"the running sandbox uses other settings ({diff}); run `make nodes-down` first")


def hosts_file(sb: Sandbox) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{n.ip}\t{n.name}" for n in sb.nodes]
    return "\n".join(lines) + "\n"


def build_image(sb: Sandbox) -> int:
    check_host()
    print(image.ensure_image(sb)[0])
    return 0


def build_bare_image(sb: Sandbox) -> int:
    from . import bare

    check_host()
    print(bare.ensure_image(sb)[0])
    return 0


def up(sb: Sandbox) -> int:
    from . import inventory, pki  # need the venv (PyYAML, cryptography); `down` works with any python3

    check_host()
    started = time.monotonic()
    with state_lock(sb):
        check_settings(sb)
        if (sb.state_dir / "host.json").is_file():  # written by sandbox.kubeadm, whose machines are not these
            raise SandboxError(f"{sb.state_dir} carries the kubeadm host (KUBENEST_HOST=kubeadm make up): "
                               "`make down` first")
        image_root, wheelhouse, key = image.ensure_image(sb)
        image.write_file(sb.settings_path, (json.dumps(sb.settings(), indent=2) + "\n").encode(), 0o644)
        if network.ensure_bridge(sb):
            log(f"bridge {sb.bridge} {sb.host_cidr} ready")
        wanted = {n.name for n in sb.nodes}
        for extra in (m for m in existing_machines(sb) if m.name not in wanted):
            log(f"removing {extra.name} (no longer configured)")
            extra.destroy()
        client = pki.client_files(sb)
        hosts = hosts_file(sb)
        machines = [Machine(sb, node) for node in sb.nodes]
        booting, restart = [], []
        for m in machines:
            if not m.exists():
                t0 = time.monotonic()
                m.create(image_root, key)
                log(f"created {m.name} ({m.node.ip}) in {time.monotonic() - t0:.1f}s")
            m.save_state(ip=m.node.ip, role=m.node.role)
            agent_changed = m.personalize(hosts, pki.node_files(sb, m.node))
            if not m.running():
                # Whatever a machine that died half-way left (e.g. processes whose nspawn was killed) goes first.
                m.stop(grace=5)
                log(f"booting {m.name}")
                m.start()
                booting.append(m)
            else:
                if agent_changed:
                    restart.append(m)
                booted_with = m.state().get("nspawn_argv")
                if booted_with and booted_with != m.nspawn_argv():
                    # Not rebooted behind anyone's back: a running machine may carry a cluster.
                    log(f"warning: {m.name} was booted with other nspawn options; `make nodes-down` and "
                        "`make nodes` to apply them")
        boot_started = time.monotonic()
        deadline = boot_started + BOOT_TIMEOUT
        for m in booting:
            m.wait_booted(deadline)
        if booting:
            log(f"systemd running in all booted machines after {time.monotonic() - boot_started:.1f}s")
        refreshed = []
        for m in machines:
            if m.state().get("image_key") != key:
                log(f"{m.name}: installing the current agent in place (image {key})")
                m.refresh_layer(wheelhouse, key)
                refreshed.append(m.name)
            elif m in restart:
                log(f"{m.name}: agent config changed, restarting the agent")
                m.restart_agent()
                refreshed.append(m.name)
        for m in machines:
            health = m.wait_agent(client, time.monotonic() + 60)
            print(f"{m.name}\t{m.node.ip}\t{m.node.role}\tagent {health.get('version', '?')} ok")
        if inventory.write(sb):
            log(f"inventory written: {sb.inventory_path}")
        print(f"inventory: {sb.inventory_path}")
        changes = [f"booted {', '.join(m.name for m in booting)}"] if booting else ["all machines were running"]
        changes += [f"updated the agent on {', '.join(refreshed)}"] if refreshed else []
        log(f"nodes ready in {time.monotonic() - started:.1f}s ({'; '.join(changes)})")
    return 0


def _kill_orphans(sb: Sandbox) -> None:
    """Machines whose state was lost: nspawn processes on our rootfs paths and cgroups of our group."""
    marker = str(sb.machines_dir) + "/"
    for pid in processes.all_pids():
        argv = processes.cmdline(pid)
        if argv and argv[0].endswith("systemd-nspawn") and any(marker in a for a in argv):
            log(f"killing stray systemd-nspawn {pid}")
            processes.kill_group_and([pid, *processes.descendants(pid)], None)
    groups = cgroups.find_groups(sb.cgroup_group)
    deadline = time.monotonic() + 15
    while (pids := cgroups.pids(groups) - {os.getpid()}) and time.monotonic() < deadline:
        processes.signal_all(pids, signal.SIGKILL)
        processes.wait_gone(pids, 2)
    for group in (g for g in groups if Path(g).is_dir()):
        cgroups.remove([str(p) for p in Path(group).iterdir() if p.is_dir()])
        try:
            os.rmdir(group)
        except OSError:
            pass


def down(sb: Sandbox) -> int:
    check_host()
    started = time.monotonic()
    with state_lock(sb):
        try:
            saved = json.loads(sb.settings_path.read_text())
        except (FileNotFoundError, ValueError):
            saved = {}
        machines = existing_machines(sb)
        for m in machines:  # power off all at once, then wait for each
            pid = m.nspawn_pid()
            if pid:
                processes.signal_all([pid], signal.SIGTERM)
        for m in machines:
            m.stop()
        _kill_orphans(sb)  # before any rootfs goes away: nothing may still run on it
        for m in machines:
            m.destroy()
            log(f"removed {m.name}")
        for bridge in sorted({sb.bridge, saved.get("bridge", sb.bridge)}):
            if network.delete_link(bridge):
                log(f"removed bridge {bridge}")
        stuck = mounts.unmount_all(sb.state_dir)
        if stuck:
            raise SandboxError(f"cannot unmount {', '.join(stuck)}")
        for path in (sb.machines_dir, sb.pki_dir, sb.inventory_path, sb.settings_path):
            rootfs.remove_tree(path)
        (sb.state_dir / ".nodes.lock").unlink(missing_ok=True)
    try:
        sb.state_dir.rmdir()  # only if nothing else keeps state there
    except OSError:
        pass
    log(f"nodes removed in {time.monotonic() - started:.1f}s")
    return 0


def _rss_kib(pids) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def status(sb: Sandbox, as_json: bool) -> int:
    from . import pki

    rows = []
    client = pki.client_files(sb)
    for m in existing_machines(sb):
        running = m.running()
        row = {"name": m.name, "ip": m.node.ip, "role": m.node.role, "running": running,
               "systemd": m.system_state() if running else "-", "agent": "-"}
        if running:
            try:
                agent_health(m.node.ip, client)
                row["agent"] = "ok"
            except Exception as exc:  # report, do not fail: this is a status view
                row["agent"] = f"error: {exc}"
            mem = m.memory()
            row["memory_mib"] = round(mem.get("usage", 0) / 2**20, 1)
            row["memory_rss_mib"] = round(mem.get("rss", 0) / 2**20, 1)
            row["processes_rss_mib"] = round(_rss_kib(cgroups.pids(m.state().get("cgroups", []))) / 1024, 1)
        rows.append(row)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no machines")
        return 0
    for r in rows:
        mem = (f"cgroup {r['memory_mib']} MiB (rss {r['memory_rss_mib']}), process RSS {r['processes_rss_mib']} MiB"
               if r["running"] else "")
        print(f"{r['name']}\t{r['ip']}\t{r['role']}\t{'running' if r['running'] else 'stopped'}\t"
              f"systemd {r['systemd']}\tagent {r['agent']}\t{mem}")
    return 0


def run(sb: Sandbox, name: str, argv: list[str]) -> int:
    machine = next((m for m in existing_machines(sb) if m.name == name), None)
    if machine is None or not machine.running():
        raise SandboxError(f"no running machine {name!r}")
    leader = machine.leader_pid()
    os.execvp("nsenter", ["nsenter", "-t", str(leader), "-m", "-u", "-i", "-n", "-p", "--", *(argv or ["bash"])])


def reboot(sb: Sandbox, name: str) -> int:
    from . import pki

    machine = next((m for m in existing_machines(sb) if m.name == name), None)
    if machine is None or not machine.running():
        raise SandboxError(f"no running machine {name!r}")
    with state_lock(sb):
        seconds = machine.reboot(pki.client_files(sb), BOOT_TIMEOUT)
    log(f"{name} rebooted; its agent answered after {seconds:.1f}s")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.machines", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state-dir", help="state directory (default: <repo>/.sandbox or $KUBENEST_SANDBOX_DIR)")
    parser.add_argument("--bridge", help="bridge name (default knbr0 or $KUBENEST_BRIDGE)")
    parser.add_argument("--cidr", help="node range (default 198.18.0.0/24 or $KUBENEST_NODE_CIDR)")
    parser.add_argument("--prefix", help="machine name prefix (default kn or $KUBENEST_NODE_PREFIX)")
    parser.add_argument("--control-planes", type=int, help="control-plane machines (default 1)")
    parser.add_argument("--workers", type=int, help="worker machines (default 3)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="build, create and boot the machines (idempotent)")
    sub.add_parser("image", help="build (or reuse) the node image the machines are copied from; prints its path")
    sub.add_parser("bare-image", help="build (or reuse) the image of a machine without the agent (sshd only)")
    sub.add_parser("down", help="remove machines, bridge, processes, mounts and state")
    st = sub.add_parser("status", help="machines, their systemd and agent state and memory")
    st.add_argument("--json", action="store_true")
    rn = sub.add_parser("run", help="run a command in a machine (default: a shell)")
    rn.add_argument("name")
    rn.add_argument("argv", nargs=argparse.REMAINDER)
    rb = sub.add_parser("reboot", help="shut a machine down (power cut after 20 s), boot it again on the same disk")
    rb.add_argument("name")
    args = parser.parse_args(argv)
    try:
        sb = from_env(state_dir=args.state_dir, bridge=args.bridge, cidr=args.cidr, prefix=args.prefix,
                      control_planes=args.control_planes, workers=args.workers)
        if args.command == "up":
            return up(sb)
        if args.command == "down":
            return down(sb)
        if args.command == "image":
            return build_image(sb)
        if args.command == "bare-image":
            return build_bare_image(sb)
        if args.command == "status":
            return status(sb, args.json)
        if args.command == "reboot":
            return reboot(sb, args.name)
        return run(sb, args.name, args.argv[1:] if args.argv[:1] == ["--"] else args.argv)
    except SandboxError as exc:
        print(f"sandbox.machines: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
