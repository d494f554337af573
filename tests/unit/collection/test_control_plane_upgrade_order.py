"""A control plane changing its Kubernetes version rolls its API servers out before its controllers (the
version-skew policy); any other run creates all three together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def together(tmp_path_factory):
    playbook = tmp_path_factory.mktemp("order") / "play.yml"
    tasks = [{"ansible.builtin.include_vars": str(REPO / "roles/control_plane/defaults/main/hosted.yml")},
             {"ansible.builtin.debug": {"msg": "{{ control_plane_hosted_together | bool }}"}}]
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    ansible = Path(sys.executable).parent / "ansible-playbook"
    env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}

    def shown(vc: dict, **site) -> bool:
        extra = {"control_plane_vc": {"namespace": "ns", "name": "vc", **vc}, **site}
        done = subprocess.run([str(ansible), "-i", "localhost,", "-c", "local", str(playbook), "-e", json.dumps(extra)],
                              capture_output=True, text=True, env=env, timeout=120, check=True)
        return json.loads(done.stdout)["plays"][0]["tasks"][-1]["hosts"]["localhost"]["msg"]
    return shown


def test_a_first_run_and_a_run_at_the_same_version_create_all_three_together(together):
    assert together({"kubernetes_version": "v1.36.3"}) is True
    assert together({"kubernetes_version": "v1.36.3", "running_version": ""}) is True
    assert together({"kubernetes_version": "v1.36.3", "running_version": "v1.36.3"}) is True


def test_a_version_change_rolls_the_api_servers_first(together):
    assert together({"kubernetes_version": "v1.36.3", "running_version": "v1.35.4"}) is False
    assert together({"kubernetes_version": "v1.36.3", "running_version": "v1.36.1"}) is False


def test_images_without_await_ready_never_create_them_together(together):
    assert together({"kubernetes_version": "v1.36.3"}, control_plane_hosted_await_apiserver=False) is False
