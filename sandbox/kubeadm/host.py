"""Bringing up the kubeadm host: machines, registry, provisioning, `kubeadm init`, `kubeadm join`, the agents.

Each step looks at what is there first, so `up` converges: machines that run stay up, a control plane that was
initialised is not initialised again, a node that joined is not joined again. Secrets (the bootstrap token, the
admin kubeconfig) are never printed; the token lives in the machine only for the length of its join.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from sandbox.cluster.layout import cidrs
from sandbox.images.build_images import read_versions
from sandbox.machines import bare, network
from sandbox.machines.cli import existing_machines, hosts_file
from sandbox.machines.config import REPO_ROOT, Sandbox
from sandbox.machines.errors import SandboxError
from sandbox.machines.machine import Machine
from sandbox.registry import NAME as REGISTRY
from sandbox.registry import of as registry_of
from sandbox.registry.push import Archive, archives_of, push
from sandbox.registry.server import Registry, start

from . import config, layout, provision

FLAVOUR = "kubeadm"
INIT_TIMEOUT = 600
JOIN_TIMEOUT = 300
READY_TIMEOUT = 420
CONFIG_IN_MACHINE = "root/kubeadm.json"  # written for one kubeadm command, removed after it


def log(message: str) -> None:
    print(f"[kubeadm] {message}", file=sys.stderr, flush=True)


def flavour_file(sb: Sandbox) -> Path:
    return sb.state_dir / "host.json"


def flavour(sb: Sandbox) -> str | None:
    """Which host the sandbox carries: "kubeadm", or None for the one the collection bootstraps."""
    try:
        return json.loads(flavour_file(sb).read_text()).get("flavour")
    except (FileNotFoundError, ValueError, AttributeError):
        return None


def state_dir(sb: Sandbox) -> Path:
    return sb.state_dir / "kubeadm"


def _last_line(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SandboxError(f"{' '.join(cmd)} failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def ssh_key(sb: Sandbox) -> Path:
    """The key the platform team logs into its machines with; made once per sandbox."""
    key = state_dir(sb) / "ssh" / "id_ed25519"
    if not key.is_file():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kubeadm-host", "-f", str(key)],
                       check=True)
    return key


def wanted_images(kubeadm: Path, init_config: Path) -> list[str]:
    """The images this kubeadm pulls for this configuration, as it lists them itself."""
    proc = subprocess.run([str(kubeadm), "config", "images", "list", "--config", str(init_config)],
                          capture_output=True, text=True, check=False, timeout=60)
    if proc.returncode != 0:
        raise SandboxError(f"kubeadm config images list failed: {proc.stderr.strip()}")
    return [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith(REGISTRY + "/")]


def archives_for(images_dir: Path, wanted: list[str]) -> tuple[list[Archive], str]:
    """The sandbox's archives, with the pause image also under the tag kubeadm names (its release's pause, which
    ours behaves as: it holds the pod's namespaces and reaps); returns them and the pause reference. Any other
    image kubeadm wants that the sandbox did not build stops here, before a machine is touched."""
    archives = archives_of(images_dir)
    have = {ref for a in archives for ref in a.refs}
    pause_ref = next((ref for ref in wanted if ref.startswith(f"{REGISTRY}/pause:")), None)
    missing = [ref for ref in wanted if ref not in have and ref != pause_ref]
    if missing:
        raise SandboxError(f"kubeadm wants {', '.join(missing)}, which `make images` does not build "
                           f"(it built: {', '.join(sorted(have))})")
    if pause_ref is None:
        raise SandboxError(f"kubeadm names no pause image under {REGISTRY}: {wanted}")
    ours = next((a for a in archives if any(r.startswith(f"{REGISTRY}/pause:") for r in a.refs)), None)
    if ours is None:
        raise SandboxError(f"{images_dir} has no pause image")
    if pause_ref not in ours.refs:
        archives = [a for a in archives if a is not ours]
        archives.append(Archive(ours.path, (*ours.refs, pause_ref), ours.manifest_digest))
    return archives, pause_ref


def ca_cert_hash(ca_pem: bytes) -> str:
    """kubeadm's discovery pin: sha256 of the CA's DER SubjectPublicKeyInfo."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    spki = x509.load_pem_x509_certificate(ca_pem).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def _kubeadm(machine: Machine, documents: list[dict], argv: list[str], timeout: float, log_file: Path) -> None:
    """Run one kubeadm command with its configuration in the machine; its output goes to `log_file` (kubeadm
    prints the join command, token included, so it is not echoed here)."""
    path = machine.root / CONFIG_IN_MACHINE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(config.render(documents))
    try:
        proc = machine.nsenter(["kubeadm", *argv, "--config", "/" + CONFIG_IN_MACHINE], timeout=timeout,
                               check=False)
    finally:
        path.unlink(missing_ok=True)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join(line for line in proc.stderr.strip().splitlines()[-15:] if "token" not in line.lower())
        raise SandboxError(f"{machine.name}: kubeadm {argv[0]} failed (status {proc.returncode}); "
                           f"log in {log_file}:\n{tail}")


def kubectl(sb: Sandbox, bin_dir: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir / "kubectl"), "--kubeconfig", str(sb.state_dir / "kubeconfig"), *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def wait_ready(sb: Sandbox, bin_dir: Path, deadline: float) -> None:
    """Every machine a Ready node, every kube-system pod Ready (kubeadm's CoreDNS and kube-proxy included)."""
    names = {n.name for n in sb.nodes}
    problems = ["nothing read yet"]
    while time.monotonic() < deadline:
        nodes = kubectl(sb, bin_dir, "get", "nodes", "-o", "json")
        pods = kubectl(sb, bin_dir, "-n", "kube-system", "get", "pods", "-o", "json")
        if nodes.returncode == 0 and pods.returncode == 0:
            problems = []
            # Ready as `kubectl get nodes` shows it, with a runtime the kubelet can talk to
            ready = {n["metadata"]["name"] for n in json.loads(nodes.stdout)["items"]
                     if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
                     and not n["status"].get("nodeInfo", {}).get("containerRuntimeVersion", "").endswith("Unknown")}
            problems += [f"node {name} not Ready" for name in sorted(names - ready)]
            for pod in json.loads(pods.stdout)["items"]:
                conditions = pod["status"].get("conditions", [])
                if not any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                    problems.append(f"pod {pod['metadata']['name']} {pod['status'].get('phase')}")
            if not problems:
                return
        else:
            problems = [(nodes.stderr or pods.stderr).strip()]
        time.sleep(2)
    raise SandboxError(f"the kubeadm host is not ready after {READY_TIMEOUT}s: {'; '.join(problems)}")


def install_agents(sb: Sandbox, key: Path) -> None:
    """playbooks/install_agent.yml over SSH, as on any machine the collection did not build; then the machines'
    inventory through the agent, as `make nodes` writes it for the other host."""
    from sandbox.machines import image, inventory, pki

    for node in sb.nodes:
        pki.node_files(sb, node)  # the agent CA and the controller's client pair are made with the first one
    client = pki.client_files(sb)
    ssh_inventory = state_dir(sb) / "ssh-inventory.yml"
    ssh_inventory.write_text(yaml.safe_dump({"all": {"hosts": {n.name: {
        "ansible_host": n.ip, "ansible_user": "root", "ansible_connection": "ssh",
        "ansible_ssh_private_key_file": str(key), "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=accept-new "
                                   f"-o UserKnownHostsFile={state_dir(sb) / 'ssh' / 'known_hosts'}",
    } for n in sb.nodes}}}))
    extra = {"kubenest_agent_wheelhouse": str(image.ensure_image(sb)[1]),
             "kubenest_agent_ca_path": str(sb.pki_dir / "ca"), "kubenest_agent_ca_file": client["ca"],
             "kubenest_agent_cert_file": client["cert"], "kubenest_agent_key_file": client["key"]}
    playbook = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(ssh_inventory),
                str(REPO_ROOT / "playbooks" / "install_agent.yml"), "-e", json.dumps(extra)]
    env = {**os.environ, "ANSIBLE_FORCE_COLOR": "0", "KUBENEST_AGENT_CONTROL_DIR": str(state_dir(sb) / "cp")}
    proc = subprocess.run(playbook, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1200,
                          check=False)
    (state_dir(sb) / "install-agent.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SandboxError(f"install_agent.yml failed (status {proc.returncode}); log in "
                           f"{state_dir(sb) / 'install-agent.log'}:\n{proc.stdout[-3000:]}")
    inventory.write(sb)


def up(sb: Sandbox, *, agents: bool = True) -> None:
    started = time.monotonic()
    if flavour(sb) != FLAVOUR and existing_machines(sb):
        raise SandboxError(f"{sb.state_dir} holds the collection-built host's machines: `make down` first")
    versions = read_versions(REPO_ROOT / "versions.env")
    pod_cidr, service_cidr = cidrs()
    dns = layout.dns_ip(service_cidr)
    ranges = layout.pod_ranges(sb, pod_cidr)
    control_planes = [n for n in sb.nodes if n.role == "control_plane"]
    if len(control_planes) != 1:
        raise SandboxError(f"the kubeadm host takes one control-plane machine, not {len(control_planes)}")
    first = control_planes[0]
    init_docs = config.init_documents(name=first.name, ip=first.ip, versions=versions, pod_cidr=pod_cidr,
                                      service_cidr=service_cidr, dns_ip=dns)

    bin_dir = Path(_last_line(["bash", "sandbox/k8s/build.sh"]))
    _last_line(["bash", "sandbox/cilium/build.sh"])  # make images takes it; tenants' pod network
    images_dir = Path(_last_line([sys.executable, "sandbox/images/build_images.py"]))
    state_dir(sb).mkdir(parents=True, exist_ok=True)
    listed = state_dir(sb) / "images-list.json"
    listed.write_text(config.render(init_docs[:2]))
    archives, pause_ref = archives_for(images_dir, wanted_images(bin_dir / "kubeadm", listed))

    flavour_file(sb).write_text(json.dumps({"flavour": FLAVOUR}) + "\n")
    if network.ensure_bridge(sb):
        log(f"bridge {sb.bridge} {sb.host_cidr} ready")
    reg: Registry = registry_of(sb)
    start(reg)
    pushed = push(reg, archives)
    log(f"registry {reg.endpoint}: {len(pushed)} image reference(s) pushed")

    key = ssh_key(sb)
    hosts = hosts_file(sb)
    # Pods' DNS upstream: the host's end of the bridge, where nothing answers; names outside the cluster fail fast.
    resolv = f"nameserver {sb.host_ip}\noptions timeout:1 attempts:1\n"
    machines = {}
    for node in sb.nodes:
        machine = bare.up(sb, node.name, node.ip, key.with_suffix(".pub").read_text(), hosts)
        reload = provision.write_files(machine, bin_dir=bin_dir, reg=reg, pause_ref=pause_ref,
                                       pod_range=ranges[node.name], routes=layout.routes_for(sb, ranges, node.name),
                                       service_cidr=service_cidr, resolv_conf=resolv)
        provision.activate(machine, reload)
        machines[node.name] = machine
        log(f"{node.name} ({node.ip}) provisioned, pod range {ranges[node.name]}")

    cp = machines[first.name]
    admin = cp.root / "etc/kubernetes/admin.conf"
    if not admin.is_file():
        t0 = time.monotonic()
        _kubeadm(cp, init_docs, ["init", "--skip-token-print"], INIT_TIMEOUT, state_dir(sb) / "init.log")
        log(f"kubeadm init on {first.name} took {time.monotonic() - t0:.0f}s")
    kubeconfig = sb.state_dir / "kubeconfig"
    fd = os.open(kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(admin.read_bytes())

    joining = [n for n in sb.nodes if n.role != "control_plane"
               and not (machines[n.name].root / "etc/kubernetes/kubelet.conf").is_file()]
    if joining:
        token = cp.nsenter(["kubeadm", "token", "create", "--ttl", "15m",
                            "--description", "sandbox kubeadm host: joining machines"]).stdout.strip()
        ca_hash = ca_cert_hash((cp.root / "etc/kubernetes/pki/ca.crt").read_bytes())
        try:
            for node in joining:
                t0 = time.monotonic()
                docs = config.join_documents(name=node.name, ip=node.ip, endpoint=f"{first.ip}:{config.API_PORT}",
                                             token=token, ca_hash=ca_hash)
                _kubeadm(machines[node.name], docs, ["join"], JOIN_TIMEOUT, state_dir(sb) / f"join-{node.name}.log")
                log(f"kubeadm join of {node.name} took {time.monotonic() - t0:.0f}s")
        finally:
            cp.nsenter(["kubeadm", "token", "delete", token.split(".")[0]], check=False)
    wait_ready(sb, bin_dir, time.monotonic() + READY_TIMEOUT)
    log(f"every node Ready, kube-system Ready ({time.monotonic() - started:.0f}s so far)")
    if agents:
        t0 = time.monotonic()
        install_agents(sb, key)
        log(f"agents installed over SSH in {time.monotonic() - t0:.0f}s; inventory {sb.inventory_path}")
    print(f"kubeadm host ready in {time.monotonic() - started:.0f}s: kubectl --kubeconfig {kubeconfig} get nodes")
