"""A rotation of every authority of a virtual cluster (cluster CA, front-proxy CA, etcd CA, service-account key),
step by step, on real etcd, kube-apiserver and kube-controller-manager started with the collection's own flags
(control_plane_flags) from the files pki_secrets keeps (pki_plan, the code the module runs).

After each step the components restart one at a time, as their pods roll, and the tenant's API must answer after
each restart (a process that has not restarted yet works with one that has). Then every credential handed out
before the rotation is tried, and one made after the step: what was trusted stays trusted until `finish`, and
only then is refused. The table of outcomes is printed."""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import http.client
import json
import ssl
from pathlib import Path

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import pki_plan
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.control_plane_flags import (
    Files,
    apiserver_flags,
    controller_manager_flags,
)
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support import k8sbin
from tests.support.procs import ManagedProcess, free_ports, wait_until

SERVICE_CIDR = "198.19.128.0/17"
STEPS = ("trust", "sign", "finish")


def _cert(name, common_name, ca="", is_ca=False, usages=("client",), organizations=(), dns=(), ips=(), late=False):
    return {"name": name, "common_name": common_name, "is_ca": is_ca, "ca": ca, "organizations": list(organizations),
            "dns_names": list(dns), "ip_addresses": list(ips), "usages": [] if is_ca else list(usages),
            "kept_until_finish": late}


def _params(certificates, keys, rotations, service_account_keys=(), kubeconfigs=()):
    return {"certificates": certificates, "service_account_keys": list(service_account_keys),
            "kubeconfigs": list(kubeconfigs), "rotations": rotations,
            "secrets": [{"name": "pki", "keys": keys + [k["name"] for k in kubeconfigs]}],
            "renew_before_days": 30, "ca_validity_days": 3650, "validity_days": 365, "key_type": "ec"}


class Tenant:
    """One virtual cluster's etcd, API server and controller-manager as processes; `cluster` and `etcd` are the
    contents of its PKI Secrets."""

    def __init__(self, workdir: Path):
        self.dir = workdir
        (workdir / "logs").mkdir()
        self.etcd_port, self.etcd_peer, self.port = free_ports(3)
        self.url = f"https://127.0.0.1:{self.port}"
        self.cluster: dict[str, bytes] = {}
        self.etcd: dict[str, bytes] = {}
        self.procs: dict[str, ManagedProcess] = {}
        self.files = Files(str(workdir / "pki"), str(workdir / "etcd/ca.crt"),
                           str(workdir / "pki/apiserver-etcd-client.crt"),
                           str(workdir / "pki/apiserver-etcd-client.key"), str(workdir / "conf"),
                           signing_cert=str(workdir / "pki/ca.signer.crt"))

    # The arguments of the roles' pki_secrets runs, reduced to what these three components use.
    def converge(self, step: str) -> dict:
        rotations = {name: step for name in ("ca", "front-proxy-ca", "sa")} if step else {}
        cluster = _params(
            [_cert("ca", "kubenest-vc-ca-rotation", is_ca=True),
             _cert("front-proxy-ca", "kubenest-vc-front-proxy-ca-rotation", is_ca=True),
             # as the role marks it: copies of the kubeconfig keep verifying it until finish
             _cert("apiserver", "kube-apiserver", "ca", usages=["server"], dns=["localhost"], ips=["127.0.0.1"],
                   late=True),
             _cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "ca"),
             _cert("front-proxy-client", "front-proxy-client", "front-proxy-ca"),
             _cert("controller-manager", "system:kube-controller-manager", "ca"),
             _cert("admin", "kubenest-admin", "ca", organizations=["system:masters"])],
            ["ca.crt", "ca.key", "ca.signer.crt", "front-proxy-ca.crt", "front-proxy-ca.key", "apiserver.crt",
             "apiserver.key", "apiserver-kubelet-client.crt", "apiserver-kubelet-client.key",
             "front-proxy-client.crt", "front-proxy-client.key", "controller-manager.crt", "controller-manager.key",
             "admin.crt", "admin.key", "sa.key", "sa.pub"],
            rotations, ["sa"],
            [{"name": "controller-manager.conf", "server": self.url, "ca": "ca", "cert": "controller-manager",
              "cluster_name": "rotation", "user_name": "controller-manager"},
             {"name": "kubeconfig", "server": self.url, "ca": "ca", "cert": "admin", "cluster_name": "rotation",
              "user_name": "admin"}])
        etcd = _params(
            [_cert("ca", "kubenest-etcd-ca-rotation", is_ca=True),
             _cert("server", "rotation-etcd", "ca", usages=["server", "client"], dns=["localhost"],
                   ips=["127.0.0.1"]),
             _cert("apiserver-etcd-client", "kube-apiserver-etcd-client", "ca")],
            ["ca.crt", "ca.key", "server.crt", "server.key", "apiserver-etcd-client.crt",
             "apiserver-etcd-client.key"],
            {"ca": step} if step else {})
        for params in (cluster, etcd):
            assert pki_plan.problems_of(params) == []
        report = pki_plan.issue(cluster, self.cluster)
        report["etcd-ca"] = pki_plan.issue(etcd, self.etcd)["ca"]
        return report

    def _write(self, component: str) -> None:
        """The files of one component's pod: what its Secret volumes hold when it starts."""
        if component == "etcd":
            for key in ("ca.crt", "server.crt", "server.key"):
                _put(self.dir / "etcd" / key, self.etcd[key])
            return
        for key, value in self.cluster.items():
            if key.endswith(".conf"):
                _put(self.dir / "conf" / key, value)
            else:
                _put(self.dir / "pki" / key, value)
        _put(self.dir / "etcd/ca.crt", self.etcd["ca.crt"])
        for key in ("apiserver-etcd-client.crt", "apiserver-etcd-client.key"):
            _put(self.dir / "pki" / key, self.etcd[key])

    def _argv(self, component: str) -> list[str]:
        if component == "etcd":
            d, client, peer = self.dir / "etcd", f"https://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{self.etcd_peer}"
            return [str(k8sbin.binary("etcd")), "--name=m0", f"--data-dir={self.dir / 'etcd-data'}",
                    f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                    f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=m0={peer}", f"--cert-file={d / 'server.crt'}",
                    f"--key-file={d / 'server.key'}", f"--trusted-ca-file={d / 'ca.crt'}", "--client-cert-auth=true",
                    "--log-level=warn", "--unsafe-no-fsync=true"]
        if component == "kube-apiserver":
            flags = apiserver_flags(self.files, self.port, [f"https://127.0.0.1:{self.etcd_port}"], SERVICE_CIDR,
                                    advertise_address="127.0.0.1", kubelet_serving_ca=True)
            return [str(k8sbin.binary(component)), "--bind-address=127.0.0.1"] + [f"--{k}={v}" for k, v in flags]
        flags = controller_manager_flags(self.files, "rotation", SERVICE_CIDR, "127.0.0.1", leader_elect=False)
        return [str(k8sbin.binary(component)), "--secure-port=0"] + [f"--{k}={v}" for k, v in flags]

    def restart(self, component: str) -> None:
        if component in self.procs:
            self.procs.pop(component).stop()
        self._write(component)
        self.procs[component] = ManagedProcess(component, self._argv(component),
                                               self.dir / "logs" / f"{component}.log").start()

    def stop(self) -> None:
        for component in ("kube-controller-manager", "kube-apiserver", "etcd"):
            if component in self.procs:
                self.procs.pop(component).stop()

    # Clients.
    def context(self, trust: bytes, pair: tuple[bytes, bytes] | None = None, name: str = "client") -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=trust.decode())
        if pair:
            cert, key = _put(self.dir / "clients" / f"{name}.crt", pair[0]), _put(
                self.dir / "clients" / f"{name}.key", pair[1])
            context.load_cert_chain(cert, key)
        return context

    def call(self, context, method, path, body=None, headers=None, port=None):
        """(status, decoded body) of one request, or ("tls", reason) when the handshake fails."""
        conn = http.client.HTTPSConnection("127.0.0.1", port or self.port, context=context, timeout=10)
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers={"Content-Type": "application/json", **(headers or {})})
            response = conn.getresponse()
            data = response.read()
            try:
                return response.status, json.loads(data)
            except ValueError:
                return response.status, data.decode(errors="replace")
        except (ssl.SSLError, ConnectionError) as exc:
            return "tls", str(exc)
        finally:
            conn.close()

    def admin(self, trust: bytes | None = None):
        return self.context(trust or self.cluster["ca.crt"], (self.cluster["admin.crt"], self.cluster["admin.key"]),
                            "admin")

    def kept_object_reads(self) -> bool:
        """Whether the tenant's API answers a client that took up the CAs as they came: every CA seen so far (an
        API server that has not restarted yet may still serve with a certificate of the old one)."""
        seen = self.dir / "seen-cas.pem"
        known = seen.read_bytes() if seen.exists() else b""
        seen.write_bytes(known + self.cluster["ca.crt"])
        trust = seen.read_bytes()
        return self.call(self.admin(trust), "GET", "/api/v1/namespaces/default/configmaps/kept")[0] == 200


def _put(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _whoami(tenant, context, headers=None):
    status, body = tenant.call(context, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, headers)
    return body["status"]["userInfo"]["username"] if status == 201 else status


def _token(tenant):
    status, body = tenant.call(tenant.admin(), "POST",
                               "/api/v1/namespaces/default/serviceaccounts/rotation/token",
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    assert status == 201, body
    return body["status"]["token"]


def _signed_by_controller_manager(tenant, name):
    """The issuer of a client certificate the controller-manager signs for an approved CSR."""
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])).sign(key, hashes.SHA256()))
    pem = base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()
    base = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
    status, body = tenant.call(tenant.admin(), "POST", base, {
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
        "spec": {"request": pem, "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"],
                 "expirationSeconds": 600}})
    assert status == 201, body
    body["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "test"}]}
    status, body = tenant.call(tenant.admin(), "PUT", f"{base}/{name}/approval", body)
    assert status == 200, body
    issued = {}

    def signed():
        current = tenant.call(tenant.admin(), "GET", f"{base}/{name}")[1]
        issued["pem"] = (current.get("status") or {}).get("certificate") if isinstance(current, dict) else None
        return bool(issued["pem"])

    wait_until(signed, 60, f"the controller-manager signing {name}", tenant.procs["kube-controller-manager"])
    return pki.load_certificate_pem(base64.b64decode(issued["pem"])).issuer


def _root_ca_is(tenant, bundle):
    status, body = tenant.call(tenant.admin(), "GET", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt")
    return status == 200 and body["data"]["ca.crt"].encode() == bundle


def _etcd_accepts(tenant, pair):
    context = tenant.context(tenant.etcd["ca.crt"], pair, "etcd-client")
    return tenant.call(context, "GET", "/health", port=tenant.etcd_port)[0] == 200


@pytest.fixture
def tenant(k8s_bin_dir, tmp_path):
    tenant = Tenant(tmp_path)
    yield tenant
    tenant.stop()


def test_every_authority_is_rotated_with_old_and_new_credentials_trusted_until_finish(tenant):
    tenant.converge("")
    for component in ("etcd", "kube-apiserver", "kube-controller-manager"):
        tenant.restart(component)
    wait_until(lambda: tenant.call(tenant.admin(), "GET", "/readyz")[0] == 200, 120, "kube-apiserver /readyz",
               tenant.procs["kube-apiserver"])
    assert tenant.call(tenant.admin(), "POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}, "data": {"a": "b"}})[0] == 201
    assert tenant.call(tenant.admin(), "POST", "/api/v1/namespaces/default/serviceaccounts", {
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "rotation"}})[0] == 201
    before = copy.deepcopy(tenant.cluster)
    etcd_before = copy.deepcopy(tenant.etcd)
    old_token = _token(tenant)
    old_ca = pki.load_certificate_pem(before["ca.crt"])

    table = {}
    for step in STEPS:
        report = tenant.converge(step)
        assert {name: report[name]["rotation"] for name in ("ca", "front-proxy-ca", "sa", "etcd-ca")} == dict.fromkeys(
            ("ca", "front-proxy-ca", "sa", "etcd-ca"), {"trust": "trust", "sign": "sign", "finish": "none"}[step])
        # One component at a time, as the pods roll: the ones not restarted yet work with the ones that are.
        for component in ("etcd", "kube-apiserver", "kube-controller-manager"):
            tenant.restart(component)
            wait_until(tenant.kept_object_reads, 120, f"the tenant's API after {component} restarted at {step}",
                       tenant.procs[component])
        bundle = tenant.cluster["ca.crt"]
        alice = {"X-Remote-User": "alice", "X-Remote-Group": "system:masters"}
        new_token = _token(tenant)
        root_ca_published = functools.partial(_root_ca_is, tenant, bundle)
        # What every pod mounts as its cluster's CA; the controller-manager publishes it a moment after it starts.
        with contextlib.suppress(TimeoutError):  # the table says when it is not
            wait_until(root_ca_published, 60, "kube-root-ca.crt", tenant.procs["kube-controller-manager"])
        table[step] = {
            "admin from before, trusting the old CA only": _whoami(
                tenant, tenant.context(before["ca.crt"], (before["admin.crt"], before["admin.key"]))),
            "admin from before, trusting the bundle": _whoami(
                tenant, tenant.context(bundle, (before["admin.crt"], before["admin.key"]))),
            "admin of the current kubeconfig": _whoami(tenant, tenant.admin()),
            "token from before": _whoami(tenant, tenant.context(bundle), {"Authorization": f"Bearer {old_token}"}),
            "token made now": _whoami(tenant, tenant.context(bundle), {"Authorization": f"Bearer {new_token}"}),
            "front proxy from before": _whoami(tenant, tenant.context(bundle, (
                before["front-proxy-client.crt"], before["front-proxy-client.key"])), alice),
            "front proxy now": _whoami(tenant, tenant.context(bundle, (
                tenant.cluster["front-proxy-client.crt"], tenant.cluster["front-proxy-client.key"])), alice),
            "etcd client from before": _etcd_accepts(tenant, (etcd_before["apiserver-etcd-client.crt"],
                                                              etcd_before["apiserver-etcd-client.key"])),
            "signed by the old CA": _signed_by_controller_manager(tenant, f"check-{step}") == old_ca.subject,
            "kube-root-ca.crt is the bundle": root_ca_published(),
        }
    print("\nrotation of every authority, outcome per credential after each step:")
    for check in table["trust"]:
        print(f"  {check:45} " + "  ".join(f"{step}={table[step][check]}" for step in STEPS))

    admin, sa = "kubenest-admin", "system:serviceaccount:default:rotation"
    assert table == {
        "trust": {"admin from before, trusting the old CA only": admin, "admin from before, trusting the bundle": admin,
                  "admin of the current kubeconfig": admin, "token from before": sa, "token made now": sa,
                  "front proxy from before": "alice", "front proxy now": "alice", "etcd client from before": True,
                  "signed by the old CA": True, "kube-root-ca.crt is the bundle": True},
        # The API server keeps its serving certificate of the old CA until finish: a copy of the kubeconfig taken
        # before the rotation works through sign and fails only after finish.
        "sign": {"admin from before, trusting the old CA only": admin, "admin from before, trusting the bundle": admin,
                 "admin of the current kubeconfig": admin, "token from before": sa, "token made now": sa,
                 "front proxy from before": "alice", "front proxy now": "alice", "etcd client from before": True,
                 "signed by the old CA": False, "kube-root-ca.crt is the bundle": True},
        "finish": {"admin from before, trusting the old CA only": "tls", "admin from before, trusting the bundle": 401,
                   "admin of the current kubeconfig": admin, "token from before": 401, "token made now": sa,
                   "front proxy from before": 401, "front proxy now": "alice", "etcd client from before": False,
                   "signed by the old CA": False, "kube-root-ca.crt is the bundle": True},
    }
    assert tenant.kept_object_reads()
