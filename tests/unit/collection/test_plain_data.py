"""Templated values turned into plain data once, at a plugin's boundary."""

from __future__ import annotations

from collections import OrderedDict
from types import MappingProxyType

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import VirtualClusterRef, placement
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import plain
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.plain_data import NotPlainData, to_plain


class Label(str):
    """A str subclass, as ansible-core's tagged strings are."""


def test_mappings_sequences_and_scalars_become_builtins():
    value = MappingProxyType({"a": (1, 2.5, True, None), Label("b"): OrderedDict(c=[Label("d")])})
    out = to_plain(value)
    assert out == {"a": [1, 2.5, True, None], "b": {"c": ["d"]}}
    pieces = (out, out["a"], out["b"], out["b"]["c"][0], next(iter(out)))
    assert [piece.__class__ for piece in pieces] == [dict, list, dict, str, str]


def test_any_other_type_is_named():
    with pytest.raises(NotPlainData, match="of type set"):
        to_plain({"a": [{1, 2}]})
    with pytest.raises(AnsibleActionFail, match="a value of type bytes cannot be sent to the API server"):
        plain({"a": b"x"})


def test_manifest_pieces_hold_copies_not_the_callers_containers():
    owners = [{"apiVersion": "kosmos.io/v1alpha1", "kind": "VirtualCluster", "name": "a", "uid": "u"}]
    tolerations = [{"key": "k", "operator": "Exists"}]
    ref = VirtualClusterRef({"name": "a", "namespace": "ns", "labels": {}, "selector": {},
                             "owner_references": owners})
    pod = placement({}, tolerations)
    owners[0]["name"], tolerations[0]["key"] = "changed", "changed"
    assert ref.metadata("a-etcd", "etcd")["ownerReferences"][0]["name"] == "a"
    assert pod["tolerations"] == [{"key": "k", "operator": "Exists"}]
