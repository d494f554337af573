"""Certificates renewed without a spec change: the operator reads a virtual cluster's PKI Secrets and runs the
playbook when one of them is inside its renewal window, and only then."""

from __future__ import annotations

import base64

from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

from tests.integration.operator.operatorproc import condition, stays, wait_for_vc
from tests.integration.operator.test_virtualclusters import COMPLETED, completed
from tests.support.procs import wait_until


def _pki_secret(kube, namespace: str, name: str, validity_days: float) -> None:
    ca = pki.new_ca("renewal-test-ca")
    pair = pki.issue_certificate(ca, "kube-apiserver", server=True, validity_days=validity_days)
    body = {"metadata": {"name": f"{name}-pki"}, "type": "Opaque", "data": {
        "ca.crt": base64.b64encode(pki.certificate_pem(ca.cert)).decode(),
        "apiserver.crt": base64.b64encode(pki.certificate_pem(pair.cert)).decode()}}
    kube.core.delete_collection_namespaced_secret(namespace, field_selector=f"metadata.name={name}-pki")
    kube.core.create_namespaced_secret(namespace, body)


def test_a_certificate_inside_its_window_starts_a_run_and_a_fresh_one_does_not(kube, operators):
    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns, "--cert-check-interval", "1")
    _pki_secret(kube, ns, "gamma", validity_days=365)
    kube.create_vc(ns, "gamma", {})
    wait_for_vc(kube, ns, "gamma", completed(), COMPLETED, "gamma Completed", operator)
    # Fresh certificates: the checks every second start nothing.
    assert stays(lambda: kube.runs(ns, "gamma")["present"] == 1, 5)

    # 0.0005 days (43 s) of a 5.7 min lifetime: inside its last third at once.
    _pki_secret(kube, ns, "gamma", validity_days=0.0005)
    wait_until(lambda: kube.runs(ns, "gamma")["present"] >= 2, COMPLETED, "a renewal run", operator.process)
    wait_until(lambda: "CertificateRenewal" in kube.events_text(ns), 30, "the CertificateRenewal event")
    assert "gamma-pki/apiserver.crt (expires in 0h00m)" in operator.log()
    vc = wait_for_vc(kube, ns, "gamma", completed(), COMPLETED, "gamma Completed after the renewal", operator)
    assert condition(vc)["reason"] == "Reconciled"

    # What a real run does: the Secret holds renewed certificates again, and the runs stop.
    _pki_secret(kube, ns, "gamma", validity_days=365)
    wait_for_vc(kube, ns, "gamma", completed(), COMPLETED, "gamma settled", operator)
    runs = kube.runs(ns, "gamma")["present"]
    assert stays(lambda: kube.runs(ns, "gamma")["present"] == runs, 6)
