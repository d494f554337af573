"""The Cilium agent's init container makes the tunnel device the agent would make: its script, as the manifest
carries it, runs with real iproute2 in a network namespace of the test's own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid

import pytest
from ansible_collections.kosmos.kubenest.plugins.filter.cilium_manifests import cilium_manifests

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/usr/sbin/ip") or shutil.which("busybox") is None,
    reason="needs root, iproute2 and busybox")


@pytest.fixture
def netns():
    name = "kn-vx-" + uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, timeout=30)


def _tunnel_step(tunnel_port):
    [agent] = [obj for obj in cilium_manifests({
        "agent_image": "kubenest.local/cilium:v1.20.2", "operator_image": "kubenest.local/cilium-operator:v1.20.2",
        "api_host": "198.18.0.11", "api_port": 31443, "tunnel_port": tunnel_port}) if obj["kind"] == "DaemonSet"]
    [init] = agent["spec"]["template"]["spec"]["initContainers"]
    return init["command"][3].splitlines()[-1]


def _run(netns, script):
    # busybox sh -e, as in the image: a failed step fails the container.
    return subprocess.run(["ip", "netns", "exec", netns, shutil.which("busybox"), "sh", "-ec", script],
                          capture_output=True, text=True, timeout=60, check=False)


def _device(netns):
    out = subprocess.run(["ip", "netns", "exec", netns, "ip", "-d", "-j", "link", "show", "cilium_vxlan"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    [link] = json.loads(out)
    return link["ifindex"], link["linkinfo"]["info_kind"], link["linkinfo"]["info_data"]


def test_a_flow_based_vxlan_device_on_the_configured_port_is_made_once(netns):
    step = _tunnel_step(8473)
    first = _run(netns, step)
    assert first.returncode == 0, first.stderr
    index, kind, data = _device(netns)
    # What Cilium's loader asks netlink for: flow-based (external), on its port, no learning.
    assert (kind, data["external"], data["port"], data["learning"]) == ("vxlan", True, 8473, False)

    again = _run(netns, step)
    assert again.returncode == 0, again.stderr
    assert _device(netns)[0] == index  # kept: the agent's datapath hash holds the device's index


def test_an_existing_device_on_another_port_is_left_to_the_agent(netns):
    assert _run(netns, _tunnel_step(8472)).returncode == 0
    index, _kind, data = _device(netns)
    result = _run(netns, _tunnel_step(8473))
    assert result.returncode == 0, result.stderr
    assert _device(netns)[0] == index and data["port"] == 8472
