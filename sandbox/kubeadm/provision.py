"""What a platform team's provisioning puts on a machine before `kubeadm init` or `kubeadm join`.

The machines are the sandbox's bare ones (Debian, sshd, containerd and runc, no agent): this adds what the
upstream packages and a site's node image would — kubeadm, kubelet and kubectl in /usr/bin with the kubelet
unit and kubeadm's drop-in where the packages install them, containerd's configuration with the registry and
its CA, the sysctls kubeadm checks, and the pod network: the CNI bridge plugin on a fixed range per machine,
routed to the other machines by a unit of static routes. None of it comes from the collection's roles.
"""

from __future__ import annotations

import json
from pathlib import Path

from sandbox.machines import image
from sandbox.machines.machine import Machine
from sandbox.registry import NAME as REGISTRY
from sandbox.registry.server import Registry

PROGRAMS = ("kubeadm", "kubelet", "kubectl")
UNIT_DIR = "usr/lib/systemd/system"  # where Debian packages put units; /etc/systemd/system is the admin's
CERTS_DIR = "/etc/containerd/certs.d"
CNI_CONF = "etc/cni/net.d/10-bridge.conflist"
ROUTES_UNIT = "kubeadm-pod-routes.service"

KUBELET_UNIT = """\
[Unit]
Description=kubelet: the Kubernetes node agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target containerd.service

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""

# kubeadm writes the files this names: its flags (kubeadm-flags.env), the configuration and the kubeconfigs.
KUBEADM_DROP_IN = """\
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""

SYSCTL = "net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\n"


def _q(value: str) -> str:
    return json.dumps(value)  # a TOML basic string, whatever it holds


def containerd_config(pause_ref: str) -> str:
    # Version 2, which containerd 2.x reads and migrates on load.
    return "\n".join([
        "version = 2",
        "",
        '[plugins."io.containerd.grpc.v1.cri"]',
        f"  sandbox_image = {_q(pause_ref)}",
        "  # runtimes without CAP_SYS_RESOURCE (nested machines) cannot set negative OOM scores",
        "  restrict_oom_score_adj = true",
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
        '    runtime_type = "io.containerd.runc.v2"',
        '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
        "      SystemdCgroup = false",
        '  [plugins."io.containerd.grpc.v1.cri".registry]',
        f"    config_path = {_q(CERTS_DIR)}",
        '  [plugins."io.containerd.grpc.v1.cri".cni]',
        '    bin_dir = "/usr/lib/cni"',
        '    conf_dir = "/etc/cni/net.d"',
        "",
    ])


def registry_hosts(reg: Registry) -> str:
    return "\n".join([
        f"server = {_q(reg.endpoint)}",
        "",
        f"[host.{_q(reg.endpoint)}]",
        '  capabilities = ["pull", "resolve"]',
        f"  ca = {_q(f'{CERTS_DIR}/{REGISTRY}/ca.crt')}",
        "",
    ])


def cni_conflist(pod_range: str) -> str:
    return json.dumps({
        "cniVersion": "1.0.0",
        "name": "kubeadm-host",
        "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_range}]], "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }, indent=2) + "\n"


def routes_unit(routes: dict[str, str], service_cidr: str) -> str:
    """A oneshot unit routing each other machine's pod range through that machine's address on the bridge, and
    the service range onto the bridge: the machines have no default route (nothing may leave the sandbox), and a
    connection to a Service address needs a route before kube-proxy's rules rewrite it to a pod's."""
    lines = ["[Unit]", "Description=Routes to the pod ranges of the other machines", "After=kubenest-net.service",
             "Requires=kubenest-net.service", "", "[Service]", "Type=oneshot", "RemainAfterExit=yes"]
    lines += [f"ExecStart=/usr/sbin/ip route replace {subnet} via {via}" for subnet, via in sorted(routes.items())]
    lines += [f"ExecStart=/usr/sbin/ip route replace {service_cidr} dev host0"]
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def write_files(machine: Machine, *, bin_dir: Path, reg: Registry, pause_ref: str, pod_range: str,
                routes: dict[str, str], service_cidr: str, resolv_conf: str) -> set[str]:
    """Write everything into the machine's root; returns what must be reloaded for it: "containerd" (its
    configuration; hosts.toml is read on every pull), "kubelet" (program or unit), "routes"."""
    root, write = machine.root, image.write_file
    reload = set()

    def put(what: str | None, path: Path, data: bytes, mode: int = 0o644) -> None:
        if write(path, data, mode) and what:
            reload.add(what)

    for program in PROGRAMS:
        put("kubelet" if program == "kubelet" else None, root / "usr/bin" / program,
            (bin_dir / program).read_bytes(), 0o755)
    put("kubelet", root / UNIT_DIR / "kubelet.service", KUBELET_UNIT.encode())
    put("kubelet", root / UNIT_DIR / "kubelet.service.d/10-kubeadm.conf", KUBEADM_DROP_IN.encode())
    # nspawn mounts the cgroup v1 controllers read-only; the node image's fix, for the kubelet and runc
    for src, dst, mode in image.LAYER_FILES:
        if "cgroup" in dst:
            put(None, root / dst, src.read_bytes(), mode)
    put("containerd", root / "etc/containerd/config.toml", containerd_config(pause_ref).encode())
    put(None, root / CERTS_DIR.lstrip("/") / REGISTRY / "ca.crt", reg.ca_file.read_bytes())
    put(None, root / CERTS_DIR.lstrip("/") / REGISTRY / "hosts.toml", registry_hosts(reg).encode())
    put(None, root / "etc/sysctl.d/90-kubernetes.conf", SYSCTL.encode())
    put(None, root / CNI_CONF, cni_conflist(pod_range).encode())
    put("routes", root / "etc/systemd/system" / ROUTES_UNIT, routes_unit(routes, service_cidr).encode())
    put(None, root / "etc/resolv.conf", resolv_conf.encode())
    return reload


def activate(machine: Machine, reload: set[str]) -> None:
    """Load what write_files put there: sysctls, units, and a restart of only what changed, so converging a
    running cluster leaves its containers alone. The kubelet is enabled, not started: kubeadm starts it once it
    has written its configuration, and restarts it only if it runs already."""
    machine.nsenter(["sysctl", "-q", "-p", "/etc/sysctl.d/90-kubernetes.conf"])
    machine.nsenter(["systemctl", "daemon-reload"])
    machine.nsenter(["systemctl", "enable", "--quiet", "--now", "kubenest-cgroup-rw.service", ROUTES_UNIT])
    machine.nsenter(["systemctl", "enable", "--quiet", "kubelet.service", "containerd.service"])
    if "routes" in reload:
        machine.nsenter(["systemctl", "restart", ROUTES_UNIT])
    verb = "restart" if "containerd" in reload else "start"
    machine.nsenter(["systemctl", verb, "containerd.service"], timeout=120)
    if "kubelet" in reload:
        machine.nsenter(["systemctl", "try-restart", "kubelet.service"], timeout=120)
