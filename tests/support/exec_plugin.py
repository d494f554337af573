"""A real exec credential plugin for tests: a small program that hands out the credentials it is given, in
order (the last one ever after), and records every request it gets ($KUBERNETES_EXEC_INFO, args, env)."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import yaml

V1 = "client.authentication.k8s.io/v1"

PLUGIN = """#!{python}
import json, os, sys, pathlib
here = pathlib.Path(__file__).resolve().parent
runs = here / "runs.jsonl"
with runs.open("a") as f:
    f.write(json.dumps({{"info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]), "args": sys.argv[1:],
                        "env": os.environ.get("PLUGIN_REGION")}}) + "\\n")
status = json.loads((here / "answers.json").read_text())
n = len(runs.read_text().splitlines())
answer = status[min(n, len(status)) - 1]
if "exit" in answer:
    sys.stdout.write("token-that-must-not-leak")
    sys.stderr.write(answer["stderr"])
    sys.exit(answer["exit"])
if "sleep" in answer:
    import time; time.sleep(answer["sleep"])
print(json.dumps(answer) if "raw" not in answer else answer["raw"])
"""


def credential(status: dict, api_version: str = V1) -> dict:
    return {"apiVersion": api_version, "kind": "ExecCredential", "status": status}


def in_minutes(minutes: float) -> str:
    at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=minutes)
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")  # nine digits, as Go writes them


def plugin_dir(base: Path, *answers: dict) -> Path:
    """base/bin/get-token, answering `answers` in order."""
    bin_dir = base / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "get-token"
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(0o755)
    (bin_dir / "answers.json").write_text(json.dumps(list(answers)))
    return bin_dir


def runs(bin_dir: Path) -> list[dict]:
    path = bin_dir / "runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def exec_kubeconfig(apiserver, directory: Path, proxy_url: str | None = None) -> Path:
    """The API server's admin kubeconfig with its user replaced by directory/bin/get-token (plugin_dir)."""
    config = yaml.safe_load(apiserver.kubeconfig.read_text())
    config["users"][0]["user"] = {"exec": {"apiVersion": V1, "command": "./bin/get-token", "interactiveMode": "Never",
                                           "provideClusterInfo": True}}
    if proxy_url:
        config["clusters"][0]["cluster"]["proxy-url"] = proxy_url
    path = directory / "exec.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path
