# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: globalnodes
short_description: Host nodes (GlobalNodes) as inventory hosts reached through the node agent
version_added: 1.1.0
description:
  - Lists the GlobalNodes of a host cluster as hosts named after them, with C(ansible_host) set to the node's
    IP and C(ansible_connection) to P(kosmos.kubenest.nodeagent#connection), so node-side tasks run through
    the agent. Groups C(globalnodes), C(globalnodes_<state>) and C(vc_<namespace>_<name>) for the virtual
    cluster holding a node.
  - Host variable C(kosmos_globalnode) holds the GlobalNode's state, virtual cluster and labels; labels come
    from the host Nodes and are never evaluated as templates.
  - Host variable C(kubenest_agent_cert_sha256) pins the node's agent certificate once the GlobalNode records
    one (after its certificate was re-issued on return), so an older certificate of the node is refused.
  - The file must end in C(globalnodes.yml) or C(globalnodes.yaml). Usable as an AWX inventory source.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
extends_documentation_fragment:
  - ansible.builtin.constructed
options:
  plugin:
    description: The name of this plugin.
    required: true
    choices: [kosmos.kubenest.globalnodes]
    type: str
  kubeconfig:
    description:
      - Host cluster kubeconfig. Default C($K8S_AUTH_KUBECONFIG), C($KUBECONFIG), in-cluster, C(~/.kube/config).
      - Its user may authenticate as the modules' O(kubeconfig) says, C(exec) credential plugins included.
    type: path
  context:
    description: Context of O(kubeconfig).
    type: str
  agent_ca_file:
    description: CA that signed the agents' server certificates.
    type: path
  agent_cert_file:
    description: Client certificate the agents accept.
    type: path
  agent_key_file:
    description: Key of O(agent_cert_file).
    type: path
  agent_port:
    description: Port the agents listen on.
    type: int
    default: 7443
  python_interpreter:
    description: Python on the nodes.
    type: str
    default: /usr/bin/python3
"""

EXAMPLES = r"""
# globalnodes.yml
plugin: kosmos.kubenest.globalnodes
kubeconfig: ~/.kube/host.conf
agent_ca_file: pki/ca.crt
agent_cert_file: pki/client.crt
agent_key_file: pki/client.key
keyed_groups:
  - key: kosmos_globalnode.labels['topology.kubernetes.io/zone'] | default('none')
    prefix: zone
"""

import re

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable
from ansible.utils.unsafe_proxy import wrap_var
from ansible_collections.kosmos.kubenest.plugins.module_utils.globalnodes import (
    GlobalNodes,
    agent_pins_of,
    name_of,
    owner_of,
    state_of,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import ConfigError, KubeApiError, connect


def group_name(text):
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "kosmos.kubenest.globalnodes"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(("globalnodes.yml", "globalnodes.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            api = connect(self.get_option("kubeconfig"), self.get_option("context"))
            try:
                nodes = GlobalNodes(api).list()
            finally:
                api.close()
        except ConfigError as exc:
            raise AnsibleParserError(str(exc)) from None
        except KubeApiError as exc:
            raise AnsibleParserError("listing GlobalNodes failed: %s" % exc) from None
        self.inventory.add_group("globalnodes")
        connection = {"ansible_connection": "kosmos.kubenest.nodeagent", "ansible_port": self.get_option("agent_port"),
                      "ansible_python_interpreter": self.get_option("python_interpreter")}
        for item in ("ca_file", "cert_file", "key_file"):
            if self.get_option("agent_" + item):
                connection["kubenest_agent_" + item] = self.get_option("agent_" + item)
        strict = self.get_option("strict")
        for node in nodes:
            name = name_of(node)
            spec = node.get("spec") or {}
            host = self.inventory.add_host(name, group="globalnodes")
            state = state_of(node)
            self.inventory.add_group("globalnodes_%s" % state)
            self.inventory.add_child("globalnodes_%s" % state, host)
            owner = owner_of(node)
            if owner:
                group = group_name("vc_%s" % owner.replace("/", "_"))
                self.inventory.add_group(group)
                self.inventory.add_child(group, host)
            for key, value in connection.items():
                self.inventory.set_variable(host, key, value)
            if spec.get("nodeIP"):
                self.inventory.set_variable(host, "ansible_host", wrap_var(spec["nodeIP"]))
            pins = agent_pins_of(node)
            if pins:  # recorded when the agent's certificate was re-issued: an older one is refused
                self.inventory.set_variable(host, "kubenest_agent_cert_sha256", wrap_var(pins))
            facts = {"state": state, "virtualCluster": owner, "nodeIP": spec.get("nodeIP"),
                     "labels": dict(spec.get("labels") or {})}
            # Node labels are written by whoever may label host Nodes: data, never templates.
            self.inventory.set_variable(host, "kosmos_globalnode", wrap_var(facts))
            hostvars = self.inventory.get_host(host).get_vars()
            self._set_composite_vars(self.get_option("compose"), hostvars, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, host, strict=strict)
