"""The kubeadm host's configuration, address plan and provisioning files (no machine: tests/e2e brings it up)."""

from __future__ import annotations

import datetime
import json
import subprocess
import tomllib

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from sandbox.images.build_images import read_versions
from sandbox.kubeadm import config, host, layout, provision
from sandbox.machines.config import REPO_ROOT, from_env
from sandbox.machines.errors import SandboxError
from sandbox.machines.machine import Machine
from sandbox.registry.server import Registry

POD, SERVICE = "198.19.0.0/17", "198.19.128.0/17"


def _init_docs():
    versions = read_versions(REPO_ROOT / "versions.env")
    return versions, config.init_documents(name="kn-cp1", ip="198.18.0.11", versions=versions, pod_cidr=POD,
                                           service_cidr=SERVICE, dns_ip=layout.dns_ip(SERVICE))


def test_each_machine_keeps_its_own_pod_range_and_routes_to_the_others(tmp_path):
    sb = from_env(state_dir=tmp_path, workers=2)
    ranges = layout.pod_ranges(sb, POD)
    assert ranges == {"kn-cp1": "198.19.0.0/24", "kn-w1": "198.19.1.0/24", "kn-w2": "198.19.2.0/24"}
    assert layout.routes_for(sb, ranges, "kn-w1") == {"198.19.0.0/24": "198.18.0.11", "198.19.2.0/24": "198.18.0.13"}
    assert layout.dns_ip(SERVICE) == "198.19.128.10"


def test_a_pod_range_too_small_for_the_machines_is_refused(tmp_path):
    with pytest.raises(SandboxError, match=r"198.19.0.0/23 has no /24 left for kn-w2"):
        layout.pod_ranges(from_env(state_dir=tmp_path, workers=2), "198.19.0.0/23")


def test_every_image_kubeadm_names_comes_from_the_sandbox_registry():
    versions, (init, cluster, kubelet, proxy) = _init_docs()
    assert [d["kind"] for d in (init, cluster, kubelet, proxy)] == [
        "InitConfiguration", "ClusterConfiguration", "KubeletConfiguration", "KubeProxyConfiguration"]
    assert cluster["imageRepository"] == "kubenest.local"
    assert cluster["etcd"]["local"] == {"imageRepository": "kubenest.local", "imageTag": versions["ETCD_VERSION"],
                                        "dataDir": "/var/lib/etcd"}
    assert cluster["dns"]["imageTag"] == versions["COREDNS_VERSION"].removeprefix("v")
    assert cluster["kubernetesVersion"] == versions["KUBERNETES_VERSION"]
    # the bridge plugin's ranges are fixed per machine: no node CIDRs from the controller-manager
    assert "podSubnet" not in cluster["networking"] and proxy["clusterCIDR"] == POD
    assert kubelet["clusterDNS"] == ["198.19.128.10"] and kubelet["failCgroupV1"] is False
    assert init["nodeRegistration"]["kubeletExtraArgs"] == [{"name": "node-ip", "value": "198.18.0.11"}]


def test_documents_are_json_that_yaml_reads_back_the_same():
    _versions, docs = _init_docs()
    text = config.render(docs)
    assert list(yaml.safe_load_all(text)) == docs
    assert [json.loads(part) for part in text.split("\n---\n")] == docs


def test_a_worker_joins_with_the_token_and_the_ca_pin_and_no_taint():
    (join,) = config.join_documents(name="kn-w1", ip="198.18.0.12", endpoint="198.18.0.11:6443",
                                    token="abcdef.0123456789abcdef", ca_hash="sha256:" + "0" * 64)
    assert join["discovery"]["bootstrapToken"] == {"apiServerEndpoint": "198.18.0.11:6443",
                                                   "token": "abcdef.0123456789abcdef",
                                                   "caCertHashes": ["sha256:" + "0" * 64]}
    assert join["nodeRegistration"]["taints"] == [] and join["nodeRegistration"]["name"] == "kn-w1"


def test_the_ca_pin_is_the_one_openssl_computes(tmp_path):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "ca.crt").write_bytes(pem)
    # kubeadm's documented way to compute --discovery-token-ca-cert-hash by hand
    der = subprocess.run(f"openssl x509 -pubkey -noout -in {tmp_path / 'ca.crt'} | openssl pkey -pubin -outform der"
                         " | sha256sum", shell=True, capture_output=True, text=True, check=True).stdout.split()[0]
    assert host.ca_cert_hash(pem) == f"sha256:{der}"


def _catalog(tmp_path, **entries):
    (tmp_path / "images.json").write_text(json.dumps({
        name: {"archive": f"{name}.oci.tar", "manifest_digest": f"sha256:{name}", "ref": ref}
        for name, ref in entries.items()}))
    return tmp_path


def test_the_pause_image_also_answers_to_the_tag_kubeadm_names(tmp_path):
    images = _catalog(tmp_path, pause="kubenest.local/pause:3.10", etcd="kubenest.local/etcd:v3.6.16")
    archives, pause = host.archives_for(images, ["kubenest.local/etcd:v3.6.16", "kubenest.local/pause:3.10.2"])
    assert pause == "kubenest.local/pause:3.10.2"
    assert sorted(ref for a in archives for ref in a.refs) == [
        "kubenest.local/etcd:v3.6.16", "kubenest.local/pause:3.10", "kubenest.local/pause:3.10.2"]
    same = next(a for a in archives if "kubenest.local/pause:3.10" in a.refs)
    assert same.manifest_digest == "sha256:pause"  # one image under two tags


def test_an_image_kubeadm_wants_and_nobody_built_is_named_before_anything_starts(tmp_path):
    images = _catalog(tmp_path, pause="kubenest.local/pause:3.10")
    with pytest.raises(SandboxError, match=r"kubeadm wants kubenest.local/kube-proxy:v1.36.3, which `make images`"):
        host.archives_for(images, ["kubenest.local/kube-proxy:v1.36.3", "kubenest.local/pause:3.10.2"])


def test_containerd_reads_the_registry_and_pause_it_is_given():
    parsed = tomllib.loads(provision.containerd_config('kubenest.local/pause:3.10.2"x'))
    cri = parsed["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == 'kubenest.local/pause:3.10.2"x'
    assert cri["registry"]["config_path"] == "/etc/containerd/certs.d"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    reg = Registry(REPO_ROOT / "unused", "198.18.0.1", 5443)
    hosts = tomllib.loads(provision.registry_hosts(reg))
    assert hosts == {"server": "https://198.18.0.1:5443", "host": {"https://198.18.0.1:5443": {
        "capabilities": ["pull", "resolve"], "ca": "/etc/containerd/certs.d/kubenest.local/ca.crt"}}}


def test_the_pod_network_is_the_bridge_plugin_on_the_machines_range():
    conf = json.loads(provision.cni_conflist("198.19.1.0/24"))
    bridge, portmap = conf["plugins"]
    assert bridge["type"] == "bridge" and bridge["ipam"]["ranges"] == [[{"subnet": "198.19.1.0/24"}]]
    assert portmap["type"] == "portmap"


def test_provisioning_writes_each_file_once(tmp_path):
    sb = from_env(state_dir=tmp_path, workers=1)
    machine = Machine(sb, sb.nodes[1])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in provision.PROGRAMS:
        (bin_dir / program).write_bytes(b"#!/bin/true\n")
    reg = Registry(tmp_path / "registry", sb.host_ip, 5443)
    reg.ca_file.parent.mkdir(parents=True)
    reg.ca_file.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    kwargs = {"bin_dir": bin_dir, "reg": reg, "pause_ref": "kubenest.local/pause:3.10.2", "pod_range": "198.19.1.0/24",
              "routes": {"198.19.0.0/24": "198.18.0.11"}, "service_cidr": SERVICE,
              "resolv_conf": "nameserver 198.18.0.1\n"}
    assert provision.write_files(machine, **kwargs) == {"containerd", "kubelet", "routes"}
    root = machine.root
    assert (root / "usr/bin/kubeadm").stat().st_mode & 0o777 == 0o755
    drop_in = (root / "usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf").read_text()
    assert "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env" in drop_in
    assert (root / "etc/containerd/certs.d/kubenest.local/ca.crt").read_bytes() == reg.ca_file.read_bytes()
    routes = (root / "etc/systemd/system/kubeadm-pod-routes.service").read_text()
    assert "ExecStart=/usr/sbin/ip route replace 198.19.0.0/24 via 198.18.0.11" in routes
    assert f"ExecStart=/usr/sbin/ip route replace {SERVICE} dev host0" in routes
    assert (root / "usr/local/lib/kubenest/cgroup_rw.py").is_file()
    assert provision.write_files(machine, **kwargs) == set()
    kwargs["routes"] = {"198.19.0.0/24": "198.18.0.11", "198.19.2.0/24": "198.18.0.13"}
    assert provision.write_files(machine, **kwargs) == {"routes"}  # a new machine: routes only, containers stay


def test_more_than_one_control_plane_machine_is_refused_before_anything_is_built(tmp_path):
    sb = from_env(state_dir=tmp_path / "state", control_planes=2, workers=1)
    with pytest.raises(SandboxError, match="takes one control-plane machine, not 2"):
        host.up(sb)
    assert not (tmp_path / "state").exists()


def test_the_agent_machines_refuse_a_sandbox_that_carries_the_kubeadm_host(tmp_path):
    from sandbox.machines import cli

    state = tmp_path / "state"
    state.mkdir()
    (state / "host.json").write_text(json.dumps({"flavour": "kubeadm"}))
    sb = from_env(state_dir=state)
    assert host.flavour(sb) == "kubeadm"
    with pytest.raises(SandboxError, match="carries the kubeadm host"):
        cli.up(sb) if cli.os.geteuid() == 0 else pytest.skip("sandbox.machines up needs root")
