# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The options of several role entry points as one argument spec, to check settings once before a run.

ansible-core validates a role's arguments on every include_role: each include deep-copies the role's whole
meta/argument_specs.yml and runs a validation task. A playbook that includes many entry points pays that every
time; checking what the caller set once, up front, costs one task and fails before anything is written.

Top-level `required` is dropped: the playbook supplies those options itself at each include. An option
defined differently by two entry points is an error, since one check cannot stand for both.
"""

from __future__ import annotations

import os

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ROLES_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "roles")

# Keys that document an option without constraining its value.
_DOC_KEYS = frozenset(("description", "version_added", "required"))


class RoleOptionsError(ValueError):
    pass


def entry_points(role, roles_dir=ROLES_DIR):
    """The argument specs of `role`'s entry points, by name, read as plain YAML."""
    path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.load(handle, Loader=_LOADER) or {}  # CSafeLoader or SafeLoader
    except FileNotFoundError:
        raise RoleOptionsError("role %r has no meta/argument_specs.yml under %s" % (role, roles_dir)) from None
    specs = data.get("argument_specs") if isinstance(data, dict) else None
    if not isinstance(specs, dict):
        raise RoleOptionsError("%s has no argument_specs mapping" % path)
    return specs


def _constraints(spec):
    return {k: v for k, v in spec.items() if k not in _DOC_KEYS}


def merged_spec(terms, roles_dir=ROLES_DIR):
    """One argument spec for the entry points named by `terms` ("role" for all of its entry points, or
    "role:entry_point"), without top-level `required`."""
    merged, origin = {}, {}
    for term in terms:
        if not isinstance(term, str) or not term:
            raise RoleOptionsError("a term is a role or role:entry_point, not %r" % (term,))
        role, _sep, wanted = term.partition(":")
        specs = entry_points(role, roles_dir)
        if wanted and wanted not in specs:
            raise RoleOptionsError("role %r has no entry point %r (it has: %s)"
                                   % (role, wanted, ", ".join(sorted(specs))))
        for name in [wanted] if wanted else sorted(specs):
            for option, spec in ((specs[name] or {}).get("options") or {}).items():
                here = "%s:%s" % (role, name)
                clean = dict(_constraints(spec), description=spec.get("description", ""))
                if option in merged and _constraints(merged[option]) != _constraints(clean):
                    raise RoleOptionsError("option %r is defined differently by %s and %s"
                                           % (option, origin[option], here))
                merged.setdefault(option, clean)
                origin.setdefault(option, here)
    return merged
