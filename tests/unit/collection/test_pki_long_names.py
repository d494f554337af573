"""A tenant's CAs carry its namespace and name in their common names; together they may pass X.509's 64
characters (a 63-character namespace and a 40-character name are both valid), which cryptography refuses.
A CA's name is shortened to fit, the same way every run; a leaf's name is an identity and is refused instead."""

from __future__ import annotations

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import pki_plan

NAMESPACE = "tenant-" + "n" * 56  # 63 characters, the longest namespace
NAME = "v" * 40  # the longest VirtualCluster name the CRD admits


def _cert(name, common_name, ca="", is_ca=False, usages=("client",)):
    return {"name": name, "common_name": common_name, "ca": ca, "is_ca": is_ca, "organizations": [],
            "dns_names": [], "ip_addresses": [], "usages": [] if is_ca else list(usages)}


def _params(namespace, name):
    # The CA names of roles/control_plane/tasks/hosted_prepare.yml and roles/etcd/tasks/hosted.yml.
    certs = [_cert("ca", f"kubenest-vc-ca-{namespace}-{name}", is_ca=True),
             _cert("front-proxy-ca", f"kubenest-vc-front-proxy-ca-{namespace}-{name}", is_ca=True),
             _cert("etcd-ca", f"kubenest-etcd-ca-{namespace}-{name}", is_ca=True),
             _cert("admin", "kubenest-admin", ca="ca")]
    return {"certificates": certs, "service_account_keys": [], "kubeconfigs": [],
            "secrets": [{"name": "pki", "keys": [f"{c['name']}.{ext}" for c in certs for ext in ("crt", "key")]}],
            "renew_before_days": 30, "ca_validity_days": 3650, "validity_days": 365, "key_type": "ec"}


def _common_name(pem):
    return pki.certificate_spec(pki.load_certificate_pem(pem))["common_name"]


def test_the_longest_namespace_and_name_get_their_cas_and_a_second_run_keeps_them():
    params = _params(NAMESPACE, NAME)
    assert pki_plan.problems_of(params) == []
    files = {}
    first = pki_plan.issue(params, files)
    names = [_common_name(files[f"{n}.crt"]) for n in ("ca", "front-proxy-ca", "etcd-ca")]
    assert all(len(n) == pki.COMMON_NAME_MAX for n in names) and len(set(names)) == 3
    assert names[1].startswith("kubenest-vc-front-proxy-ca-tenant-nnn")
    second = pki_plan.issue(params, files)
    assert {k: v["reason"] for k, v in second.items()} == {k: "unchanged" for k in first}


def test_names_that_fit_are_unchanged_and_long_ones_stay_apart():
    assert pki.ca_common_name("kubenest-vc-ca-tenants-vc1") == "kubenest-vc-ca-tenants-vc1"
    a, b = (pki.ca_common_name(f"kubenest-vc-ca-{NAMESPACE}-{n}") for n in ("vc-a", "vc-b"))
    assert a != b and a[:47] == b[:47]


def test_a_leaf_name_that_does_not_fit_is_refused_before_anything_is_issued():
    params = _params("tenants", "vc1")
    params["certificates"][-1]["common_name"] = "system:node:" + "w" * 60
    assert pki_plan.problems_of(params) == [
        "certificates: admin: common name %r must have 1 to 64 characters" % ("system:node:" + "w" * 60)]
    with pytest.raises(ValueError, match="must have 1 to 64 characters"):
        pki.issue_certificate(pki.new_ca("ca", key_type="ec"), "x" * 65, client=True, key_type="ec")


def test_a_ca_under_another_name_is_kept_and_its_leaves_are_issued_for_the_new_name():
    """A backup restored into a new virtual cluster brings CAs named after the old one: the run keeps them (else
    every credential the old cluster handed out would stop working) and signs the new leaves with them."""
    files = {}
    pki_plan.issue(_params("tenants", "alpha"), files)
    old = {key: value for key, value in files.items() if key.startswith(("ca.", "etcd-ca.", "front-proxy-ca."))}
    report = pki_plan.issue(_params("tenants", "alpha-restored"), dict(old))
    assert {name: report[name]["reason"] for name in ("ca", "front-proxy-ca", "etcd-ca")} == {
        "ca": "unchanged", "front-proxy-ca": "unchanged", "etcd-ca": "unchanged"}
    assert report["admin"]["reason"] == "missing"
    # A leaf's name is its identity: one issued for another name is issued again.
    assert pki.reissue_reason(files["admin.crt"], files["admin.key"],
                              pki.CertAndKey(pki.load_certificate_pem(files["ca.crt"]),
                                             pki.load_private_key_pem(files["ca.key"])),
                              pki.wanted_spec("kubenest-other", usages=("client",))) == "common name differ"
