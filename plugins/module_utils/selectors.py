# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubernetes label selectors, evaluated as the API does; shared by modules and controller-side plugins."""

from __future__ import annotations

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    pass


def selector_match(labels, selector):
    """True when `labels` satisfy every requirement of `selector`; an empty selector matches everything."""
    labels = labels or {}
    selector = selector or {}
    if not isinstance(labels, dict) or not isinstance(selector, dict):
        raise SelectorError("labels and selector must be mappings")
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            raise SelectorError("unknown operator %r (expected one of %s)" % (op, ", ".join(OPERATORS)))
        if not ok:
            return False
    return True
