"""etcd-snapshot (the tool in the etcd image) against a real etcd: a snapshot streamed out over TLS, cut into
chunks as a restore carries it, restores into a member that a real etcd starts from with the objects kept."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import urllib.request
from pathlib import Path

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils.etcd_backup_file import snapshot_is_whole
from kubernetes import client as k8s

from tests.support import k8sbin
from tests.support.procs import ManagedProcess, free_ports, wait_until


@pytest.fixture(scope="module")
def tool(oci_images) -> Path:
    path = Path(oci_images["etcd"]["path"]).parent / "etcd-snapshot-bin" / "etcd-snapshot"
    assert path.is_file(), path
    return path


def run(*argv, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, check=False)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def save(tool, apiserver) -> bytes:
    pki = apiserver.pki_dir
    proc = run(tool, "save", f"--endpoint=https://127.0.0.1:{apiserver.etcd_port}", f"--cacert={pki / 'etcd/ca.crt'}",
               f"--cert={pki / 'apiserver-etcd-client.crt'}", f"--key={pki / 'apiserver-etcd-client.key'}")
    return base64.b64decode(proc.stdout)


def write_chunks(directory: Path, snapshot: bytes, size: int) -> None:
    directory.mkdir()
    for i in range(0, len(snapshot), size):
        (directory / f"chunk-{i // size:03d}").write_bytes(snapshot[i:i + size])


def restore_args(tool, chunks, digest, data_dir, peer_port):
    return [tool, "restore", f"--chunks={chunks}", f"--sha256={digest}", f"--data-dir={data_dir}",
            "--name=member-0", f"--initial-cluster=member-0=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"]


def etcd_get(port: int, key: str) -> list[dict]:
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v3/kv/range", data=body),
                                timeout=5) as resp:
        return json.loads(resp.read()).get("kvs", [])


def test_a_snapshot_restores_into_a_member_that_keeps_the_objects(tool, apiserver, api_client, tmp_path):
    core = k8s.CoreV1Api(api_client)
    core.create_namespaced_config_map("default", k8s.V1ConfigMap(
        metadata=k8s.V1ObjectMeta(name="kept-by-the-snapshot"), data={"answer": "42"}))
    snapshot = save(tool, apiserver)
    assert snapshot_is_whole(snapshot)
    digest = hashlib.sha256(snapshot).hexdigest()
    write_chunks(tmp_path / "chunks", snapshot, 100 * 1024)
    assert len(list((tmp_path / "chunks").iterdir())) > 1  # the joining is exercised
    client_port, peer_port = free_ports(2)
    data_dir = tmp_path / "volume" / "data"
    data_dir.parent.mkdir()
    run(*restore_args(tool, tmp_path / "chunks", digest, data_dir, peer_port))
    assert (data_dir / "member").is_dir()
    assert [p.name for p in data_dir.parent.iterdir()] == ["data"]  # the joined file is gone again
    # A member that has data is left alone: a restarted pod keeps what it wrote since.
    again = run(*restore_args(tool, tmp_path / "chunks", "0" * 64, data_dir, peer_port))
    assert "nothing to restore" in again.stderr

    url = f"http://127.0.0.1:{client_port}"
    etcd = ManagedProcess("restored-etcd", [
        str(k8sbin.binary("etcd")), "--name=member-0", f"--data-dir={data_dir}", f"--listen-client-urls={url}",
        f"--advertise-client-urls={url}", f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=member-0=http://127.0.0.1:{peer_port}", "--log-level=warn"],
        tmp_path / "etcd.log").start()
    try:
        wait_until(lambda: _healthy(client_port), 60, "restored etcd /health", etcd)
        (kv,) = etcd_get(client_port, "/registry/configmaps/default/kept-by-the-snapshot")
        assert b"42" in base64.b64decode(kv["value"])
    finally:
        etcd.stop()


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def test_a_damaged_or_missing_snapshot_restores_nothing(tool, apiserver, tmp_path):
    snapshot = save(tool, apiserver)
    write_chunks(tmp_path / "chunks", snapshot, 256 * 1024)
    data_dir = tmp_path / "data"
    wrong = run(*restore_args(tool, tmp_path / "chunks", "ab" * 32, data_dir, 2380), check=False)
    assert wrong.returncode != 0 and "want " + "ab" * 32 in wrong.stderr
    (tmp_path / "empty").mkdir()
    empty = run(*restore_args(tool, tmp_path / "empty", hashlib.sha256(snapshot).hexdigest(), data_dir, 2380),
                check=False)
    assert empty.returncode != 0 and "refusing to start empty" in empty.stderr
    assert not data_dir.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["chunks", "empty"]


def test_a_snapshot_needs_a_client_certificate_the_member_trusts(tool, apiserver, tmp_path):
    pki = apiserver.pki_dir
    # The tenant CA's admin is no client of etcd, whose own CA signs its clients.
    proc = run(tool, "save", f"--endpoint=https://127.0.0.1:{apiserver.etcd_port}", f"--cacert={pki / 'etcd/ca.crt'}",
               f"--cert={pki / 'apiserver.crt'}", f"--key={pki / 'apiserver.key'}", "--timeout=20s", check=False)
    assert proc.returncode != 0 and proc.stdout == ""
