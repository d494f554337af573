"""The Ansible inventory of the machines: groups control_plane and workers, reached through the agent."""

from __future__ import annotations

import yaml

from . import image
from .config import Sandbox
from .pki import client_files

GROUPS = ("control_plane", "workers")


def render(sb: Sandbox) -> str:
    files = client_files(sb)
    children: dict[str, dict] = {group: {"hosts": {}} for group in GROUPS}
    for node in sb.nodes:
        children[node.role]["hosts"][node.name] = {
            "ansible_host": node.ip,
            "ansible_connection": "kosmos.kubenest.nodeagent",
            "ansible_python_interpreter": "/usr/bin/python3",
            "kubenest_agent_ca_file": files["ca"],
            "kubenest_agent_cert_file": files["cert"],
            "kubenest_agent_key_file": files["key"],
        }
    header = "# Written by `make nodes` (python -m sandbox.machines up); removed by `make nodes-down`.\n"
    return header + yaml.safe_dump({"all": {"children": children}}, sort_keys=False)


def write(sb: Sandbox) -> bool:
    return image.write_file(sb.inventory_path, render(sb).encode(), 0o644)
