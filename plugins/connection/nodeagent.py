# -*- coding: utf-8 -*-
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: nodeagent
short_description: Run tasks on a node through the kubenest agent (websocket + mutual TLS)
description:
  - Executes commands and transfers files through C(kubenest-agent) running on the node, instead of SSH.
  - Every host gets one persistent websocket for the whole play, held by a small local helper process
    (like OpenSSH's ControlPersist); it reconnects transparently if the connection dropped between tasks.
  - The agent authenticates the controller by its client certificate and runs commands as root, so
    C(become) to root is a no-op; become to another user still uses the configured become method.
  - Requires the C(kubenest-agent) Python package on the controller.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
version_added: 1.0.0
options:
  remote_addr:
    description: Address of the node's agent.
    type: str
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: kubenest_agent_host
  port:
    description: TCP port the agent listens on.
    type: int
    default: 7443
    vars:
      - name: ansible_port
      - name: kubenest_agent_port
    env:
      - name: KUBENEST_AGENT_PORT
    ini:
      - section: kubenest_agent
        key: port
  remote_user:
    description:
      - The user commands run as. The agent always runs them as the user it runs as (root), so this
        is fixed; it lets Ansible skip a become to root.
    type: str
    default: root
  server_name:
    description: Name to verify in the agent's certificate. Defaults to O(remote_addr).
    type: str
    vars:
      - name: kubenest_agent_server_name
  cert_sha256:
    description:
      - SHA-256 fingerprints of the agent certificates accepted for this node (hex, colons and a
        C(sha256:) prefix allowed). When set, a certificate the CA signed but not listed is refused.
      - The M(kosmos.kubenest.global_node) records them when a returned node's agent certificate is
        re-issued, and the P(kosmos.kubenest.globalnodes#inventory) inventory sets this for each node, so an
        older certificate of the node is no longer accepted.
    type: list
    elements: str
    default: []
    vars:
      - name: kubenest_agent_cert_sha256
  ca_file:
    description: CA certificate that signed the agents' server certificates.
    type: path
    required: true
    vars:
      - name: kubenest_agent_ca_file
    env:
      - name: KUBENEST_AGENT_CA_FILE
    ini:
      - section: kubenest_agent
        key: ca_file
  cert_file:
    description: The controller's client certificate.
    type: path
    required: true
    vars:
      - name: kubenest_agent_cert_file
    env:
      - name: KUBENEST_AGENT_CERT_FILE
    ini:
      - section: kubenest_agent
        key: cert_file
  key_file:
    description: Private key of the controller's client certificate.
    type: path
    required: true
    vars:
      - name: kubenest_agent_key_file
    env:
      - name: KUBENEST_AGENT_KEY_FILE
    ini:
      - section: kubenest_agent
        key: key_file
  connect_timeout:
    description: Seconds to wait for TCP, TLS and websocket handshakes.
    type: float
    default: 10
    vars:
      - name: kubenest_agent_connect_timeout
    env:
      - name: KUBENEST_AGENT_CONNECT_TIMEOUT
    ini:
      - section: kubenest_agent
        key: connect_timeout
  command_timeout:
    description:
      - Seconds after which the agent kills a command's whole process group; C(0) means no limit.
      - A timed-out command fails with exit code 137 and a message on stderr.
    type: float
    default: 0
    vars:
      - name: kubenest_agent_command_timeout
    env:
      - name: KUBENEST_AGENT_COMMAND_TIMEOUT
  persist_seconds:
    description: How long the local helper keeps an idle connection open.
    type: float
    default: 60
    vars:
      - name: kubenest_agent_persist_seconds
    env:
      - name: KUBENEST_AGENT_PERSIST_SECONDS
    ini:
      - section: kubenest_agent
        key: persist_seconds
  control_dir:
    description: Private directory for the local helper's sockets and logs.
    type: path
    default: ~/.ansible/kubenest-agent
    env:
      - name: KUBENEST_AGENT_CONTROL_DIR
    ini:
      - section: kubenest_agent
        key: control_dir
  superseded_cert_file:
    description:
      - A client certificate that O(cert_file) replaces. Before the first task on a node, its agent is asked to
        refuse from then on this certificate and every other one for the same client name (common name) issued
        no later than it, so the predecessor of a re-issued certificate, and any copy of its key, stop working
        on every node the play reaches.
      - The agent never refuses a certificate issued after the one this connection presents, so an old key
        cannot lock out its successor.
      - An agent too old for the request keeps accepting the predecessor; the play goes on and the helper's log
        says so.
    type: path
    vars:
      - name: kubenest_agent_superseded_cert_file
    env:
      - name: KUBENEST_AGENT_SUPERSEDED_CERT_FILE
  audit_dir:
    description:
      - A directory on the controller where the agents' audit lines are kept, one C(<node>.jsonl) file per node,
        so that a root process on a node given to a tenant cannot rewrite the record of what was done there and
        who tried to connect. The node is the common name of the agent's certificate (checked against O(ca_file)
        when connecting), so a task delegated to another host lands in that host's record.
      - The lines are taken from the agent when the connection helper connects and before it exits; each line
        arrives once, and lines the agent could not keep (restarted, or more than it holds in memory between two
        visits) show as an C(audit_gap) line.
      - The operator sets it for its runs and writes the lines to its own log.
    type: path
    vars:
      - name: kubenest_agent_audit_dir
    env:
      - name: KUBENEST_AGENT_AUDIT_DIR
    ini:
      - section: kubenest_agent
        key: audit_dir
  audit_node:
    description: The node's name in the audit record of O(audit_dir) when the agent's certificate has no common name.
    type: str
    vars:
      - name: inventory_hostname
  warm_modules:
    description:
      - Let the agent run pipelined Python modules in a warm interpreter that has the Ansible module
        runtime preloaded (forked per task; falls back to a fresh interpreter when the payload's
        module_utils differ from the preloaded ones). Turn off to always start a fresh interpreter.
    type: bool
    default: true
    vars:
      - name: kubenest_agent_warm_modules
    env:
      - name: KUBENEST_AGENT_WARM_MODULES
  pipelining:
    description: Send modules over the command's stdin instead of copying them first.
    type: bool
    default: true
    vars:
      - name: ansible_pipelining
      - name: kubenest_agent_pipelining
    env:
      - name: ANSIBLE_PIPELINING
    ini:
      - section: defaults
        key: pipelining
"""

EXAMPLES = r"""
# inventory.yml
all:
  vars:
    ansible_connection: kosmos.kubenest.nodeagent
    kubenest_agent_ca_file: pki/ca.crt
    kubenest_agent_cert_file: pki/client.crt
    kubenest_agent_key_file: pki/client.key
  hosts:
    node1:
      ansible_host: 10.0.0.11
"""

import os

from ansible.errors import AnsibleConnectionFailure, AnsibleError, AnsibleFileNotFound
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import AgentClient, UnixFrameTransport
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import (
    AgentConnectionLost,
    AgentOpError,
    AgentUnreachable,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.mux_client import connect_or_spawn
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.pipelining import python_module_command
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.protocol import encode
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import normalize_pins

display = Display()


class Connection(ConnectionBase):
    """Connection through kubenest-agent."""

    transport = "kosmos.kubenest.nodeagent"
    has_pipelining = True
    has_tty = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._client = None

    def _where(self):
        return "%s:%s" % (self.get_option("remote_addr"), self.get_option("port"))

    def _connect(self):
        if self._connected:
            return self
        host = self.get_option("remote_addr")
        netloc = "[%s]" % host if ":" in host else host
        uri = "wss://%s:%s/" % (netloc, self.get_option("port"))
        try:
            pin = ",".join(normalize_pins(self.get_option("cert_sha256")))
        except ValueError as exc:
            raise AnsibleError("kubenest_agent_cert_sha256 for %s: %s" % (host, to_native(exc)))
        try:
            sock = connect_or_spawn(
                mux_dir=os.path.expanduser(self.get_option("control_dir")), uri=uri,
                server_name=self.get_option("server_name") or host,
                ca=self.get_option("ca_file"), cert=self.get_option("cert_file"), key=self.get_option("key_file"),
                connect_timeout=self.get_option("connect_timeout"),
                idle_timeout=self.get_option("persist_seconds"), pin=pin,
                superseded=self.get_option("superseded_cert_file") or "",
                audit_dir=self.get_option("audit_dir") or "", audit_node=self.get_option("audit_node") or host)
        except AgentUnreachable as exc:
            raise AnsibleConnectionFailure(to_native(exc))
        self._client = AgentClient(UnixFrameTransport(sock))
        self._connected = True
        display.vvv("ESTABLISH KUBENEST AGENT CONNECTION TO %s" % uri, host=host)
        return self

    def _call(self, what, func, *args, **kwargs):
        try:
            return func(*args, **kwargs)
        except AgentUnreachable as exc:  # includes a connection lost mid-operation
            self.close()
            raise AnsibleConnectionFailure("%s on %s: %s" % (what, self._where(), to_native(exc)))
        except AgentOpError as exc:
            raise AnsibleError("%s on %s failed: %s" % (what, self._where(), to_native(exc)))

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        self._connect()
        display.vvv("EXEC %s" % cmd, host=self.get_option("remote_addr"))
        timeout = self.get_option("command_timeout") or None
        module = python_module_command(cmd) if in_data and self.get_option("warm_modules") else None
        if module:
            interpreter, env = module
            result = self._call("exec", self._client.exec, argv=[interpreter], env=env, stdin=in_data,
                                timeout=timeout, runner="python")
        else:
            result = self._call("exec", self._client.exec, shell=cmd, stdin=in_data, timeout=timeout)
        stderr = result.stderr
        if result.timed_out:
            stderr += to_bytes("\nkubenest-agent: command killed after %ss timeout\n" % timeout)
        return result.code, result.stdout, stderr

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        self._connect()
        display.vvv("PUT %s TO %s" % (in_path, out_path), host=self.get_option("remote_addr"))
        if not os.path.isfile(to_bytes(in_path, errors="surrogate_or_strict")):
            raise AnsibleFileNotFound("file or module does not exist: %s" % to_native(in_path))
        self._call("put %s" % out_path, self._client.put, in_path, out_path)

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        self._connect()
        display.vvv("FETCH %s TO %s" % (in_path, out_path), host=self.get_option("remote_addr"))
        self._call("fetch %s" % in_path, self._client.fetch, in_path, out_path)

    def reset(self):
        """Drop the persistent connection so the next task opens a fresh one."""
        if self._connected:
            try:
                self._client.transport.send(encode({"op": "mux_shutdown", "id": 0}))
            except AgentConnectionLost:
                pass
        self.close()

    def close(self):
        if self._client is not None:
            self._client.close()
            self._client = None
        self._connected = False
