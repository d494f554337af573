# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Operator shards by namespace (operator/README.md, Shards): the layout a site asks for, checked, and which
shard a namespace falls to.

Namespace patterns have kopf's syntax, as the operator's --namespace takes them: comma-separated globs, "!" before
one that excludes; a pattern starting with an exclusion starts from every namespace. The operator matches with
kopf's own function; tests/unit/collection/test_operator_shards.py holds this one to it.
"""

from __future__ import annotations

import fnmatch
import re

SHARD_LABEL = "kubenest.kosmos.io/shard"
# kubenest-operator-<name> is a Deployment name and a label value: at most 63 characters, a DNS label.
NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?")


def pattern_matches(namespace, pattern):
    globs = [glob.strip() for glob in pattern.split(",")]
    if globs[0].startswith("!"):
        globs.insert(0, "*")
    first = matches = fnmatch.fnmatchcase(namespace, globs[0])
    for glob in globs[1:]:
        if glob.startswith("!"):
            matches = matches and not fnmatch.fnmatchcase(namespace, glob[1:])
        else:
            matches = matches or (first and fnmatch.fnmatchcase(namespace, glob))
    return matches


def serves(shard, namespace):
    return any(pattern_matches(namespace, pattern) for pattern in shard["namespaces"])


def layout(shards):
    """The shards as [{name, namespaces}], each checked; raises ValueError saying what is wrong."""
    if not isinstance(shards, list):
        raise ValueError("the shards are a list of {name, namespaces}, got %s" % type(shards).__name__)
    found, names = [], set()
    for position, shard in enumerate(shards, 1):
        if not isinstance(shard, dict) or set(shard) - {"name", "namespaces"}:
            raise ValueError("shard %d: a mapping with name and namespaces only, got %r" % (position, shard))
        name, patterns = shard.get("name"), shard.get("namespaces")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ValueError("shard %d: name %r is not a DNS label of at most 40 characters" % (position, name))
        if name in names:
            raise ValueError("shard %d: name %r is given twice" % (position, name))
        if isinstance(patterns, str):
            patterns = [patterns]
        if (not isinstance(patterns, list) or not patterns
                or not all(isinstance(p, str) and p.strip(" ,!") for p in patterns)):
            raise ValueError("shard %r: namespaces is a list of kopf namespace patterns, at least one, got %r"
                             % (name, patterns))
        names.add(name)
        found.append({"name": name, "namespaces": [p.strip() for p in patterns]})
    return found


def gaps(shards, namespaces):
    """What is wrong with the layout for these namespaces (those holding VirtualClusters): each served by two
    shards or by none, as sentences; empty when each is served by exactly one."""
    problems = []
    for namespace in sorted(set(namespaces)):
        serving = [shard["name"] for shard in shards if serves(shard, namespace)]
        if len(serving) > 1:
            problems.append("namespace %s is served by shards %s" % (namespace, ", ".join(serving)))
        elif not serving:
            problems.append("namespace %s is served by no shard" % namespace)
    return problems
