"""Which certificates of a virtual cluster's PKI Secrets are due for renewal."""

from __future__ import annotations

import base64
import datetime

from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

from kubenest_operator.certificates import due_certificates
from kubenest_operator.extravars import renew_before_days

CA = pki.new_ca("test-ca")


def _data(**lifetimes_days):
    return {f"{name}.crt": base64.b64encode(pki.certificate_pem(
        pki.issue_certificate(CA, name, client=True, validity_days=days).cert)).decode()
        for name, days in lifetimes_days.items()}


def test_only_certificates_inside_their_window_are_due():
    secrets = {"vc-pki": dict(_data(admin=365, apiserver=100), **{"sa.pub": "x", "admin.key": "y"}),
               "vc-etcd-pki": _data(server=365)}
    now = datetime.datetime.now(datetime.UTC)
    assert due_certificates(secrets, 30, now=now) == []
    due = due_certificates(secrets, 30, now=now + datetime.timedelta(days=75))
    assert len(due) == 1 and due[0].startswith("vc-pki/apiserver.crt (expires in 59")  # 25 days: 599h..600h
    assert due_certificates(secrets, 20, now=now + datetime.timedelta(days=75)) == []
    later = now + datetime.timedelta(days=340)
    assert [d.split(" ")[0] for d in due_certificates(secrets, 30, now=later)] == [
        "vc-etcd-pki/server.crt", "vc-pki/admin.crt", "vc-pki/apiserver.crt"]


def test_a_short_lived_certificate_is_due_only_in_its_last_third():
    # 0.01 days (14.4 min) plus the 5 min back-dating: due in its last 6.5 min, whatever renew_before says.
    secrets = {"vc-pki": _data(apiserver=0.01)}
    now = datetime.datetime.now(datetime.UTC)
    assert due_certificates(secrets, 30, now=now) == []
    assert due_certificates(secrets, 30, now=now + datetime.timedelta(minutes=9))
    assert due_certificates(secrets, 30, now=now + datetime.timedelta(minutes=20))[0].endswith("(expired)")


def test_an_unreadable_certificate_is_due():
    assert due_certificates({"vc-pki": {"ca.crt": base64.b64encode(b"junk").decode()}}, 30) == [
        "vc-pki/ca.crt (unreadable)"]


def test_the_window_comes_from_the_site_variables():
    assert renew_before_days({}) == 30
    assert renew_before_days({"kubenest_cert_renew_before_days": 0.5}) == 0.5
    assert renew_before_days({"kubenest_cert_renew_before_days": "junk"}) == 30


def test_a_ca_is_never_due_for_a_routine_run():
    now = datetime.datetime.now(datetime.UTC)
    secrets = {"vc-pki": {"ca.crt": base64.b64encode(pki.certificate_pem(CA.cert)).decode()}}
    assert due_certificates(secrets, 30, now=now + datetime.timedelta(days=3649)) == []
