"""The sandbox registry's names, catalogs and configuration (no process: tests/integration runs the real one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.machines.config import from_env
from sandbox.machines.errors import SandboxError
from sandbox.registry import NAME, hosts_vars, of
from sandbox.registry.push import archives_of, split_ref
from sandbox.registry.server import Registry, RegistryError, config


@pytest.mark.parametrize(("ref", "expected"), [
    ("kubenest.local/pause:3.10", ("pause", "3.10")),
    ("kubenest.local/e2e-test-images/agnhost:2.53", ("e2e-test-images/agnhost", "2.53")),
])
def test_references_name_a_repository_and_tag_of_the_registry(ref, expected):
    assert split_ref(ref) == expected


@pytest.mark.parametrize(("ref", "message"), [
    ("registry.k8s.io/pause:3.10", "not named under kubenest.local/"),
    ("kubenest.localhost/pause:3.10", "not named under kubenest.local/"),
    ("kubenest.local/pause", "has no tag"),
    ("kubenest.local/pause@sha256:" + "0" * 64, "has no tag"),
    ("kubenest.local/:1", "has no tag"),
])
def test_other_references_are_refused_by_name(ref, message):
    with pytest.raises(RegistryError, match=message):
        split_ref(ref)


def test_catalogs_with_one_or_several_names_per_archive(tmp_path):
    (tmp_path / "images.json").write_text(json.dumps({
        "pause": {"archive": "pause.oci.tar", "manifest_digest": "sha256:a", "ref": "kubenest.local/pause:1"},
        "busybox": {"archive": "busybox.oci.tar", "manifest_digest": "sha256:b",
                    "refs": ["kubenest.local/e/busybox:1", "kubenest.local/e/busybox:2"]}}))
    archives = {a.path.name: a for a in archives_of(tmp_path)}
    assert archives["pause.oci.tar"].refs == ("kubenest.local/pause:1",)
    assert archives["busybox.oci.tar"].refs == ("kubenest.local/e/busybox:1", "kubenest.local/e/busybox:2")
    assert archives["busybox.oci.tar"].path == tmp_path / "busybox.oci.tar"


def test_a_missing_or_broken_catalog_is_named(tmp_path):
    with pytest.raises(RegistryError, match="has no images.json"):
        archives_of(tmp_path)
    entry = {"archive": "pause.oci.tar", "ref": "kubenest.local/pause:1"}
    (tmp_path / "images.json").write_text(json.dumps({"pause": entry}))
    with pytest.raises(RegistryError, match="lacks 'manifest_digest'"):
        archives_of(tmp_path)
    (tmp_path / "images.json").write_text("[")
    with pytest.raises(RegistryError, match="not an image catalog"):
        archives_of(tmp_path)


def test_the_configuration_serves_tls_on_one_address_only(tmp_path):
    reg = Registry(tmp_path, "198.18.0.1", 5443)
    conf = config(reg, tmp_path / "server.crt", tmp_path / "server.key")
    assert conf["http"]["addr"] == "198.18.0.1:5443"
    assert conf["http"]["tls"] == {"certificate": str(tmp_path / "server.crt"), "key": str(tmp_path / "server.key")}
    assert conf["storage"]["filesystem"]["rootdirectory"] == str(tmp_path / "data")
    assert "auth" not in conf  # pulls are anonymous; the address is the sandbox's bridge alone


def test_the_sandbox_registry_sits_on_its_bridge(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBENEST_SANDBOX_DIR", str(tmp_path))
    monkeypatch.delenv("KUBENEST_REGISTRY_PORT", raising=False)
    reg = of(from_env())
    assert (reg.address, reg.port, reg.state_dir) == (from_env().host_ip, 5443, tmp_path / "registry")
    assert hosts_vars(reg) == [{"name": NAME, "endpoint": f"https://{reg.address}:5443",
                                "ca_file": str(tmp_path / "registry" / "trust" / "ca.crt")}]
    assert Path(hosts_vars(reg)[0]["ca_file"]).parent == reg.trust_dir


@pytest.mark.parametrize("port", ["x", "0", "70000"])
def test_a_bad_port_is_named(monkeypatch, port):
    monkeypatch.setenv("KUBENEST_REGISTRY_PORT", port)
    with pytest.raises(SandboxError, match="KUBENEST_REGISTRY_PORT"):
        of(from_env())
