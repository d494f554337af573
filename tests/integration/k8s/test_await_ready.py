"""await-ready (the control-plane components' entry point, in their images) against a real API server and
etcd: it returns once /readyz answers through the kubeconfig's CA, in YAML or JSON, or once etcd's /health
answers a client certificate it trusts, and fails with a reason when the server never answers, is not the one
the CA names, or the kubeconfig is unusable. Given a command, it becomes that command once ready."""

from __future__ import annotations

import json
import ssl
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from tests.support.procs import free_ports
from tests.support.scripted_http import scripted_server


@pytest.fixture(scope="module")
def await_ready(oci_images) -> Path:
    return Path(oci_images["kube-scheduler"]["path"]).parent / "await-ready-bin" / "await-ready"


def _run(binary, kubeconfig, timeout="10s") -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), f"--kubeconfig={kubeconfig}", f"--timeout={timeout}"], capture_output=True,
                          text=True, timeout=60, check=False)


def _config(apiserver) -> dict:
    return yaml.safe_load(apiserver.kubeconfig.read_text())


def test_the_control_plane_images_carry_it(oci_images):
    for image in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        with tarfile.open(oci_images[image]["path"]) as archive:
            layers = [m for m in archive.getmembers() if m.name.startswith("blobs/") and m.size > 1_000_000]
            names = set()
            for member in layers:
                with tarfile.open(fileobj=archive.extractfile(member)) as layer:
                    names |= set(layer.getnames())
        assert "usr/local/bin/await-ready" in names, image
        # The API server's pod streams the tenant's audit log with follow-log (test_apiserver_config.py).
        assert ("usr/local/bin/follow-log" in names) == (image == "kube-apiserver"), image


def test_returns_once_the_api_server_is_ready_in_yaml_and_json(await_ready, apiserver, tmp_path):
    proc = _run(await_ready, apiserver.kubeconfig)
    assert proc.returncode == 0 and "is ready after" in proc.stdout, proc.stderr
    as_json = tmp_path / "kubeconfig.json"
    as_json.write_text(json.dumps(_config(apiserver), indent=2))
    proc = _run(await_ready, as_json)
    assert proc.returncode == 0, proc.stderr


def test_a_server_that_never_answers_fails_after_the_timeout(await_ready, apiserver, tmp_path):
    config = _config(apiserver)
    (port,) = free_ports(1)
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = tmp_path / "closed.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = _run(await_ready, path, timeout="2s")
    assert proc.returncode == 1 and "not ready after 2s" in proc.stderr and "connection refused" in proc.stderr


def test_a_server_the_ca_does_not_name_is_not_taken_for_ready(await_ready, apiserver, tmp_path):
    config = _config(apiserver)
    other_ca = _config(apiserver)["users"][0]["user"]["client-certificate-data"]  # a certificate, not the CA
    config["clusters"][0]["cluster"]["certificate-authority-data"] = other_ca
    path = tmp_path / "wrong-ca.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = _run(await_ready, path, timeout="2s")
    assert proc.returncode == 1 and "certificate" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("content", "says"), [
    ("apiVersion: v1\nkind: Config\n", "names no https server"),
    ("clusters:\n- cluster:\n    server: https://127.0.0.1:1\n    certificate-authority-data: '%%%'\n",
     "certificate-authority-data"),
])
def test_an_unusable_kubeconfig_is_refused_at_once(await_ready, tmp_path, content, says):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    proc = _run(await_ready, path)
    assert proc.returncode == 1 and says in proc.stderr, proc.stderr
    assert not _run(await_ready, tmp_path / "missing.yaml").returncode == 0


def _etcd(binary, apiserver, *extra, timeout="10s", client=True) -> subprocess.CompletedProcess:
    pki = apiserver.pki_dir
    args = [f"--url=https://127.0.0.1:{apiserver.etcd_port}/health", f"--cacert={pki / 'etcd/ca.crt'}"]
    if client:  # the API server's own etcd client certificate, as in its pod
        args += [f"--cert={pki / 'apiserver-etcd-client.crt'}", f"--key={pki / 'apiserver-etcd-client.key'}"]
    return subprocess.run([str(binary), *args, *extra, f"--timeout={timeout}"], capture_output=True, text=True,
                          timeout=60, check=False)


def test_returns_once_etcd_answers_the_api_servers_client_certificate(await_ready, apiserver):
    proc = _etcd(await_ready, apiserver)
    assert proc.returncode == 0 and "/health is ready after" in proc.stdout, proc.stderr


def test_etcd_without_a_client_certificate_is_not_taken_for_ready(await_ready, apiserver):
    proc = _etcd(await_ready, apiserver, timeout="2s", client=False)
    assert proc.returncode == 1 and "not ready after 2s" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("args", "says"), [
    ([], "give either --kubeconfig or --url"),
    (["--url=http://127.0.0.1:1/health", "--cacert=/dev/null"], "https URL"),
    (["--url=https://127.0.0.1:1/health"], "--cacert"),
    (["--url=https://127.0.0.1:1/health", "--cacert=/dev/null", "--cert=/dev/null"], "--cert and --key go together"),
    (["--kubeconfig=/dev/null", "--cacert=/dev/null"], "go with --url"),
    (["--local=https://192.0.2.1:6443/readyz"], "loopback address"),
    (["--local=https://kubernetes.default:6443/readyz"], "loopback address"),
    (["--local=http://127.0.0.1:6443/readyz"], "https URL"),
    (["--local=https://127.0.0.1:6443/readyz", "--cacert=/dev/null"], "--local stands alone"),
])
def test_flags_that_do_not_fit_are_refused_at_once(await_ready, args, says):
    proc = subprocess.run([str(await_ready), *args], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1 and says in proc.stderr, proc.stderr


def test_a_startup_probe_on_loopback_returns_once_the_server_is_ready(await_ready, apiserver):
    server = _config(apiserver)["clusters"][0]["cluster"]["server"]
    assert server.startswith("https://127.0.0.1:")
    proc = subprocess.run([str(await_ready), f"--local={server}/readyz", "--timeout=9s"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "is ready after" in proc.stdout, proc.stderr
    # a path that does not answer 200 is not taken for ready
    proc = subprocess.run([str(await_ready), f"--local={server}/no-such-path", "--timeout=1s"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 1 and "not ready after 1s" in proc.stderr, proc.stderr


def test_a_startup_probe_of_a_server_not_yet_listening_fails_after_its_timeout(await_ready):
    (port,) = free_ports(1)
    proc = subprocess.run([str(await_ready), f"--local=https://127.0.0.1:{port}/readyz", "--timeout=1s"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1 and "connection refused" in proc.stderr, proc.stderr


def test_with_a_command_it_becomes_the_command_once_ready(await_ready, apiserver, tmp_path):
    # The shell reports its own process ID: the same as await-ready's, since await-ready execs it.
    proc = subprocess.Popen([str(await_ready), f"--kubeconfig={apiserver.kubeconfig}", "--timeout=10s", "--",
                             "sh", "-c", 'echo "pid $$ args $0 $1" >&2', "first", "second"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "is ready after" in out, err
    assert f"pid {proc.pid} args first second" in err


def test_a_command_that_is_not_there_is_refused_before_the_wait(await_ready, apiserver, tmp_path):
    config = _config(apiserver)
    (port,) = free_ports(1)
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"  # never answers
    path = tmp_path / "closed.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([str(await_ready), f"--kubeconfig={path}", "--timeout=30s", "--",
                           "/nonexistent/kube-apiserver"], capture_output=True, text=True, timeout=20, check=False)
    assert proc.returncode == 1 and "/nonexistent/kube-apiserver" in proc.stderr, proc.stderr
    assert "not ready after" not in proc.stderr


def test_a_startup_probe_polls_over_one_connection(await_ready, apiserver):
    """Every 50 ms while the server is not ready, over the connection it opened first: a handshake per poll for
    each starting component saturated 2 cores when many virtual clusters started together. The server is the
    scripted stand-in (tests/support/scripted_http.py) over TLS, 503 for 1.5 s then 200: it counts connections,
    which the real servers do not expose."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(apiserver.pki_dir / "apiserver.crt", apiserver.pki_dir / "apiserver.key")
    ready_at = time.monotonic() + 1.5

    def answer(_path):
        return (200, {}, "ok") if time.monotonic() >= ready_at else (503, {}, "not yet")

    with scripted_server(answer, context) as server:
        proc = subprocess.run([str(await_ready), f"--local={server.url}/readyz", "--timeout=9s"], capture_output=True,
                              text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "is ready after" in proc.stdout, proc.stderr
    assert len(server.seen) >= 10, server.seen  # it polled all along, not once a second
    assert len(server.connections) == 1, f"{len(server.connections)} connections for {len(server.seen)} polls"
