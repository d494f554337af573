"""The smoke subset of the upstream conformance suite judges a virtual cluster, as `make conformance` does in full.

`python -m sandbox.conformance --smoke` builds the suite and its images (make test builds them beside its
integration and e2e tiers, hence this module runs last), pushes the images to the sandbox's registry, makes a
VirtualCluster with two promoted workers, runs the specs of sandbox/conformance/specs.py on it, and deletes it
again. Should the tenant fail a spec, the host runs the failed ones as the baseline, so the report says whether
the defect is the tenant's or the host's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sandbox.conformance import specs
from sandbox.conformance.__main__ import NAME, NAMESPACE
from tests.support.virtualclusters import get_vc, own_operator

from .conftest import run_python

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(3600)]

# A cold build of e2e.test and the images may still be under way when this module starts.
SUITE_TIMEOUT_S = 3300


@pytest.fixture(scope="module")
def operator(host_cluster, tmp_path_factory):
    sb, api = host_cluster
    log_dir = tmp_path_factory.mktemp("operator")
    with own_operator(sb, api, (), log_dir, "--node-wait-interval", "5", "--resync-interval", "10"):
        yield api, log_dir


def test_the_smoke_subset_of_the_upstream_suite_passes_on_a_virtual_cluster(operator):
    api, log_dir = operator
    proc = run_python("-m", "sandbox.conformance", "--smoke", "--no-serial", "--sides", "host,tenant",
                      "--baseline", "failures", timeout=SUITE_TIMEOUT_S, check=False)
    reports = re.search(r"^reports: (.+)$", proc.stdout, re.M)
    assert reports, f"no report written (status {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    print(Path(reports.group(1), "conformance.log").read_text())  # the run's steps and their times
    summary = json.loads((Path(reports.group(1)) / "summary.json").read_text())
    tenant = summary["counts"]["tenant"]
    assert tenant == {"passed": len(specs.SMOKE), "failed": 0, "skipped": 0}, (
        f"{json.dumps(summary, indent=2)}\nreports: {reports.group(1)}; operator log: {log_dir}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert get_vc(api, NAMESPACE, NAME) is None, "the judged VirtualCluster outlived the run"
