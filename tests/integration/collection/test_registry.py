"""The sandbox's registry (Debian's docker-registry over TLS from its own CA), skopeo pushes to it, and the
kubelet role's hosts.toml through which a real containerd pulls from it under the images' own names."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox.images import build_images as oci
from sandbox.registry import NAME
from sandbox.registry import pki as registry_pki
from sandbox.registry.publish import publish
from sandbox.registry.push import Archive, push
from sandbox.registry.server import Registry, RegistryError, answers, manifest_digest, pid, start, stop
from tests.support.playbook import run_playbook, write_play
from tests.support.procs import free_ports

pytestmark = pytest.mark.skipif(shutil.which("docker-registry") is None or shutil.which("skopeo") is None,
                                reason="docker-registry and skopeo are needed (make system-deps)")
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static: one static program makes a runnable image
NAMESPACE = "kubenest-registry-test"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    reg = Registry(tmp_path_factory.mktemp("registry"), "127.0.0.1", free_ports(1)[0])
    assert start(reg) is True
    yield reg
    assert stop(reg) is True
    assert not answers(reg) and pid(reg) is None


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Archive:
    spec = oci.ImageSpec("registry-probe", "1.0", BUSYBOX, program="busybox", source="Debian busybox-static")
    archive = tmp_path_factory.mktemp("image") / "registry-probe.oci.tar"
    manifest = oci.write_archive(spec, archive)
    return Archive(archive, (spec.ref, f"{NAME}/probes/registry-probe:latest"), manifest.digest)


def registry_hosts(tmp_path: Path, hosts: list) -> tuple[int, Path, str]:
    """The kubelet role's registry task file on this machine, into a certs directory of its own."""
    certs = tmp_path / "certs.d"
    tasks = [{"name": "Registry hosts", "ansible.builtin.include_role": {
        "name": "kosmos.kubenest.kubelet", "tasks_from": "registry_hosts.yml"},
        "vars": {"kubelet_registry_hosts": hosts, "kubelet_containerd_certs_dir": str(certs)}}]
    playbook = write_play(tmp_path / "registry.yml", tasks, hosts="localhost", connection="local")
    inventory = tmp_path / "hosts"
    inventory.write_text(f"localhost ansible_python_interpreter={sys.executable}\n")
    result = run_playbook(playbook, inventory, tmp_path / "cp")
    return result.rc, certs, json.dumps(result.data) + result.stderr


def test_an_image_is_pushed_once_under_each_of_its_names(registry, image):
    assert push(registry, [image]) == list(image.refs)
    assert push(registry, [image]) == []  # the registry has that manifest under both names: nothing to copy
    assert manifest_digest(registry, "registry-probe", "1.0") == image.manifest_digest
    assert manifest_digest(registry, "probes/registry-probe", "latest") == image.manifest_digest
    assert manifest_digest(registry, "registry-probe", "2.0") is None
    inspected = subprocess.run(["skopeo", "inspect", "--cert-dir", str(registry.trust_dir),
                                f"docker://{registry.host}/registry-probe:1.0"],
                               capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(inspected.stdout)["Labels"] == {"org.opencontainers.image.title": "registry-probe",
                                                      "org.opencontainers.image.version": "1.0",
                                                      "org.opencontainers.image.source": "Debian busybox-static"}


def test_an_archive_that_names_its_image_twice_is_pushed_under_both_names(registry, tmp_path):
    """As the conformance build writes agnhost (2.55 and 2.63.0): one manifest, an index entry per name."""
    spec = oci.ImageSpec("twice-named", "1.0", BUSYBOX, program="busybox", source="Debian busybox-static")
    archive = tmp_path / "twice-named.oci.tar"
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        layer_path = Path(scratch) / "layer"
        layer, diff_id = oci.write_layer(spec, layer_path)
        manifest = oci.write_layout(archive, spec.ref, oci.canonical_json(oci.image_config(spec, diff_id)),
                                    [(layer, layer_path)], also=[f"{NAME}/twice-named:2.0"])
    pair = Archive(archive, (spec.ref, f"{NAME}/twice-named:2.0"), manifest.digest)
    assert push(registry, [pair]) == list(pair.refs)
    assert manifest_digest(registry, "twice-named", "1.0") == manifest_digest(registry, "twice-named", "2.0") == \
        manifest.digest
    assert push(registry, [pair]) == []


def test_images_are_published_under_a_sites_registry_path_with_their_digests(registry, image):
    """make push-images REGISTRY=<host>/site/kubenest: each name of each archive under that path, the digest the
    build wrote, through the registry's CA; a second run writes the same references again."""
    site = f"{registry.host}/site/kubenest"
    written = publish([image], site, registry.trust_dir)
    assert written == [f"{site}/registry-probe:1.0", f"{site}/probes/registry-probe:latest"]
    assert manifest_digest(registry, "site/kubenest/registry-probe", "1.0") == image.manifest_digest
    assert manifest_digest(registry, "site/kubenest/probes/registry-probe", "latest") == image.manifest_digest
    assert publish([image], site + "/", registry.trust_dir) == written


@pytest.mark.parametrize("bad, why", [
    ("", "no registry given"), ("https://registry.example.com", "without a scheme"),
    ("Registry.example.com/x", "is not host[:port][/path]"), ("registry.example.com/x:1.0", "is not host"),
])
def test_a_registry_that_is_not_host_port_path_is_refused_before_any_copy(registry, image, bad, why):
    with pytest.raises(RegistryError, match=re.escape(why)):
        publish([image], bad, registry.trust_dir)


def test_publishing_without_the_registrys_ca_fails_naming_the_reference(registry, image, tmp_path):
    with pytest.raises(RegistryError, match="certificate directory .* does not exist"):
        publish([image], f"{registry.host}/elsewhere", tmp_path / "missing")
    with pytest.raises(RegistryError, match=f"skopeo could not copy {re.escape(registry.host)}/elsewhere/"):
        publish([image], f"{registry.host}/elsewhere", None)
    assert manifest_digest(registry, "elsewhere/registry-probe", "1.0") is None


def test_the_registry_refuses_clients_without_its_ca(registry):
    proc = subprocess.run(["skopeo", "inspect", f"docker://{registry.host}/registry-probe:1.0"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert "certificate signed by unknown authority" in proc.stderr


def test_images_not_named_under_the_registry_are_refused_before_any_push(registry, image):
    foreign = Archive(image.path, ("registry.k8s.io/pause:3.10",), image.manifest_digest)
    with pytest.raises(RegistryError, match="not named under kubenest.local/"):
        push(registry, [Archive(image.path, (f"{NAME}/early:1",), image.manifest_digest), foreign])
    assert manifest_digest(registry, "early", "1") is None


def test_containerd_pulls_through_the_roles_hosts_toml(tmp_path, registry, image, containerd):
    push(registry, [image])
    rc, certs, output = registry_hosts(tmp_path, [{"name": NAME, "endpoint": registry.endpoint,
                                                   "ca_file": str(registry.ca_file)}])
    assert rc == 0, output
    hosts_toml = (certs / NAME / "hosts.toml").read_text()
    assert f'server = "{registry.endpoint}"' in hosts_toml
    assert (certs / NAME / "ca.crt").read_bytes() == registry.ca_file.read_bytes()

    ref = image.refs[0]
    containerd.ctr("images", "pull", "--hosts-dir", str(certs), ref, namespace=NAMESPACE, timeout=120)
    listed = containerd.ctr("images", "ls", namespace=NAMESPACE).stdout.splitlines()[1:]
    assert [line.split()[2] for line in listed if line.split()[0] == ref] == [image.manifest_digest]
    # The pulled image's own busybox runs and says so by an exit status of its choosing: `ctr run` once lost the
    # output of a container that exited at once (exit status 0, empty output), where the status is always kept.
    ran = containerd.run(ref, "registry-probe", "/usr/local/bin/busybox", "sh", "-c", "exit 42", namespace=NAMESPACE)
    assert ran.returncode == 42, ran.stderr


def test_a_registry_whose_ca_is_not_the_pinned_one_is_refused(tmp_path, registry, image, containerd):
    other = registry_pki.ensure(tmp_path / "other-ca", "127.0.0.1")
    rc, certs, output = registry_hosts(tmp_path, [{"name": NAME, "endpoint": registry.endpoint,
                                                   "ca_file": str(other["ca"])}])
    assert rc == 0, output
    proc = containerd.ctr("images", "pull", "--hosts-dir", str(certs), f"{NAME}/probes/registry-probe:latest",
                          namespace=f"{NAMESPACE}-foreign-ca", timeout=120, check=False)
    assert proc.returncode != 0
    assert "certificate signed by unknown authority" in proc.stderr


@pytest.mark.parametrize("entry", [
    {"name": "../../etc", "endpoint": "https://127.0.0.1:5443"},
    {"name": NAME, "endpoint": "https://127.0.0.1:5443/v2/../x"},
    {"name": NAME},
    "kubenest.local",
])
def test_a_malformed_registry_host_stops_the_run_and_writes_nothing(tmp_path, entry):
    rc, certs, output = registry_hosts(tmp_path, [{"name": "good.example", "endpoint": "https://10.0.0.1"}, entry])
    assert rc != 0
    assert "kubelet_registry_hosts" in output
    assert not certs.exists()  # the good entry before it was not written either
