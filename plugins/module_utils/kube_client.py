# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A kubernetes ApiClient for the collection's own API modules: from a kubeconfig file or in-cluster."""

from __future__ import annotations

import os
import traceback

try:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()

    class ApiException(Exception):
        status = None
        reason = None
else:
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None

KUBECONFIG_ARGS = dict(
    kubeconfig=dict(type="path"),
    context=dict(type="str"),
)


class KubeClientError(Exception):
    pass


def api_client(kubeconfig=None, context=None):
    """kubeconfig path, else $K8S_AUTH_KUBECONFIG/$KUBECONFIG, else in-cluster, else ~/.kube/config."""
    path = kubeconfig or os.environ.get("K8S_AUTH_KUBECONFIG") or os.environ.get("KUBECONFIG")
    configuration = k8s.Configuration()
    try:
        if not path and os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration,
                                        persist_config=False)
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        raise KubeClientError("cannot load the kubeconfig %s: %s" % (path or "~/.kube/config", exc)) from None
    return k8s.ApiClient(configuration)


def describe(exc):
    """A one-line description of an API error that never echoes request bodies."""
    if isinstance(exc, ApiException):
        return "HTTP %s %s" % (exc.status, exc.reason)
    return "%s: %s" % (type(exc).__name__, exc)
