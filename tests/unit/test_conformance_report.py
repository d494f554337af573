"""sandbox/conformance: reading ginkgo's JUnit reports into the summary, and choosing specs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sandbox.conformance import images, report, specs

POD_SPEC = "[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]"
DNS_SPEC = "[sig-network] DNS should provide DNS for the cluster [Conformance]"
ISSUER_SPEC = "[sig-auth] ServiceAccounts ServiceAccountIssuerDiscovery should support OIDC discovery [Conformance]"
SERIAL_SPEC = "[sig-apps] Daemon set [Serial] should rollback without unnecessary restarts [Conformance]"


def junit(path: Path, cases: list[tuple[str, str, str]]) -> Path:
    """A report shaped as ginkgo v2 writes it: suite nodes as test cases beside the specs."""
    body = ['<testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="3"/>']
    for name, state, message in cases:
        inner = ""
        if state == "failed":
            inner = f'<failure message="{message}" type="failed">[FAILED] {message}\nstack...</failure>'
        elif state == "skipped":
            inner = f'<skipped message="skipped - {message}"/>'
        elif state == "filtered":
            state, inner = "skipped", '<skipped message="skipped"/>'
        body.append(f'<testcase name="[It] {name}" classname="Kubernetes e2e suite" status="{state}" time="1.5">'
                    f"{inner}</testcase>")
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="Kubernetes e2e suite">'
                    + "".join(body) + "</testsuite></testsuites>\n")
    return path


def test_read_junit_keeps_specs_only_with_their_first_error(tmp_path):
    path = junit(tmp_path / "j.xml", [(POD_SPEC, "passed", ""), (DNS_SPEC, "failed", "timed out waiting for dig"),
                                      (SERIAL_SPEC, "skipped", "needs 2 schedulable nodes"),
                                      (ISSUER_SPEC, "filtered", "")])
    got = {spec.name: spec for spec in report.read_junit(path)}
    assert sorted(got) == sorted([POD_SPEC, DNS_SPEC, SERIAL_SPEC])  # the filtered-out spec is not in the run
    assert got[DNS_SPEC].state == "failed" and got[DNS_SPEC].first_error == "timed out waiting for dig"
    assert got[POD_SPEC].state == "passed" and got[POD_SPEC].seconds == 1.5
    assert got[SERIAL_SPEC].state == "skipped" and "2 schedulable nodes" in got[SERIAL_SPEC].first_error


def test_a_failure_without_message_takes_the_first_line_of_its_text(tmp_path):
    path = tmp_path / "j.xml"
    path.write_text(f'<testsuites><testsuite><testcase name="[It] {DNS_SPEC}" status="failed">'
                    f"<failure>\n\n  first line  \nsecond</failure></testcase></testsuite></testsuites>")
    assert report.read_junit(path)[0].first_error == "first line"


def test_the_serial_phase_fills_in_what_the_parallel_phase_left_out(tmp_path):
    parallel = junit(tmp_path / "p.xml", [(POD_SPEC, "passed", ""), (SERIAL_SPEC, "filtered", "")])
    serial = junit(tmp_path / "s.xml", [(POD_SPEC, "filtered", ""), (SERIAL_SPEC, "failed", "rollback restarted")])
    side = report.read_side([parallel, serial])
    assert side[POD_SPEC].state == "passed"
    assert side[SERIAL_SPEC].state == "failed"
    assert report.counts(side) == {"passed": 1, "failed": 1, "skipped": 0}


def test_summary_says_whether_the_host_fails_a_tenant_failure_too(tmp_path):
    tenant = report.read_side([junit(tmp_path / "t.xml", [
        (POD_SPEC, "passed", ""), (DNS_SPEC, "failed", "no answer"), (ISSUER_SPEC, "failed", "unreachable")])])
    host = report.read_side([junit(tmp_path / "h.xml", [
        (POD_SPEC, "failed", "host only"), (DNS_SPEC, "failed", "no answer either"), (ISSUER_SPEC, "passed", "")])])
    summary = report.summarize({"tenant": tenant, "host": host})
    assert summary["counts"] == {"tenant": {"passed": 1, "failed": 2, "skipped": 0},
                                 "host": {"passed": 1, "failed": 2, "skipped": 0}}
    by_spec = {item["spec"]: item for item in summary["not_passing"]}
    assert by_spec[DNS_SPEC]["host"] == "failed" and by_spec[DNS_SPEC]["host_first_error"] == "no answer either"
    assert by_spec[ISSUER_SPEC]["host"] == "passed"
    assert summary["failed_only_on_host"] == [POD_SPEC]
    text = report.markdown(summary, "Conformance")
    assert "| passed | 1 | 1 |" in text and f"`{ISSUER_SPEC}` — unreachable (host: passed)" in text


def test_a_tenant_run_without_host_says_not_run(tmp_path):
    tenant = report.read_side([junit(tmp_path / "t.xml", [(DNS_SPEC, "failed", "no answer")])])
    summary = report.summarize({"tenant": tenant})
    assert summary["not_passing"][0]["host"] == "not run"
    assert "| tenant |" in report.markdown(summary, "Conformance").splitlines()[2]


def test_write_puts_both_files_in_the_report_directory(tmp_path):
    path = junit(tmp_path / "t.xml", [(POD_SPEC, "passed", "")])
    report.write(tmp_path, {"tenant": [path]}, "Conformance v1.36.3")
    assert json.loads((tmp_path / "summary.json").read_text())["counts"]["tenant"]["passed"] == 1
    assert "Every spec run on the tenant passed." in (tmp_path / "summary.md").read_text()


def test_smoke_focus_matches_each_named_spec_and_no_longer_name():
    pattern = re.compile(specs.focus(specs.SMOKE))
    full = {name: f"{name} [Conformance]" for name in specs.SMOKE}
    assert all(pattern.search(text) for text in full.values())
    # a name that only starts like a smoke spec is another spec
    assert not pattern.search("[sig-storage] Secrets should be consumable from pods in volume with mappings "
                              "[NodeConformance] [Conformance]")
    assert pattern.search("[sig-storage] Secrets should be consumable from pods in volume [NodeConformance] "
                          "[Conformance]")
    assert len(set(specs.SMOKE)) == len(specs.SMOKE) >= 15


def test_repo_list_sends_every_upstream_registry_of_the_built_images_to_the_prefix():
    listed = images.repo_list()
    assert {listed[key] for key in ("promoterE2eRegistry", "gcRegistry", "gcEtcdRegistry")} == {images.PREFIX}
    assert "invalid" in listed["invalidRegistry"]  # specs that expect a failing pull still get one


def test_a_host_only_run_does_not_claim_the_tenant_passed(tmp_path):
    host = report.read_side([junit(tmp_path / "h.xml", [(POD_SPEC, "passed", "")])])
    text = report.markdown(report.summarize({"host": host}), "Conformance")
    assert "The tenant was not run." in text and "tenant passed" not in text


def test_a_reported_name_focuses_that_spec_again():
    reported = ("[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should be able to deny pod and "
                "configmap creation [Conformance] [sig-api-machinery, Conformance]")
    text = specs.spec_text(reported)
    assert text.endswith("configmap creation [Conformance]")
    assert re.search(specs.focus([text]), text)
    assert specs.spec_text(DNS_SPEC) == DNS_SPEC  # no label list: nothing to strip


def test_a_gomega_expectation_is_told_in_one_line_with_what_it_wanted():
    message = ("Expected\n    <string>: PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n    NAME=\"Debian GNU/Linux\"\n"
               "to contain substring\n    <string>: Alpine Linux\n")
    assert report.first_line(message) == ('Expected <string>: PRETTY_NAME="Debian GNU/Linux 12 (bookworm)" … '
                                          "to contain substring <string>: Alpine Linux")
    assert report.first_line("Expected\n    <int>: 1\nto equal\n    <int>: 2") == \
        "Expected <int>: 1 to equal <int>: 2"
    assert report.first_line("Timed out after 30s.\nmore") == "Timed out after 30s."
