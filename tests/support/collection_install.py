"""The collection as users get it: the tarball `ansible-galaxy collection build` makes, installed into a clean
virtualenv with ansible-core and only the Python packages the collection declares; its declared collections come
from the `ansible` package this checkout's virtualenv holds (Galaxy is not reachable here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON", "VIRTUAL_ENV"))}
    return {**env, **extra}


def build_tarball(out: Path) -> Path:
    subprocess.run([str(VENV_BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(REPO)],
                   check=True, capture_output=True, text=True, cwd=out, env=clean_env(PATH=os.environ["PATH"]))
    return next(out.glob("kosmos-kubenest-*.tar.gz"))


def clean_install(tarball: Path, root: Path) -> dict:
    """{venv, collection (the installed copy), env (for running its ansible commands)}."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=clean_env(PATH=os.environ["PATH"]))
    core = subprocess.run([str(VENV_BIN / "python"), "-c", "import ansible.release as r; print(r.__version__)"],
                          check=True, capture_output=True, text=True).stdout.strip()
    colls = root / "collections"
    env = clean_env(PATH=f"{venv / 'bin'}:{os.environ['PATH']}", ANSIBLE_COLLECTIONS_PATH=str(colls))
    subprocess.run([str(venv / "bin/pip"), "install", "-q", f"ansible-core=={core}"], check=True, env=env)
    subprocess.run([str(venv / "bin/ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(colls),
                    str(tarball)], check=True, capture_output=True, env=env)
    installed = colls / "ansible_collections/kosmos/kubenest"
    subprocess.run([str(venv / "bin/pip"), "install", "-q", "-r", str(installed / "requirements.txt"),
                    "-c", str(REPO / "constraints.txt")], check=True, env=env)
    manifest = json.loads((installed / "MANIFEST.json").read_text())
    source = next((VENV_BIN.parent / "lib").glob("python*/site-packages/ansible_collections"))
    for name in manifest["collection_info"]["dependencies"]:
        ns, coll = name.split(".")
        shutil.copytree(source / ns / coll, colls / "ansible_collections" / ns / coll)
    return {"venv": venv, "collection": installed, "env": env}
