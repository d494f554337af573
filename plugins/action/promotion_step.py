# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    fault_step=dict(type="str", default=""),
)
FACT = "node_promote_step"


def enter(name, fault_step):
    """The result of entering step `name`: its fact, and a failure when `fault_step` names it."""
    name = str(name).strip()
    if not name:
        raise AnsibleActionFail("name must name a step")
    result = dict(changed=False, ansible_facts={FACT: name}, step=name)
    if fault_step and str(fault_step) == name:
        # A failed result's facts are not set: the step travels in the result for the rescue to read.
        result.update(failed=True, msg="[kubenest:fault] fault injected on entering step %s" % name)
    return result


class ActionModule(ActionBase):
    """One task per step, in this process: the step's fact and the fault check of the tests together."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        try:
            args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
            result.update(enter(args["name"], args["fault_step"]))
        except AnsibleActionFail as exc:
            result.update(exc.result)
            result.setdefault("changed", False)
        return result
