"""kosmos.kubenest.pki_secrets on a real API server: a whole PKI issued into Secrets in one run, kept when
nothing is due, re-issued down the chain when a CA changes, check mode, and bad arguments refused before
anything is written."""

from __future__ import annotations

import base64

import kubernetes
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from kubernetes.client.rest import ApiException

from tests.support.playbook import run_module
from tests.support.virtualclusters import ensure_namespace

NS = "pki-secrets"
OWNER = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u-1"}]
CERTS = [
    {"name": "ca", "is_ca": True, "common_name": "test-ca"},
    {"name": "server", "ca": "ca", "common_name": "server", "usages": ["server"],
     "dns_names": ["server.example"], "ip_addresses": ["10.0.0.1"]},
    {"name": "admin", "ca": "ca", "common_name": "admin", "organizations": ["system:masters"]},
]
KUBECONFIGS = [{"name": "admin.conf", "server": "https://10.0.0.1:6443", "ca": "ca", "cert": "admin",
                "cluster_name": "t", "user_name": "admin"}]
PKI_KEYS = ["ca.crt", "ca.key", "server.crt", "server.key", "admin.crt", "admin.key", "sa.key", "sa.pub"]
SECRETS = [{"name": "t-pki", "keys": PKI_KEYS}, {"name": "t-admin", "keys": ["admin.conf"]}]


def module(apiserver, check=False, **args):
    full = dict(namespace=NS, certificates=CERTS, service_account_keys=["sa"], kubeconfigs=KUBECONFIGS,
                secrets=SECRETS, labels={"app": "x"}, owner_references=OWNER)
    full.update(args)
    return run_module("pki_secrets", apiserver.kubeconfig, check=check, **full)


@pytest.fixture(scope="module")
def core(api_client):
    ensure_namespace(api_client, NS)
    api = kubernetes.client.CoreV1Api(api_client)
    return api


def data(core, name):
    return {k: base64.b64decode(v) for k, v in core.read_namespaced_secret(name, NS).data.items()}


def cert(pem):
    return x509.load_pem_x509_certificate(pem)


def test_a_pki_is_issued_kept_and_reissued_down_the_chain(apiserver, core):
    rc, result, out = module(apiserver, check=True)
    assert rc == 0 and result["changed"] and result["secrets"]["t-pki"] == {"found": False, "changed": True}, result
    with pytest.raises(ApiException):
        core.read_namespaced_secret("t-pki", NS)

    rc, first, out = module(apiserver)
    assert rc == 0 and first["changed"], first
    assert {c: first["certificates"][c]["reason"] for c in ("ca", "server", "admin")} == dict.fromkeys(
        ("ca", "server", "admin"), "missing")
    assert "PRIVATE KEY" not in out
    pki = data(core, "t-pki")
    assert set(pki) == set(SECRETS[0]["keys"])
    ca, server = cert(pki["ca.crt"]), cert(pki["server.crt"])
    server.verify_directly_issued_by(ca)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["server.example"]
    assert first["certificates"]["server"]["sha256"] == server.fingerprint(hashes.SHA256()).hex()
    secret = core.read_namespaced_secret("t-pki", NS)
    assert secret.metadata.labels == {"app": "x"} and secret.metadata.owner_references[0].uid == "u-1"
    conf = yaml.safe_load(data(core, "t-admin")["admin.conf"])
    assert conf["clusters"][0]["cluster"]["server"] == "https://10.0.0.1:6443"
    assert base64.b64decode(conf["users"][0]["user"]["client-certificate-data"]) == pki["admin.crt"]

    rc, again, out = module(apiserver)
    assert rc == 0 and not again["changed"], again
    assert again["certificates"]["server"]["sha256"] == first["certificates"]["server"]["sha256"]
    assert all(c["reason"] == "unchanged" for c in again["certificates"].values())

    # A changed SAN re-issues that certificate only.
    admin_before = data(core, "t-admin")
    certs = [dict(c) for c in CERTS]
    certs[1]["dns_names"] = ["server.example", "other.example"]
    rc, sans_changed, out = module(apiserver, certificates=certs)
    assert rc == 0 and sans_changed["certificates"]["server"]["reason"] == "DNS names differ"
    assert sans_changed["certificates"]["admin"]["reason"] == "unchanged"
    assert data(core, "t-admin") == admin_before

    # A new CA (the stored one was replaced by hand) re-issues everything it signs, the kubeconfig too.
    other = module(apiserver, namespace=NS, secrets=[{"name": "other", "keys": ["ca.crt", "ca.key"]}],
                   certificates=[CERTS[0]], service_account_keys=[], kubeconfigs=[])[1]
    assert other["changed"], other
    pki = data(core, "t-pki")
    pki.update(data(core, "other"))
    core.patch_namespaced_secret("t-pki", NS, {"data": {k: base64.b64encode(v).decode() for k, v in pki.items()}})
    rc, chained, out = module(apiserver, certificates=certs)
    assert rc == 0 and chained["certificates"]["ca"]["reason"] == "unchanged", chained
    assert chained["certificates"]["server"]["reason"] == "not signed by the given CA"
    assert chained["certificates"]["admin"]["reason"] == "not signed by the given CA"
    admin_conf = yaml.safe_load(data(core, "t-admin")["admin.conf"])
    assert base64.b64decode(admin_conf["users"][0]["user"]["client-certificate-data"]) == data(core, "t-pki")[
        "admin.crt"]


def test_short_lived_certificates_are_renewed_inside_their_window(apiserver, core):
    secrets = [{"name": "short", "keys": ["ca.crt", "ca.key", "admin.crt", "admin.key"]}]
    certs = [CERTS[0], CERTS[2]]
    args = dict(secrets=secrets, certificates=certs, service_account_keys=[], kubeconfigs=[])
    rc, first, out = module(apiserver, validity_days=0.0005, **args)  # 43 s: inside its window at once
    assert rc == 0 and first["changed"]
    rc, second, out = module(apiserver, validity_days=365, **args)
    assert rc == 0 and second["certificates"]["admin"]["reason"].startswith("expires in"), second
    assert second["certificates"]["ca"]["reason"] == "unchanged"


@pytest.mark.parametrize(("args", "message"), [
    ({"secrets": [{"name": "t-pki", "keys": ["ca.crt"]}]}, "produced but stored in no Secret: "),
    ({"secrets": SECRETS + [{"name": "x", "keys": ["nothing.crt"]}]}, "keys nothing produces: nothing.crt"),
    ({"certificates": [CERTS[1], CERTS[0], CERTS[2]]}, "server names ca 'ca', which is not an earlier CA"),
    ({"certificates": CERTS + [{"name": "bad", "ca": "ca", "common_name": "b", "ip_addresses": ["nope"]}]},
     "bad: 'nope' is not an IP address"),
    ({"kubeconfigs": [{**KUBECONFIGS[0], "server": "http://plain"}]}, "must be an https:// URL"),
    ({"secrets": [{"name": "t-pki", "keys": SECRETS[0]["keys"] + ["admin.conf", "../x"]}]},
     "keys that are not file names: ../x"),
])
def test_bad_arguments_are_refused_before_anything_is_written(apiserver, core, args, message):
    before = version(core, "t-pki")
    rc, result, out = module(apiserver, **args)
    assert rc != 0 and message in result["msg"], result
    assert version(core, "t-pki") == before


def version(core, name):
    try:
        return core.read_namespaced_secret(name, NS).metadata.resource_version
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_a_rotation_keeps_its_new_key_beside_the_signing_one_and_refuses_a_step_out_of_order(apiserver, core):
    secrets = [{"name": "rot-pki", "keys": ["ca.crt", "ca.key", "ca.signer.crt", "admin.crt", "admin.key", "sa.key",
                                            "sa.pub"]},
               {"name": "rot-admin", "keys": ["admin.conf"]}]
    args = dict(secrets=secrets, certificates=[CERTS[0], CERTS[2]], kubeconfigs=KUBECONFIGS)
    rc, first, out = module(apiserver, **args)
    assert rc == 0 and first["also_trusted"] == [] and first["certificates"]["ca"]["rotation"] == "none", first

    before = version(core, "rot-pki")
    rc, refused, out = module(apiserver, rotations={"ca": "sign"}, **args)
    assert rc != 0 and "ca: sign asked, but no new CA is trusted yet" in refused["msg"], refused
    assert "nothing was changed" in refused["msg"] and version(core, "rot-pki") == before

    rc, trusted, out = module(apiserver, rotations={"ca": "trust", "sa": "trust"}, **args)
    assert rc == 0 and trusted["changed"], trusted
    stored = data(core, "rot-pki")
    assert set(stored) == set(secrets[0]["keys"]) | {"ca.next.key", "sa.next.key"}
    assert stored["ca.signer.crt"] == stored["ca.crt"][:len(stored["ca.signer.crt"])]
    assert trusted["certificates"]["ca"]["rotated"] == "a new CA is trusted beside it"
    assert len(trusted["also_trusted"]) == 2 and "PRIVATE KEY" not in out
    conf = yaml.safe_load(data(core, "rot-admin")["admin.conf"])
    assert base64.b64decode(conf["clusters"][0]["cluster"]["certificate-authority-data"]) == stored["ca.crt"]

    rc, kept, out = module(apiserver, **args)
    assert rc == 0 and not kept["changed"] and kept["certificates"]["ca"]["rotation"] == "trust", kept

    # Once the new key signs, it is the signing key: nothing is kept beside it any more.
    for step in ("sign", "finish"):
        rc, result, out = module(apiserver, rotations={"ca": step, "sa": step}, **args)
        assert rc == 0 and result["changed"], result
        assert set(data(core, "rot-pki")) == set(secrets[0]["keys"]), step
    stored = data(core, "rot-pki")
    assert stored["ca.signer.crt"] == stored["ca.crt"] and result["also_trusted"] == []


def test_a_named_rotation_that_finished_is_not_started_again_and_another_waits_for_it(apiserver, core):
    secrets = [{"name": "named-pki", "keys": ["ca.crt", "ca.key", "admin.crt", "admin.key"]}]
    args = dict(secrets=secrets, certificates=[CERTS[0], CERTS[2]], service_account_keys=[], kubeconfigs=[])
    assert module(apiserver, **args)[0] == 0
    for step in ("trust", "sign", "finish"):
        rc, result, out = module(apiserver, rotations={"ca": step}, rotation_id="r1", **args)
        assert rc == 0 and result["changed"], result
    marker = core.read_namespaced_secret("named-pki", NS).metadata.annotations["kubenest.kosmos.io/rotation.ca"]
    assert marker == "r1 done"
    rotated = data(core, "named-pki")
    # The whole rotation repeated by a caller that lost track of it: nothing happens.
    for step in ("trust", "sign", "finish"):
        rc, result, out = module(apiserver, rotations={"ca": step}, rotation_id="r1", **args)
        assert rc == 0 and not result["changed"] and result["certificates"]["ca"]["rotated"] == "", result
    assert data(core, "named-pki") == rotated

    assert module(apiserver, rotations={"ca": "trust"}, rotation_id="r2", **args)[0] == 0
    before = version(core, "named-pki")
    rc, refused, out = module(apiserver, rotations={"ca": "trust"}, rotation_id="r3", **args)
    assert rc != 0 and "ca: rotation r2 is under way (trust), finish it before r3 starts" in refused["msg"], refused
    assert version(core, "named-pki") == before
    rc, refused, out = module(apiserver, rotations={"ca": "trust"}, rotation_id="not ok", **args)
    assert rc != 0 and "rotation_id: 'not ok' must be 1 to 63 letters" in refused["msg"], refused
