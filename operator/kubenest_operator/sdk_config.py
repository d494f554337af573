# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kubernetes SDK's Configuration for the operator and the binder, which talk to the host through the SDK
(kopf's connection included): from a kubeconfig file or in-cluster.

A kubeconfig user with an `exec` plugin gets its credential from the collection's exec_credential, the
implementation its own client (module_utils/kube_api) uses too, rather than from the SDK's own runner (which
logs a failure and goes on without credentials)."""

from __future__ import annotations

import atexit
import base64
import copy
import os
import shutil
import tempfile
from urllib.parse import unquote, urlsplit, urlunsplit

import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils.exec_credential import (
    ExecCredentialError,
    ExecPlugin,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.kubeconfig import kubeconfig_path
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.kube_config import KubeConfigLoader


class KubeClientError(Exception):
    pass


def load_configuration(kubeconfig=None, context=None, configuration=None):
    """A kubernetes Configuration from the kubeconfig (path, else $K8S_AUTH_KUBECONFIG/$KUBECONFIG, else
    in-cluster, else ~/.kube/config), its exec plugin run by exec_credential:
    the credential is renewed before a request once it has expired."""
    path = kubeconfig_path(kubeconfig)
    configuration = configuration or k8s.Configuration()
    shown = path or "in-cluster"
    try:
        if path is None:
            k8s_config.load_incluster_config(client_configuration=configuration)
            return configuration
        with open(path, encoding="utf-8") as handle:
            config = yaml.safe_load(handle)
        if not isinstance(config, dict):
            raise ValueError("it holds no configuration")
        base = os.path.dirname(os.path.abspath(path))
        config, user_name, exec_spec, cluster = _without_exec(config, context)
        KubeConfigLoader(config_dict=config, active_context=context, config_base_path=base) \
            .load_and_set(configuration)
        _proxy_credentials(configuration)
        if exec_spec is not None:
            ca_pem = None
            if configuration.ssl_ca_cert:
                with open(configuration.ssl_ca_cert, "rb") as handle:
                    ca_pem = handle.read()
            _use_exec_plugin(configuration, ExecPlugin(exec_spec, base, cluster=cluster, ca_pem=ca_pem,
                                                       user_name=user_name))
    except (k8s_config.ConfigException, OSError, ValueError, yaml.YAMLError, ExecCredentialError) as exc:
        raise KubeClientError(f"cannot load the kubeconfig {shown}: {_reason(exc)}") from None
    return configuration


def _proxy_credentials(configuration):
    """urllib3 sends no Proxy-Authorization for credentials in the proxy's URL: they move into a header."""
    parsed = urlsplit(configuration.proxy or "")
    if parsed.username is None:
        return
    pair = f"{unquote(parsed.username)}:{unquote(parsed.password or '')}"
    configuration.proxy_headers = dict(configuration.proxy_headers or {},
                                       **{"Proxy-Authorization": "Basic " + base64.b64encode(pair.encode()).decode()})
    host = parsed.hostname if ":" not in parsed.hostname else f"[{parsed.hostname}]"
    configuration.proxy = urlunsplit(parsed._replace(netloc=host + (f":{parsed.port}" if parsed.port else "")))


def _reason(exc):
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, yaml.YAMLError):
        return "it is not YAML"
    return str(exc)


def _without_exec(config, context):
    """(the kubeconfig without the chosen user's exec section, that user's name, its exec section, its cluster)."""
    name = context or config.get("current-context")
    entries = {key: {e.get("name"): e.get(key[:-1]) or {} for e in config.get(key) or [] if isinstance(e, dict)}
               for key in ("contexts", "users", "clusters")}
    chosen = entries["contexts"].get(name) or {}
    user = entries["users"].get(chosen.get("user")) or {}
    if not isinstance(user, dict) or "exec" not in user:
        return config, None, None, None
    config = copy.deepcopy(config)
    exec_spec = None
    for entry in config["users"]:
        if isinstance(entry, dict) and entry.get("name") == chosen.get("user"):
            exec_spec = entry["user"].pop("exec", None)
    return config, chosen.get("user"), exec_spec, entries["clusters"].get(chosen.get("cluster")) or {}


def _use_exec_plugin(configuration, plugin):
    state = {"credential": None, "dir": None}

    def refresh(cfg):
        credential = plugin.credential()  # the one it has until it expires
        if credential is state["credential"]:
            return
        state["credential"] = credential
        if credential.token:
            cfg.api_key["BearerToken"] = "Bearer " + credential.token
        if credential.cert_pem:
            # urllib3 loads client pairs from files only: a private directory, removed when the process ends.
            if state["dir"] is None:
                state["dir"] = tempfile.mkdtemp(prefix="kubenest-exec-")
                atexit.register(shutil.rmtree, state["dir"], True)
            for attr, name, data in (("cert_file", "tls.crt", credential.cert_pem),
                                     ("key_file", "tls.key", credential.key_pem)):
                target = os.path.join(state["dir"], name)
                fd = os.open(target + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(target + ".new", target)
                setattr(cfg, attr, target)

    refresh(configuration)  # now, so that a plugin that fails is reported where the kubeconfig is loaded
    # The SDK calls this before it reads the token of each request.
    configuration.refresh_api_key_hook = refresh
