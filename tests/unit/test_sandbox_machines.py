"""sandbox.machines without machines: settings validation, mirror discovery, inventory and image inputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sandbox.machines import aptsources, image, inventory, network, rootfs, runtime
from sandbox.machines.config import REPO_ROOT, Sandbox
from sandbox.machines.errors import SandboxError


def sandbox(tmp_path, **kw) -> Sandbox:
    return Sandbox(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache", **kw)


def test_default_layout(tmp_path):
    sb = sandbox(tmp_path)
    assert [(n.name, n.ip, n.role) for n in sb.nodes] == [
        ("kn-cp1", "198.18.0.11", "control_plane"), ("kn-w1", "198.18.0.12", "workers"),
        ("kn-w2", "198.18.0.13", "workers"), ("kn-w3", "198.18.0.14", "workers")]
    assert sb.host_cidr == "198.18.0.1/24"
    assert sb.nodes[0].veth == "vb-kn-cp1"


@pytest.mark.parametrize(("kw", "message"), [
    ({"cidr": "198.18.0.0/33"}, "bad node CIDR"),
    ({"cidr": "198.18.0.1/24"}, "host bits set"),
    ({"cidr": "fd00::/64"}, "must be IPv4"),
    ({"cidr": "198.18.0.0/28", "workers": 4}, "5 nodes do not fit in 198.18.0.0/28: it has room for 4"),
    ({"cidr": "198.18.0.0/30"}, "room for 0"),
    ({"bridge": "a-much-too-long-name"}, "not a valid interface name"),
    ({"workers": -1}, "must not be negative"),
    ({"control_planes": 0}, "at least one control-plane"),
    ({"prefix": "Upper"}, "machine name 'Upper-cp1' is invalid"),
])
def test_bad_settings_are_refused_clearly(tmp_path, kw, message):
    with pytest.raises(SandboxError, match=message):
        sandbox(tmp_path, **kw)


def test_cli_reports_bad_input_without_a_traceback():
    proc = subprocess.run([sys.executable, "-m", "sandbox.machines", "--cidr", "10.0.0.0/33", "up"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("sandbox.machines: error: bad node CIDR '10.0.0.0/33'")


def test_mirror_comes_from_the_hosts_apt_sources(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBENEST_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# deb http://ignored.invalid/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://one.invalid/debian bookworm-updates main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://two.invalid/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb\nURIs: http://sec.invalid/debian-security\nSuites: bookworm-security\nComponents: main\n")
    (tmp_path / "sources.list.d" / "other.list.disabled").write_text("deb http://off.invalid/debian bookworm main\n")
    source = aptsources.mirror_for("bookworm", tmp_path)
    assert source.uri == "http://two.invalid/debian"
    assert source.signed_by == "/usr/share/keyrings/debian-archive-keyring.gpg"
    assert aptsources.host_sources(tmp_path)[0].signed_by == "/k.gpg"
    with pytest.raises(SandboxError, match="no apt source for 'trixie'"):
        aptsources.mirror_for("trixie", tmp_path)
    monkeypatch.setenv("KUBENEST_DEBIAN_MIRROR", "http://override.invalid/debian")
    assert aptsources.mirror_for("trixie", tmp_path).uri == "http://override.invalid/debian"


def test_missing_debootstrap_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(rootfs.shutil, "which", lambda _name: None)
    with pytest.raises(SandboxError, match="debootstrap not found"):
        rootfs.ensure_base(tmp_path)


def test_base_rootfs_key_depends_on_the_package_list_only():
    assert rootfs.cache_key() == rootfs.cache_key(tuple(reversed(rootfs.PACKAGES)))
    assert rootfs.cache_key() != rootfs.cache_key((*rootfs.PACKAGES, "vim"))


def test_image_key_is_stable_and_includes_the_base(tmp_path):
    base = tmp_path / "bookworm-x"
    key = image.image_key(base)
    assert key == image.image_key(base)
    assert key != image.image_key(tmp_path / "bookworm-y")


def test_the_runtime_pins_key_the_image_and_a_missing_pin_is_named(tmp_path, monkeypatch):
    key = image.image_key(tmp_path / "bookworm-x")
    env = tmp_path / "versions.env"
    env.write_text("CONTAINERD_VERSION=v9.9.9\nRUNC_VERSION=v1.5.3\n")
    pinned = runtime.versions
    monkeypatch.setattr(runtime, "versions", lambda: pinned(env))
    assert image.image_key(tmp_path / "bookworm-x") != key
    env.write_text("CONTAINERD_VERSION=v9.9.9\n")
    with pytest.raises(SandboxError, match="does not pin RUNC_VERSION"):
        runtime.key_material()


def test_the_runtime_goes_where_systemd_s_path_finds_it_first(tmp_path):
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    for program, _dst in runtime.PROGRAMS:
        (bin_dir / program).write_bytes(program.encode())
    runtime.install(root, bin_dir, image.write_file)
    assert (root / "usr/local/sbin/runc").read_bytes() == b"runc"
    assert (root / "usr/local/bin/containerd-shim-runc-v2").stat().st_mode & 0o777 == 0o755
    unit = (root / runtime.UNIT_PATH).read_text()
    assert "ExecStart=/usr/local/bin/containerd\n" in unit and "Delegate=yes" in unit
    assert "containerd" not in rootfs.PACKAGES and "runc" not in rootfs.PACKAGES


def test_inventory_groups_and_connection(tmp_path):
    sb = sandbox(tmp_path, workers=2)
    data = yaml.safe_load(inventory.render(sb))
    groups = data["all"]["children"]
    assert list(groups) == ["control_plane", "workers"]
    assert list(groups["workers"]["hosts"]) == ["kn-w1", "kn-w2"]
    cp1 = groups["control_plane"]["hosts"]["kn-cp1"]
    assert cp1["ansible_host"] == "198.18.0.11"
    assert cp1["ansible_connection"] == "kosmos.kubenest.nodeagent"
    assert cp1["kubenest_agent_cert_file"] == str(sb.pki_dir / "client.crt")


def test_write_file_is_idempotent(tmp_path):
    target = tmp_path / "etc" / "hosts"
    assert image.write_file(target, b"a\n", 0o644)
    assert not image.write_file(target, b"a\n", 0o644)
    assert image.write_file(target, b"a\n", 0o600)
    link = tmp_path / "etc" / "resolv.conf"
    link.symlink_to(tmp_path / "elsewhere")
    assert image.write_file(link, b"x\n", 0o644) and not link.is_symlink()
    assert not (tmp_path / "elsewhere").exists()


def test_bridge_mac_is_stable_and_locally_administered():
    mac = network.bridge_mac("knbr0")
    assert mac == network.bridge_mac("knbr0") != network.bridge_mac("knbr1")
    first = int(mac[:2], 16)
    assert first & 0x02 and not first & 0x01


def test_no_machine_paths_are_hard_coded():
    for path in Path(REPO_ROOT, "sandbox", "machines").rglob("*.py"):
        text = path.read_text()
        assert "/root/" not in text and "/work/" not in text, path
