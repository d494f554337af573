# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the controller-side API actions share: their connection arguments and how they report errors."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import (
    KUBECONFIG_ARGS,
    Connection,
    KubeApi,
    KubeApiError,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.plain_data import NotPlainData, to_plain


def plain(value):
    """Templated values as the built-in types JSON knows, so that a request body holds data only."""
    try:
        return to_plain(value)
    except NotPlainData as exc:
        raise AnsibleActionFail("a value of type %s cannot be sent to the API server" % exc.type_name) from None


class KubeAction(ActionBase):
    """Runs on the controller: no module is copied or started, the request goes out of this process."""

    TRANSFERS_FILES = False
    _requires_connection = False
    ARGUMENT_SPEC: dict = {}
    MUTUALLY_EXCLUSIVE: list = []
    REQUIRED_ONE_OF: list = []

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        spec = dict(KUBECONFIG_ARGS, **self.ARGUMENT_SPEC)
        # Failures come back as failed results, not exceptions: failed_when, until and rescue see them.
        try:
            args = self.validate_argument_spec(argument_spec=spec, mutually_exclusive=self.MUTUALLY_EXCLUSIVE,
                                               required_one_of=self.REQUIRED_ONE_OF)[1]
            # Templated values arrive as tagged subclasses of str, int...; the code below and the libraries it
            # calls (YAML, JSON) get plain built-in values.
            args = plain(args)
            connection = Connection.resolve(args["kubeconfig"], args["context"])
            api = KubeApi(connection, timeout=args["request_timeout"])
            try:
                result.update(self.act(api, args, check_mode=bool(self._task.check_mode)))
            finally:
                api.close()
        except KubeApiError as exc:
            result.update(failed=True, changed=False, msg=str(exc))
        except AnsibleActionFail as exc:
            result.update(exc.result)
            result.setdefault("changed", False)
        return result

    def act(self, api, args, check_mode):
        raise NotImplementedError
