"""A real Prometheus (Debian's package, .ci/system-deps.sh) for tests: scrapes the targets it is given every second
and answers PromQL queries through its HTTP API."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.support.procs import ManagedProcess, free_ports, wait_until

SCRAPE_INTERVAL = "1s"


class Prometheus:
    """Context manager: `scrape_configs` as in prometheus.yml (written as JSON, which is YAML too)."""

    def __init__(self, scrape_configs: list[dict], log_dir: Path):
        self.scrape_configs = scrape_configs
        self.log_dir = Path(log_dir)
        self.work: Path | None = None
        self.process: ManagedProcess | None = None
        self.url = ""

    def __enter__(self) -> Prometheus:
        binary = shutil.which("prometheus")
        if binary is None:
            raise FileNotFoundError("prometheus is not installed (Debian package prometheus; make install)")
        self.work = Path(tempfile.mkdtemp(prefix="kubenest-prometheus-"))
        config = self.work / "prometheus.yml"
        config.write_text(json.dumps({"global": {"scrape_interval": SCRAPE_INTERVAL,
                                                 "evaluation_interval": SCRAPE_INTERVAL},
                                      "scrape_configs": self.scrape_configs}, indent=1))
        (port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{port}"
        self.process = ManagedProcess("prometheus", [
            binary, f"--config.file={config}", f"--storage.tsdb.path={self.work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
            self.log_dir / "prometheus.log").start()
        wait_until(lambda: _ok(self.url + "/-/ready"), 60, "prometheus ready", self.process)
        return self

    def __exit__(self, *_exc) -> None:
        if self.process is not None:
            self.process.stop()
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)

    def query(self, promql: str) -> list[dict]:
        """The instant vector `promql` evaluates to now: [{metric: {labels}, value: float}]."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        return [{"metric": r["metric"], "value": float(r["value"][1])} for r in answer["data"]["result"]]

    def value(self, promql: str) -> float | None:
        """The single value of `promql`, or None while it has none."""
        found = self.query(promql)
        return found[0]["value"] if len(found) == 1 else None

    def targets(self) -> dict[str, str]:
        """Each scrape job's health (up, down, unknown) and its last error, by job."""
        with urllib.request.urlopen(self.url + "/api/v1/targets", timeout=10) as response:
            active = json.loads(response.read())["data"]["activeTargets"]
        return {t["labels"]["job"]: f"{t['health']} {t.get('lastError') or ''}".strip() for t in active}

    def wait_for(self, promql: str, predicate, timeout: float, what: str) -> float:
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            last = self.value(promql)
            if last is not None and predicate(last):
                return last
            time.sleep(1)
        raise AssertionError(f"{what}: {promql} is {last} after {timeout:.0f}s; targets {self.targets()}")


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False
