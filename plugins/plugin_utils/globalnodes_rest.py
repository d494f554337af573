# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GlobalNode reads and compare-and-swap status writes over the controller-side API client."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as gn
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_api import KubeApiError

API_VERSION = "%s/%s" % (gn.GROUP, gn.VERSION)


class RestGlobalNodes(gn.GlobalNodes):
    """The claim logic of GlobalNodes, with its three API calls made through KubeApi."""

    # The parent's __init__ makes a kubernetes client, which is not wanted here.
    def __init__(self, api):  # pylint: disable=super-init-not-called
        self.api = api

    def list(self):
        return self.api.list(API_VERSION, "GlobalNode")

    def get(self, name):
        node = self.api.get(API_VERSION, "GlobalNode", name)
        if node is None:
            raise KubeApiError("GET GlobalNode %s: HTTP 404 Not Found" % name, status=404, reason="Not Found")
        return node

    def write(self, patch, name):
        path = self.api.path(API_VERSION, "GlobalNode", name=name) + "/status"
        try:
            return self.api.request("PATCH", path, body=patch, content_type="application/merge-patch+json")
        except KubeApiError as exc:
            if exc.status == 409:
                raise gn.Conflict(name) from None
            raise
