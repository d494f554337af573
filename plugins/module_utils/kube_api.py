# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The collection's one Kubernetes REST client, for its action plugins, modules and inventory plugin alike.

It needs only the standard library and PyYAML, which Ansible already loads, so a task that talks to the API
costs a few requests instead of a module process that imports the kubernetes client (about 0.7 s a task),
and a machine that runs a module needs no Kubernetes client installed. It speaks JSON, server-side apply,
discovery of one group-version at a time and the exec stream of a pod; nothing more.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import queue
import ssl
import struct
import tempfile
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.kosmos.kubenest.plugins.module_utils.exec_credential import (
    ExecCredentialError,
    ExecPlugin,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.kubeconfig import kubeconfig_path

try:
    # Ansible itself depends on PyYAML; the guard keeps the import of this file free of anything else.
    import yaml
except ImportError:  # pragma: no cover
    yaml = None

FIELD_MANAGER = "kosmos.kubenest"
# A busy server's Retry-After is followed this many times, each wait capped.
RETRIES = 10
MAX_RETRY_AFTER = 5.0
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
IN_CLUSTER_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# The exec subresource's WebSocket protocol: each message starts with its channel (1 stdout, 2 stderr, 3 the
# command's Status); RFC 6455 fixes the GUID that proves the server understood the upgrade.
EXEC_PROTOCOL = "v4.channel.k8s.io"
WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# Fields that change on every write or belong to the server; left out when comparing before and after.
_VOLATILE_METADATA = ("resourceVersion", "managedFields", "generation", "creationTimestamp", "uid")


# The connection options of every module that talks to the API (documented by the kube_client doc fragment).
KUBECONFIG_ARGS = dict(
    kubeconfig=dict(type="path"),
    context=dict(type="str"),
    request_timeout=dict(type="float", default=30.0),
)


class KubeApiError(Exception):
    """An API request failed: carries the HTTP status and the server's reason, never the request body."""

    def __init__(self, message, status=None, reason=None, server_message=None):
        super().__init__(message)
        self.status = status
        # The server's own words (which field, which rule), when it gave any.
        self.server_message = server_message
        self.reason = reason


class ConfigError(KubeApiError):
    pass


def _b64(data, what):
    try:
        return base64.b64decode(data, validate=True)
    except (ValueError, TypeError):
        raise ConfigError("the kubeconfig's %s is not valid base64" % what) from None


def _named(entries, name, what):
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry.get(what.split()[0]) or {}
    raise ConfigError("the kubeconfig has no %s named %r" % (what, name))


def _proxy(url):
    """(host, port, headers) of an http:// proxy the connection tunnels through with CONNECT."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "http" or not parsed.hostname:
        # socks5 and TLS to the proxy need more than the standard library gives.
        raise ConfigError("the kubeconfig's proxy-url %r is not an http:// proxy, the only kind this client "
                          "supports" % (urllib.parse.urlunsplit(parsed._replace(netloc=parsed.hostname or "")),))
    headers = {}
    if parsed.username is not None:
        pair = "%s:%s" % (urllib.parse.unquote(parsed.username), urllib.parse.unquote(parsed.password or ""))
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    return parsed.hostname, parsed.port or 80, headers


class Connection:
    """Where the API server is and how to authenticate to it."""

    def __init__(self, server, ca_pem=None, cert_pem=None, key_pem=None, token=None, token_file=None,
                 insecure=False, server_name=None, exec_plugin=None, proxy_url=None):
        parsed = urllib.parse.urlsplit(server or "")
        if parsed.scheme not in ("https", "http") or not parsed.hostname:
            raise ConfigError("the API server address %r is not an http(s) URL" % (server,))
        self.server = server.rstrip("/")
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.scheme = parsed.scheme
        self.base_path = parsed.path.rstrip("/")
        self.token = token
        self.token_file = token_file
        self.server_name = server_name
        self.exec_plugin = exec_plugin
        self.proxy = _proxy(proxy_url) if proxy_url else None
        self.proxy_url = proxy_url
        self._ca_pem, self._insecure = ca_pem, insecure
        self._client_pair = (cert_pem, key_pem)
        self._static_context = None
        if self.scheme == "https" and exec_plugin is None:
            self._static_context = self._ssl_context(ca_pem, cert_pem, key_pem, insecure)
        self._exec_context = (None, None)  # (credential, its TLS context)

    @property
    def context(self):
        """The TLS context of the next connection: with an exec plugin's client certificate, the one of its
        current credential (a renewed credential makes a new context, and KubeApi reconnects)."""
        if self.scheme != "https":
            return None
        if self.exec_plugin is None:
            return self._static_context
        credential = self._exec_credential()
        if self._exec_context[0] is not credential:
            self._exec_context = (credential, self._ssl_context(self._ca_pem, credential.cert_pem, credential.key_pem,
                                                                self._insecure))
        return self._exec_context[1]

    @property
    def ca_pem(self):
        return self._ca_pem

    @property
    def insecure(self):
        return self._insecure

    def client_pair(self):
        """(certificate PEM, key PEM) of the next connection, or (None, None): for clients that make their own TLS
        (the operator's kopf), with an exec plugin's current credential."""
        if self.exec_plugin is None:
            return self._client_pair
        credential = self._exec_credential()
        return credential.cert_pem, credential.key_pem

    def _exec_credential(self):
        try:
            return self.exec_plugin.credential()
        except ExecCredentialError as exc:
            raise ConfigError(str(exc)) from None

    def credential_refused(self):
        """The server answered 401: True when asking again can help (an exec plugin gives a new credential)."""
        if self.exec_plugin is None:
            return False
        self.exec_plugin.invalidate()
        return True

    @staticmethod
    def _ssl_context(ca_pem, cert_pem, key_pem, insecure):
        context = ssl.create_default_context(cadata=ca_pem.decode() if ca_pem else None)
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cert_pem and key_pem:
            # ssl loads client pairs only from files: write them to a private directory for the one call.
            with tempfile.TemporaryDirectory(prefix="kubenest-api-") as tmp:
                cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
                for path, data in ((cert_path, cert_pem), (key_path, key_pem)):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(data)
                try:
                    context.load_cert_chain(cert_path, key_path)
                except ssl.SSLError as exc:
                    raise ConfigError("the kubeconfig's client certificate and key do not load: %s"
                                      % exc.reason) from None
        return context

    def bearer(self):
        if self.exec_plugin is not None:
            return self._exec_credential().token
        if self.token_file:
            try:
                with open(self.token_file, encoding="utf-8") as handle:
                    return handle.read().strip()
            except OSError as exc:
                raise ConfigError("cannot read the token file %s: %s" % (self.token_file, exc.strerror)) from None
        return self.token

    @classmethod
    def from_kubeconfig(cls, path, context=None):
        if yaml is None:
            raise ConfigError("reading the kubeconfig %s needs PyYAML on this machine" % path)
        try:
            with open(path, encoding="utf-8") as handle:
                config = yaml.safe_load(handle)
        except OSError as exc:
            raise ConfigError("cannot read the kubeconfig %s: %s" % (path, exc.strerror)) from None
        except yaml.YAMLError:
            raise ConfigError("the kubeconfig %s is not YAML" % path) from None
        if not isinstance(config, dict):
            raise ConfigError("the kubeconfig %s holds no configuration" % path)
        return cls.from_config(config, os.path.dirname(os.path.abspath(path)), context, where=path)

    @classmethod
    def from_config(cls, config, base, context=None, where="given"):
        """A kubeconfig already read (a mapping); relative file names are taken from `base`. With `base` None the
        kubeconfig came from elsewhere (a Secret) and may name no file and no exec plugin: those would read this
        machine's files, or run its commands, for whoever wrote it. `where` names the kubeconfig in errors."""
        if not isinstance(config, dict):
            raise ConfigError("the kubeconfig %s holds no configuration" % where)
        name = context or config.get("current-context")
        if not name:
            raise ConfigError("the kubeconfig %s names no context and none was given" % where)
        ctx = _named(config.get("contexts"), name, "context")
        cluster = _named(config.get("clusters"), ctx.get("cluster"), "cluster")
        user = _named(config.get("users"), ctx.get("user"), "user") if ctx.get("user") else {}
        if base is None:
            local = [key for key in ("certificate-authority", "tokenFile", "client-certificate", "client-key", "exec")
                     if (cluster if key == "certificate-authority" else user).get(key)]
            if local:
                raise ConfigError("the kubeconfig %s names %s: a kubeconfig given as data carries its credentials "
                                  "as data (the *-data fields, token)" % (where, ", ".join(local)))
        if user.get("auth-provider"):
            # Removed from kubectl in 1.26: its providers (gcp, azure, oidc) became exec plugins.
            raise ConfigError("the kubeconfig's user %r authenticates through an auth-provider, which Kubernetes "
                              "replaced with exec plugins; use the provider's exec plugin (kubectl 1.26 and later "
                              "need it too)" % ctx.get("user"))
        static = [key for key in ("token", "tokenFile", "client-certificate", "client-certificate-data")
                  if user.get(key)]
        if user.get("exec") and static:
            raise ConfigError("the kubeconfig's user %r has both an exec plugin and %s: keep one way to "
                              "authenticate" % (ctx.get("user"), ", ".join(static)))

        def material(data_key, file_key, what):
            if user_or_cluster(data_key) is not None:
                return _b64(user_or_cluster(data_key), what)
            file_name = user_or_cluster(file_key)
            if file_name:
                full = file_name if os.path.isabs(file_name) else os.path.join(base, file_name)
                try:
                    with open(full, "rb") as handle:
                        return handle.read()
                except OSError as exc:
                    raise ConfigError("cannot read the kubeconfig's %s %s: %s" % (what, full, exc.strerror)) \
                        from None
            return None

        def user_or_cluster(key):
            return cluster.get(key) if key.startswith("certificate-authority") else user.get(key)

        token_file = user.get("tokenFile")
        if token_file and not os.path.isabs(token_file):
            token_file = os.path.join(base, token_file)
        ca_pem = material("certificate-authority-data", "certificate-authority", "certificate authority")
        exec_plugin = None
        if user.get("exec"):
            try:
                exec_plugin = ExecPlugin(user["exec"], base, cluster=cluster, ca_pem=ca_pem, user_name=ctx.get("user"))
            except ExecCredentialError as exc:
                raise ConfigError(str(exc)) from None
        return cls(cluster.get("server"), ca_pem=ca_pem,
                   cert_pem=material("client-certificate-data", "client-certificate", "client certificate"),
                   key_pem=material("client-key-data", "client-key", "client key"),
                   token=user.get("token"), token_file=token_file,
                   insecure=bool(cluster.get("insecure-skip-tls-verify")),
                   server_name=cluster.get("tls-server-name"), exec_plugin=exec_plugin,
                   proxy_url=cluster.get("proxy-url"))

    @classmethod
    def in_cluster(cls):
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if ":" in host:
            host = "[%s]" % host
        try:
            with open(os.path.join(IN_CLUSTER_DIR, "ca.crt"), "rb") as handle:
                ca_pem = handle.read()
        except OSError as exc:
            raise ConfigError("cannot read the service account's CA: %s" % exc.strerror) from None
        return cls("https://%s:%s" % (host, port), ca_pem=ca_pem, token_file=os.path.join(IN_CLUSTER_DIR, "token"))

    @classmethod
    def resolve(cls, kubeconfig=None, context=None):
        """kubeconfig path, else $K8S_AUTH_KUBECONFIG/$KUBECONFIG, else in-cluster, else ~/.kube/config."""
        path = kubeconfig_path(kubeconfig)
        if path is None:
            return cls.in_cluster()
        return cls.from_kubeconfig(path, context)


def _server_message(body):
    """The message of a Status answer, cut short; never anything of the request."""
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        return None
    return message[:500] if isinstance(message, str) and message else None


def _status_message(status, reason, body):
    text = "HTTP %s %s" % (status, reason)
    message = _server_message(body)
    return "%s: %s" % (text, message) if message else text


class _HTTPSConnection(http.client.HTTPSConnection):
    """Checks the server's certificate against tls-server-name when the kubeconfig sets one."""

    def __init__(self, host, port, timeout, context, server_name=None):
        super().__init__(host, port, timeout=timeout, context=context)
        self._kubenest_context = context
        self._server_name = server_name

    def connect(self):
        if not self._server_name:
            return super().connect()
        http.client.HTTPConnection.connect(self)
        self.sock = self._kubenest_context.wrap_socket(self.sock, server_hostname=self._server_name)
        return None


class KubeApi:
    """Requests against one API server over one kept-alive connection."""

    def __init__(self, connection, timeout=30.0, resources=None):
        self.connection = connection
        self.timeout = timeout
        self._conn = None
        self._context = None
        # Discovery answers by group-version; clients of one server may share them (resources=).
        self.resources = {} if resources is None else resources

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _open(self):
        c = self.connection
        host, port = (c.proxy[0], c.proxy[1]) if c.proxy else (c.host, c.port)
        if c.scheme == "https":
            self._context = c.context
            conn = _HTTPSConnection(host, port, timeout=self.timeout, context=self._context,
                                    server_name=c.server_name)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        if c.proxy:
            conn.set_tunnel(c.host, c.port, headers=c.proxy[2])
        return conn

    def request(self, method, path, query=None, body=None, content_type="application/json", ok_missing=False,
                accept="application/json", retry_busy=True):
        """JSON answer of one request; None when ok_missing and the object does not exist. Without retry_busy a
        429 is the caller's to handle (an eviction a disruption budget refuses says when to ask again too)."""
        url = self.connection.base_path + path
        if query:
            url += "?" + urllib.parse.urlencode([(k, v) for k, v in query.items() if v is not None])
        data = None
        if body is not None:
            data = json.dumps(body).encode()
        for _attempt in range(RETRIES):
            status, reason, retry_after, payload = self._send(method, path, url, data,
                                                              self._headers(accept, content_type, data))
            if status == 401 and self.connection.credential_refused():
                # client-go does the same: a credential from an exec plugin may have been revoked or rotated
                # before its expiry; the plugin is asked once more, and its second answer stands.
                self.close()
                status, reason, retry_after, payload = self._send(method, path, url, data,
                                                                  self._headers(accept, content_type, data))
            # Like client-go: a busy or starting server says when to come back (e.g. 429 while the storage of a
            # new CRD initializes); anything else is answered at once.
            if not retry_busy or retry_after is None or not (status == 429 or 500 <= status < 600):
                break
            time.sleep(min(max(retry_after, 0.1), MAX_RETRY_AFTER))
        if status == 404 and ok_missing:
            return None
        if status >= 400:
            raise KubeApiError("%s %s: %s" % (method, path, _status_message(status, reason, payload)),
                               status=status, reason=reason, server_message=_server_message(payload))
        return json.loads(payload) if payload else {}

    def _headers(self, accept, content_type, data):
        headers = {"Accept": accept, "User-Agent": "kosmos.kubenest"}
        token = self.connection.bearer()
        if token:
            headers["Authorization"] = "Bearer " + token
        if data is not None:
            headers["Content-Type"] = content_type
        return headers

    def _send(self, method, path, url, data, headers):
        for attempt in (1, 2):
            if self._conn is not None and self.connection.scheme == "https" \
                    and self._context is not self.connection.context:
                # The exec plugin renewed its client certificate: the next request goes over a new handshake.
                self.close()
            if self._conn is None:
                self._conn = self._open()
            try:
                self._conn.request(method, url, body=data, headers=headers)
                response = self._conn.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError,
                    ssl.SSLZeroReturnError):
                # A kept-alive connection the server closed (over TLS that can surface as an EOF of the TLS
                # layer): one fresh try.
                self.close()
                if attempt == 2:
                    raise KubeApiError("%s %s: the API server closed the connection" % (method, path)) from None
                continue
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                via = " through the proxy %s:%s" % self.connection.proxy[:2] if self.connection.proxy else ""
                raise KubeApiError("%s %s: cannot reach the API server at %s%s: %s"
                                   % (method, path, self.connection.server, via, exc)) from None
            try:
                retry_after = float(response.getheader("Retry-After"))
            except (TypeError, ValueError):
                retry_after = None
            return response.status, response.reason, retry_after, payload
        raise AssertionError("unreachable")

    def watch(self, path, query=None, timeout=300):
        """The events of a watch on `path` ({"type": ..., "object": ...}) until the server ends it, at most
        `timeout` seconds; over a connection of its own, closed at the end. An ERROR event (410: the version asked
        for is gone) is raised as a KubeApiError with the event's code."""
        query = dict(query or {}, watch="true", timeoutSeconds=str(int(timeout)))
        url = self.connection.base_path + path + "?" + urllib.parse.urlencode(query)
        conn = self._open()
        conn.timeout = timeout + self.timeout  # the server ends the watch; this is for one that went silent
        try:
            try:
                conn.request("GET", url, headers=self._headers("application/json", None, None))
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                raise KubeApiError("WATCH %s: cannot reach the API server at %s: %s"
                                   % (path, self.connection.server, exc)) from None
            if response.status >= 400:
                payload = response.read()
                raise KubeApiError("WATCH %s: %s" % (path, _status_message(response.status, response.reason, payload)),
                                   status=response.status, reason=response.reason,
                                   server_message=_server_message(payload))
            while True:
                try:
                    line = response.readline()
                except (OSError, http.client.HTTPException) as exc:
                    raise KubeApiError("WATCH %s: the stream broke: %s" % (path, exc)) from None
                if not line:
                    return
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise KubeApiError("WATCH %s: %s" % (path, status.get("message") or "error event"),
                                       status=status.get("code"), reason=status.get("reason"),
                                       server_message=status.get("message"))
                yield event
        finally:
            conn.close()

    # Discovery of one group-version tells a kind's resource name and whether it lives in a namespace.
    def resource(self, api_version, kind):
        if api_version not in self.resources:
            prefix = "/api/" if "/" not in api_version else "/apis/"
            listing = self.request("GET", prefix + api_version, ok_missing=True)
            if listing is None:
                raise KubeApiError("the API server serves no %s" % api_version, status=404)
            self.resources[api_version] = {
                r["kind"]: (r["name"], r["namespaced"]) for r in listing.get("resources", []) if "/" not in r["name"]}
        try:
            return self.resources[api_version][kind]
        except KeyError:
            hint = " (api_version names the group too, e.g. apps/v1)" if "/" not in api_version else ""
            raise KubeApiError("the API server serves no kind %s in %s%s" % (kind, api_version, hint),
                               status=404) from None

    def path(self, api_version, kind, namespace=None, name=None):
        plural, namespaced = self.resource(api_version, kind)
        parts = ["/api/v1" if api_version == "v1" else "/apis/" + api_version]
        if namespaced and namespace:
            parts += ["namespaces", urllib.parse.quote(namespace, safe="")]
        elif namespaced and name:
            raise KubeApiError("%s %s lives in a namespace and none was given" % (kind, name))
        parts.append(plural)
        if name:
            parts.append(urllib.parse.quote(name, safe=""))
        return "/".join(parts)

    def get(self, api_version, kind, name, namespace=None):
        return self.request("GET", self.path(api_version, kind, namespace, name), ok_missing=True)

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        answer = self.request("GET", self.path(api_version, kind, namespace),
                              query={"labelSelector": label_selector or None, "fieldSelector": field_selector or None})
        items = answer.get("items") or []
        # A list's items carry neither apiVersion nor kind; put them back so each item stands on its own.
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def list_metadata(self, api_version, kind, namespace=None, label_selector=None):
        """Only the metadata of the objects, as the server strips them: a Secret's content never leaves it."""
        answer = self.request("GET", self.path(api_version, kind, namespace),
                              query={"labelSelector": label_selector or None}, accept=METADATA_ONLY)
        return [{"apiVersion": api_version, "kind": kind, "metadata": item.get("metadata") or {}}
                for item in answer.get("items") or []]

    def create(self, obj):
        meta = obj.get("metadata") or {}
        return self.request("POST", self.path(obj["apiVersion"], obj["kind"], meta.get("namespace")), body=obj)

    def apply(self, obj, dry_run=False, force=True, field_manager=FIELD_MANAGER):
        meta = obj.get("metadata") or {}
        return self.request("PATCH", self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]),
                            query={"fieldManager": field_manager, "force": "true" if force else "false",
                                   "dryRun": "All" if dry_run else None},
                            body=obj, content_type="application/apply-patch+yaml")

    def merge_patch(self, api_version, kind, name, namespace=None, patch=None, dry_run=False):
        return self.request("PATCH", self.path(api_version, kind, namespace, name),
                            query={"fieldManager": FIELD_MANAGER, "dryRun": "All" if dry_run else None},
                            body=patch, content_type="application/merge-patch+json")

    def delete(self, api_version, kind, name, namespace=None, propagation="Background", dry_run=False):
        """True when something was deleted (or would be, in dry run)."""
        path = self.path(api_version, kind, namespace, name)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if dry_run:
            body["dryRun"] = ["All"]
        return self.request("DELETE", path, body=body, ok_missing=True) is not None

    def wait_gone(self, api_version, kind, name, namespace=None, timeout=120.0, interval=0.5):
        deadline = time.monotonic() + timeout
        while self.get(api_version, kind, name, namespace) is not None:
            if time.monotonic() >= deadline:
                raise KubeApiError("%s %s is still there after %ss" % (kind, name, timeout))
            time.sleep(interval)


def connect(kubeconfig=None, context=None, timeout=30.0):
    """A client of the server the kubeconfig names (see Connection.resolve); raises ConfigError."""
    return KubeApi(Connection.resolve(kubeconfig, context), timeout=timeout)


class ExecResult:
    """What a command run in a container gave: its exit code (None when it did not run) and its output."""

    def __init__(self, code, stdout, stderr, message):
        self.code, self.stdout, self.stderr, self.message = code, stdout, stderr, message


def _exit_code(status):
    """The exit code a v4 Status message carries (0 on Success), or None with no code in it."""
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message"))
            except (TypeError, ValueError):
                return None
    return None


class _WebSocket:
    """The client end of one RFC 6455 connection, enough for exec: reads messages, answers pings, closes."""

    def __init__(self, sock, deadline):
        self.sock, self.deadline = sock, deadline
        self.reader = sock.makefile("rb")

    def _read(self, size, at_boundary=False):
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError()
        self.sock.settimeout(remaining)
        data = self.reader.read(size)
        if at_boundary and not data:
            return None  # closed between frames, without a close frame: the end all the same
        if len(data) < size:
            raise ConnectionResetError("the connection ended inside a frame")
        return data

    def send(self, opcode, payload=b""):
        # A client masks every frame it sends (RFC 6455 5.3); control frames are short.
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    def messages(self):
        """Each whole data message, until the server closes."""
        parts = []
        while True:
            head = self._read(2, at_boundary=True)
            if head is None:
                return
            fin, opcode, length = head[0] & 0x80, head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack("!H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if head[1] & 0x80 else None
            payload = self._read(length) if length else b""
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                return
            if opcode == 0x9:
                self.send(0xA, payload)
            elif opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if fin:
                    yield b"".join(parts)
                    parts = []

    def close(self):
        try:
            self.send(0x8, struct.pack("!H", 1000))
        except OSError:
            pass
        self.reader.close()
        self.sock.close()


def _upgrade_answer(reader):
    """(status, reason, headers, body) of the answer to the upgrade request."""
    status_line = reader.readline(65537).decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ConnectionResetError("the server answered %r" % status_line[:80])
    headers = {}
    while True:
        line = reader.readline(65537).decode("latin-1").strip()
        if not line:
            break
        key, _sep, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    body = b""
    if int(parts[1]) != 101 and headers.get("content-length", "").isdigit():
        body = reader.read(min(int(headers["content-length"]), 65536))
    return int(parts[1]), parts[2].strip() if len(parts) > 2 else "", headers, body


def exec_in_pod(api, namespace, pod, container, command, timeout):
    """Run `command` in the container and wait for it, at most `timeout` seconds: an ExecResult. The command's
    output is kept in memory, so it suits commands that print a bounded answer (a snapshot, a digest)."""
    path = api.path("v1", "Pod", namespace, pod) + "/exec"
    query = [("container", container), ("stdout", "true"), ("stderr", "true")] + [("command", c) for c in command]
    url = api.connection.base_path + path + "?" + urllib.parse.urlencode(query)
    what = "exec in %s/%s" % (namespace, pod)
    deadline = time.monotonic() + timeout
    conn = api._open()  # pylint: disable=protected-access
    try:
        conn.connect()  # the proxy tunnel and the TLS handshake, as for any request
    except OSError as exc:
        conn.close()
        raise KubeApiError("%s: cannot reach the API server at %s: %s" % (what, api.connection.server, exc)) from None
    sock, conn.sock = conn.sock, None
    key = base64.b64encode(os.urandom(16)).decode()
    headers = ["GET %s HTTP/1.1" % url, "Host: %s:%s" % (api.connection.host, api.connection.port),
               "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Key: " + key,
               "Sec-WebSocket-Version: 13", "Sec-WebSocket-Protocol: " + EXEC_PROTOCOL, "User-Agent: kosmos.kubenest"]
    token = api.connection.bearer()
    if token:
        headers.append("Authorization: Bearer " + token)
    stream = _WebSocket(sock, deadline)
    out, err, status = [], [], None
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.1))
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
        code, reason, answer, body = _upgrade_answer(stream.reader)
        if code != 101:
            raise KubeApiError("%s: %s" % (what, _status_message(code, reason, body)), status=code, reason=reason,
                               server_message=_server_message(body))
        accept = base64.b64encode(hashlib.sha1(key.encode() + WEBSOCKET_GUID).digest()).decode()
        if answer.get("sec-websocket-accept") != accept or answer.get("sec-websocket-protocol") != EXEC_PROTOCOL:
            raise KubeApiError("%s: the API server did not take up the %s stream" % (what, EXEC_PROTOCOL))
        for message in stream.messages():
            channel, data = message[:1], message[1:]
            if channel == b"\x01":
                out.append(data)
            elif channel == b"\x02":
                err.append(data)
            elif channel == b"\x03" and data:
                status = json.loads(data.decode("utf-8", "replace"))
    except TimeoutError:
        raise KubeApiError("%s: the command did not end within %ss" % (what, timeout)) from None
    except (OSError, ValueError) as exc:
        raise KubeApiError("%s: the stream broke off: %s" % (what, exc)) from None
    finally:
        stream.close()
    if status is None:
        raise KubeApiError("%s: the stream ended without the command's exit status" % what)
    return ExecResult(_exit_code(status), b"".join(out), b"".join(err), status.get("message") or "")


class ClientPool:
    """`size` clients of the server `api` talks to, `api` among them, for requests in parallel: each call of
    map() gets a client no other call uses meanwhile. Discovery answers are shared."""

    def __init__(self, api, size):
        self._extra = [KubeApi(api.connection, timeout=api.timeout, resources=api.resources)
                       for _client in range(max(1, size) - 1)]
        self._idle = queue.SimpleQueue()
        for client in [api] + self._extra:
            self._idle.put(client)

    def map(self, work, items):
        """work(client, item) for every item; the results in the order of items. The first failure is raised once
        every call has ended."""
        def call(item):
            client = self._idle.get()
            try:
                return work(client, item)
            finally:
                self._idle.put(client)

        with ThreadPoolExecutor(max_workers=1 + len(self._extra)) as pool:
            return list(pool.map(call, items))

    def close(self):
        for client in self._extra:
            client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def comparable(obj):
    """An object without the fields the server changes on every write, to tell whether a write changed it."""
    if obj is None:
        return None
    out = dict(obj)
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    out.pop("status", None)
    return out


def condition_met(obj, condition):
    """Whether obj's status carries the condition (type, status and, when given, reason)."""
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry.get("type") != condition.get("type"):
            continue
        if str(entry.get("status")) != str(condition.get("status", "True")):
            return False
        return not condition.get("reason") or entry.get("reason") == condition["reason"]
    return False
