"""pki_secrets' rotation of a CA and a service-account key, step by step, on the files a run keeps in Secrets:
at every step everything issued before and after it is trusted, each step run twice changes nothing the second
time, and a step out of order is refused with nothing changed."""

from __future__ import annotations

import base64
import copy

import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import pki_plan, pki_rotation


def _params(rotations=None):
    certs = [
        {"name": "ca", "common_name": "kubenest-vc-ca-tenants-vc1", "is_ca": True, "ca": "", "organizations": [],
         "dns_names": [], "ip_addresses": [], "usages": []},
        {"name": "apiserver", "common_name": "kube-apiserver", "is_ca": False, "ca": "ca", "organizations": [],
         "dns_names": ["kubernetes"], "ip_addresses": ["10.0.0.1"], "usages": ["server"], "kept_until_finish": True},
        {"name": "admin", "common_name": "kubenest-admin", "is_ca": False, "ca": "ca",
         "organizations": ["system:masters"], "dns_names": [], "ip_addresses": [], "usages": ["client"]},
    ]
    return {"certificates": certs, "service_account_keys": ["sa"], "rotations": rotations or {},
            "kubeconfigs": [{"name": "kubeconfig", "server": "https://10.0.0.1:6443", "ca": "ca", "cert": "admin",
                             "cluster_name": "vc1", "user_name": "admin"}],
            "secrets": [{"name": "pki", "keys": ["ca.crt", "ca.key", "ca.signer.crt", "apiserver.crt",
                                                 "apiserver.key", "admin.crt", "admin.key", "sa.key", "sa.pub"]},
                        {"name": "admin", "keys": ["kubeconfig"]}],
            "renew_before_days": 30, "ca_validity_days": 3650, "validity_days": 365, "key_type": "ec"}


def _bundle(files):
    return pki.load_certificates_pem(files["ca.crt"])


def _verifies(bundle, pem):
    cert = pki.load_certificate_pem(pem)
    return any(pki.signed_by(cert, ca) for ca in bundle)


def _kubeconfig_ca(files):
    config = yaml.safe_load(files["kubeconfig"])
    return base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])


def _token_keys(files):
    return [pki.public_key_pem(k) for k in pki.load_public_keys_pem(files["sa.pub"])]


def _step(files, step):
    """One run with both authorities at `step`; the report, and the same run again must change nothing."""
    report = pki_plan.issue(_params({"ca": step, "sa": step}), files)
    again = copy.deepcopy(files)
    second = pki_plan.issue(_params({"ca": step, "sa": step}), again)
    assert again == files, f"a second run of {step} changed the files"
    assert all(r.get("rotated", "") == "" for r in second.values())
    return report


def test_a_rotation_trusts_the_new_authority_before_it_signs_and_drops_the_old_one_last():
    files = {}
    first = pki_plan.issue(_params(), files)
    assert first["ca"]["rotation"] == "none" and first["sa"]["rotation"] == "none"
    old_ca, old_admin, old_sa = _bundle(files)[0], files["admin.crt"], pki.public_key_pem(
        pki.load_private_key_pem(files["sa.key"]))
    old_apiserver = files["apiserver.crt"]
    assert files["ca.signer.crt"] == files["ca.crt"]

    trust = _step(files, "trust")
    bundle = _bundle(files)
    assert bundle[0] == old_ca and len(bundle) == 2
    assert trust["ca"]["rotation"] == "trust" and trust["ca"]["rotated"] == "a new CA is trusted beside it"
    assert trust["admin"]["reason"] == "unchanged" and files["admin.crt"] == old_admin
    assert pki.load_certificate_pem(files["ca.signer.crt"]) == old_ca
    assert "ca.next.key" in files and "sa.next.key" in files
    new_ca = bundle[1]
    assert pki.key_matches(new_ca, pki.load_private_key_pem(files["ca.next.key"]))
    # Old and new never share a subject, so a verifier looking an issuer up by name finds the right one.
    assert new_ca.subject != old_ca.subject
    assert _token_keys(files)[0] == old_sa and len(_token_keys(files)) == 2
    # The kubeconfig trusts both.
    assert _kubeconfig_ca(files) == files["ca.crt"]

    sign = _step(files, "sign")
    bundle = _bundle(files)
    assert bundle == [new_ca, old_ca]
    assert pki.load_certificate_pem(files["ca.signer.crt"]) == new_ca
    assert sign["admin"]["reason"] == "not signed by the given CA"
    # The serving certificate copies of the kubeconfig verify keeps the old CA's signature until finish.
    assert sign["apiserver"]["reason"] == "unchanged" and files["apiserver.crt"] == old_apiserver
    assert _verifies(bundle, files["admin.crt"]) and _verifies(bundle, old_admin)
    assert "ca.next.key" not in files and "sa.next.key" not in files
    assert _kubeconfig_ca(files) == files["ca.crt"]
    assert _token_keys(files)[1] == old_sa and len(_token_keys(files)) == 2
    assert sign["sa"]["rotation"] == "sign" and sign["ca"]["rotation"] == "sign"

    finish = _step(files, "finish")
    bundle = _bundle(files)
    assert finish["apiserver"]["reason"] == "not signed by the given CA" and _verifies(bundle, files["apiserver.crt"])
    assert bundle == [new_ca] and files["ca.signer.crt"] == files["ca.crt"]
    assert _verifies(bundle, files["admin.crt"]) and not _verifies(bundle, old_admin)
    assert old_sa not in _token_keys(files) and len(_token_keys(files)) == 1
    assert finish["ca"]["rotation"] == "none" and finish["ca"]["rotated"] == "the old CA is no longer trusted"

    # Without a step the rotated PKI is kept, and a second rotation can follow.
    kept = copy.deepcopy(files)
    pki_plan.issue(_params(), files)
    assert files == kept
    _step(files, "trust")
    assert len(_bundle(files)) == 2 and _bundle(files)[0] == new_ca


@pytest.mark.parametrize("state,step,message", [
    ("none", "sign", "ca: sign asked, but no new CA is trusted yet: its rotation starts with trust"),
    ("trust", "finish", "ca: finish asked while the new CA does not sign yet: sign comes first"),
])
def test_a_step_out_of_order_is_refused_and_changes_nothing(state, step, message):
    files = {}
    pki_plan.issue(_params(), files)
    if state == "trust":
        pki_plan.issue(_params({"ca": "trust"}), files)
    before = copy.deepcopy(files)
    with pytest.raises(pki_rotation.RotationError, match=message):
        pki_plan.issue(_params({"ca": step}), files)
    assert files == before


def test_without_a_step_a_half_done_rotation_is_kept_as_it_is():
    files = {}
    pki_plan.issue(_params({"ca": "trust", "sa": "trust"}), files)
    kept = copy.deepcopy(files)
    report = pki_plan.issue(_params(), files)
    assert files == kept and report["ca"]["rotation"] == "trust" and report["sa"]["rotation"] == "trust"


def test_trust_asked_again_after_sign_starts_nothing_new():
    """A run of an earlier step repeated after a later one (a resumed caller) must not start a second rotation."""
    files = {}
    pki_plan.issue(_params({"ca": "trust"}), files)
    pki_plan.issue(_params({"ca": "sign"}), files)
    kept = copy.deepcopy(files)
    report = pki_plan.issue(_params({"ca": "trust"}), files)
    assert files == kept and report["ca"]["rotation"] == "sign"


def test_a_lost_pending_certificate_is_made_again_from_its_key():
    files = {}
    pki_plan.issue(_params({"ca": "trust"}), files)
    files["ca.crt"] = pki.certificate_pem(_bundle(files)[0])
    report = pki_plan.issue(_params(), files)
    assert len(_bundle(files)) == 2 and report["ca"]["rotation"] == "trust"
    assert pki.key_matches(_bundle(files)[1], pki.load_private_key_pem(files["ca.next.key"]))


def test_the_arguments_of_a_rotation_are_checked_before_anything_is_read():
    params = _params({"ca": "later", "apiserver": "trust", "nope": "sign"})
    params["secrets"][0]["keys"].append("ca.next.key")
    assert pki_plan.problems_of(params) == [
        "rotations: 'apiserver' is neither a CA nor a service-account key",
        "rotations: ca: 'later' is not a step (trust, sign, finish)",
        "rotations: 'nope' is neither a CA nor a service-account key",
        "secrets: keys a rotation keeps by itself, beside the signing key: ca.next.key",
    ]
    assert pki_plan.problems_of(_params({"ca": "trust", "sa": "finish"})) == []


def test_a_certificate_kept_until_finish_is_still_renewed_when_it_is_due():
    files = {}
    params = _params({"ca": "trust"})
    params["validity_days"] = 0.0005  # 43 s: inside its renewal window at once
    pki_plan.issue(params, files)
    params["rotations"] = {"ca": "sign"}
    report = pki_plan.issue(params, files)
    assert report["apiserver"]["reason"] == "not signed by the given CA"
    assert pki.signed_by(pki.load_certificate_pem(files["apiserver.crt"]), _bundle(files)[0])
