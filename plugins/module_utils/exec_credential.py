# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Credentials from a kubeconfig's `exec` plugin, the way EKS, GKE, AKS and OIDC logins hand them out.

The protocol is client-go's (client.authentication.k8s.io v1 and v1beta1): the plugin is started with the
request in $KUBERNETES_EXEC_INFO and prints an ExecCredential whose status holds a bearer token or a client
certificate and key, valid until its expirationTimestamp when it names one. The credential is kept in memory
only, until it expires or the server refuses it; it is never written anywhere and never part of an error.
Standard library only.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import shutil
import subprocess
import threading

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
# A plugin that has not answered after this long is stopped (a login waiting for a browser, a hung network).
TIMEOUT = 60.0
# A credential this close to its expiry is renewed before a request rather than refused in the middle of one.
EXPIRY_SKEW = datetime.timedelta(seconds=10)
STDERR_TAIL = 300
RFC3339 = re.compile(r"^(?P<seconds>\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d)(?:\.(?P<fraction>\d+))?"
                     r"(?P<zone>[Zz]|[+-]\d\d:\d\d)$")


class ExecCredentialError(Exception):
    """The plugin could not be run or its answer is not a credential; the message never holds what it printed
    on stdout, only its exit status and the end of what it printed on stderr."""


class Credential:
    """What one run of the plugin gave: a token and/or a client certificate pair (PEM bytes)."""

    def __init__(self, token=None, cert_pem=None, key_pem=None, expires=None):
        self.token = token
        self.cert_pem = cert_pem
        self.key_pem = key_pem
        self.expires = expires

    def fresh(self, now=None):
        if self.expires is None:
            return True
        now = now or datetime.datetime.now(datetime.timezone.utc)
        return now + EXPIRY_SKEW < self.expires


def _rfc3339(value, what):
    # Go writes RFC 3339 with "Z" and up to nine fractional digits; older Pythons read neither.
    match = RFC3339.match(value) if isinstance(value, str) else None
    try:
        if not match:
            raise ValueError(value)
        fraction = (match.group("fraction") or "")[:6].ljust(6, "0")
        zone = "+00:00" if match.group("zone") in ("Z", "z") else match.group("zone")
        parsed = datetime.datetime.fromisoformat("%s.%s%s" % (match.group("seconds"), fraction, zone))
    except ValueError:
        raise ExecCredentialError("%s gave the expirationTimestamp %r, which is not an RFC 3339 time"
                                  % (what, value)) from None
    return parsed


def cluster_info(cluster, ca_pem=None):
    """spec.cluster of the request, for plugins that set provideClusterInfo: the kubeconfig's cluster entry, with
    the CA as data (base64 of PEM) whether the kubeconfig holds it or names a file."""
    info = {"server": cluster.get("server")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if cluster.get(key) is not None:
            info[key] = cluster[key]
    if ca_pem:
        info["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = extension.get("extension")
    return info


class ExecPlugin:
    """One kubeconfig user's `exec` section. `base_dir` is the kubeconfig's directory: a relative command path
    with a directory in it is taken from there, as kubectl does; a bare name is looked up on $PATH."""

    def __init__(self, spec, base_dir, cluster=None, ca_pem=None, user_name=None):
        if not isinstance(spec, dict):
            raise ExecCredentialError("the kubeconfig's exec section is not a mapping")
        self.user_name = user_name
        self.api_version = spec.get("apiVersion")
        if self.api_version not in API_VERSIONS:
            raise ExecCredentialError("the exec plugin of user %r asks for apiVersion %r; supported: %s"
                                      % (user_name, self.api_version, ", ".join(API_VERSIONS)))
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            raise ExecCredentialError("the exec plugin of user %r names no command" % (user_name,))
        if os.sep in command and not os.path.isabs(command):
            command = os.path.normpath(os.path.join(base_dir, command))
        self.command = command
        self.args = spec.get("args") or []
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            raise ExecCredentialError("the exec plugin of user %r has args that are not a list of strings"
                                      % (user_name,))
        self.env = {}
        for entry in spec.get("env") or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) \
                    or not isinstance(entry.get("value"), str):
                raise ExecCredentialError("the exec plugin of user %r has an env entry without a name and value"
                                          % (user_name,))
            self.env[entry["name"]] = entry["value"]
        mode = spec.get("interactiveMode")
        if mode is None and self.api_version.endswith("/v1beta1"):
            mode = "IfAvailable"
        if mode not in INTERACTIVE_MODES:
            raise ExecCredentialError("the exec plugin of user %r has interactiveMode %r; one of %s is required"
                                      % (user_name, mode, ", ".join(INTERACTIVE_MODES)))
        if mode == "Always":
            # Tasks run without a terminal: a plugin that must ask the user something cannot work here.
            raise ExecCredentialError("the exec plugin of user %r needs a terminal (interactiveMode: Always); "
                                      "log in beforehand or use a plugin that runs unattended" % (user_name,))
        self.install_hint = spec.get("installHint")
        self.cluster = cluster_info(cluster, ca_pem) if spec.get("provideClusterInfo") and cluster else None
        self._credential = None
        # Clients of one connection in several threads (ClientPool) start the plugin once between them.
        self._lock = threading.Lock()
        self.runs = 0

    def credential(self):
        """The current credential, from the plugin when there is none yet or it has expired."""
        with self._lock:
            if self._credential is None or not self._credential.fresh():
                self._credential = self._run()
            return self._credential

    def invalidate(self):
        """The server refused the credential: the next request asks the plugin again."""
        with self._lock:
            self._credential = None

    def _request(self):
        spec = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = self.cluster
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})

    def _run(self):
        executable = self.command if os.sep in self.command else shutil.which(self.command)
        if not executable or not os.path.isfile(executable):
            hint = (" (%s)" % " ".join(self.install_hint.split())) if self.install_hint else ""
            raise ExecCredentialError("the exec plugin %r of user %r is not installed%s"
                                      % (self.command, self.user_name, hint))
        env = dict(os.environ, **self.env)
        env["KUBERNETES_EXEC_INFO"] = self._request()
        self.runs += 1
        try:
            proc = subprocess.run([executable] + self.args, env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            raise ExecCredentialError("the exec plugin %r of user %r gave no answer within %d s"
                                      % (self.command, self.user_name, TIMEOUT)) from None
        except OSError as exc:
            raise ExecCredentialError("cannot run the exec plugin %r of user %r: %s"
                                      % (self.command, self.user_name, exc.strerror)) from None
        if proc.returncode != 0:
            tail = " ".join(proc.stderr.decode(errors="replace").split())[-STDERR_TAIL:]
            raise ExecCredentialError("the exec plugin %r of user %r exited with status %d%s"
                                      % (self.command, self.user_name, proc.returncode,
                                         (": " + tail) if tail else ""))
        return self.parse(proc.stdout)

    def parse(self, stdout):
        what = "the exec plugin %r of user %r" % (self.command, self.user_name)
        try:
            answer = json.loads(stdout)
        except ValueError:
            raise ExecCredentialError("%s printed no JSON ExecCredential" % what) from None
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            raise ExecCredentialError("%s printed something other than an ExecCredential" % what)
        if answer.get("apiVersion") != self.api_version:
            raise ExecCredentialError("%s answered in %r, not the %r it was asked for"
                                      % (what, answer.get("apiVersion"), self.api_version))
        status = answer.get("status")
        if not isinstance(status, dict):
            raise ExecCredentialError("%s answered without a status" % what)
        token = status.get("token") or None
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if bool(cert) != bool(key):
            raise ExecCredentialError("%s gave a client certificate without its key, or a key without its "
                                      "certificate" % what)
        if not token and not cert:
            raise ExecCredentialError("%s gave neither a token nor a client certificate" % what)
        if not all(isinstance(v, str) for v in (token or "", cert or "", key or "")):
            raise ExecCredentialError("%s gave a credential that is not text" % what)
        expires = status.get("expirationTimestamp")
        return Credential(token=token, cert_pem=cert.encode() if cert else None, key_pem=key.encode() if key else None,
                          expires=_rfc3339(expires, what) if expires else None)
