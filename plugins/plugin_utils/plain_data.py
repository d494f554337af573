# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Templated values as the built-in types JSON knows.

A variable handed to a plugin may be one of ansible-core's lazy containers. Copying one with copy.deepcopy
copies the templating context it carries too, which costs seconds per manifest on a busy controller; this
walk reads each value once and returns plain dicts, lists and scalars.
"""

from __future__ import annotations

from collections.abc import Mapping


class NotPlainData(TypeError):
    def __init__(self, type_name):
        super().__init__("a value of type %s is not plain data" % type_name)
        self.type_name = type_name


def to_plain(value):
    """`value` as dict, list, str, int, float, bool or None; NotPlainData names any other type."""
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    raise NotPlainData(type(value).__name__)
