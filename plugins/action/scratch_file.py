# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os
import shutil
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["file", "directory", "absent"], default="file"),
    content=dict(type="str", no_log=True),
    prefix=dict(type="str", default="kubenest-"),
    suffix=dict(type="str", default=""),
    path=dict(type="path"),
)


def _plain_name_part(option, value):
    if os.sep in value or "\0" in value:
        raise AnsibleActionFail("%s must not hold %r or NUL: %r" % (option, os.sep, value))
    return str(value)


def create(state, content, prefix, suffix):
    """A new private file (0600, holding `content`) or directory (0700) in the controller's temp dir."""
    prefix, suffix = _plain_name_part("prefix", prefix), _plain_name_part("suffix", suffix)
    if state == "directory":
        if content is not None:
            raise AnsibleActionFail("content is for state=file only")
        return tempfile.mkdtemp(prefix=prefix, suffix=suffix)  # mode 0700
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix)  # mode 0600, O_EXCL
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(str(content or ""))
    except BaseException:
        os.unlink(path)
        raise
    return path


def remove(path):
    """True when something was there."""
    if path is None:
        raise AnsibleActionFail("path is required with state=absent")
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
        return True
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


class ActionModule(ActionBase):
    """Scratch space in this process: creating or removing a temporary file needs no module run."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        try:
            args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
            if args["state"] == "absent":
                result.update(changed=remove(args["path"]), path=args["path"])
            else:
                if args["path"] is not None:
                    raise AnsibleActionFail("path is chosen by the action with state=%s; leave it out"
                                            % args["state"])
                # Scratch space is not managed state: made in check mode too, and never reported as a change.
                result.update(changed=False, path=create(args["state"], args["content"], args["prefix"],
                                                         args["suffix"]))
        except AnsibleActionFail as exc:
            result.update(exc.result)
            result.setdefault("changed", False)
        except OSError as exc:
            result.update(failed=True, changed=False, msg="scratch file: %s" % exc)
        return result
