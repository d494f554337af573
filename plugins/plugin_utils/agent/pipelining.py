"""Recognise Ansible's pipelined module command so the agent can run it in a warm interpreter."""

from __future__ import annotations

import os
import re
import shlex

_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python[0-9.]*$")
_SHELLS = {"sh", "bash", "dash"}


def python_module_command(cmd: str) -> tuple[str, dict] | None:
    """``/bin/sh -c 'VAR=x /usr/bin/python3 && sleep 0'`` -> ("/usr/bin/python3", {"VAR": "x"}); else None.

    Anything with shell syntax beyond plain assignments (expansions, redirections, become wrappers)
    is left to the shell.
    """
    try:
        outer = shlex.split(cmd)
        if len(outer) != 3 or outer[1] != "-c" or os.path.basename(outer[0]) not in _SHELLS:
            return None
        inner = shlex.split(outer[2])
    except ValueError:
        return None
    if inner[-3:] == ["&&", "sleep", "0"]:
        inner = inner[:-3]
    env = {}
    while inner and _ASSIGN.match(inner[0]):
        key, value = inner.pop(0).split("=", 1)
        if any(c in value for c in "$`\\"):
            return None
        env[key] = value
    if len(inner) != 1:
        return None
    interpreter = inner[0]
    if not os.path.isabs(interpreter) or not _PYTHON.match(os.path.basename(interpreter)):
        return None
    return interpreter, env
