"""globalnode_facts: what a run needs of each GlobalNode, the same facts a claim reports."""

from __future__ import annotations

from plugins.filter.globalnode_facts import globalnode_facts
from plugins.module_utils import globalnodes as gn

PIN = "ab" * 32


def _node(name, pins=None, owner="ns/vc"):
    status = {"state": "reserved", "virtualCluster": owner}
    if pins is not None:
        status["agent"] = {"certificateSHA256": pins, "recordedAt": "2026-01-01T00:00:00Z"}
    return {"metadata": {"name": name}, "spec": {"nodeIP": "10.0.0.5", "labels": {"zone": "a"}}, "status": status}


def test_each_node_carries_the_agent_certificates_its_globalnode_records():
    facts = globalnode_facts([_node("w1", [PIN]), _node("w2")])
    assert facts == {
        "w1": {"nodeIP": "10.0.0.5", "labels": {"zone": "a"}, "state": "reserved", "virtualCluster": "ns/vc",
               "agentCertificates": [PIN]},
        "w2": {"nodeIP": "10.0.0.5", "labels": {"zone": "a"}, "state": "reserved", "virtualCluster": "ns/vc",
               "agentCertificates": []},
    }


def test_the_filter_and_a_claim_report_a_node_alike():
    node = _node("w1", [PIN])
    assert globalnode_facts([node])["w1"] == gn.node_facts(node)
    assert globalnode_facts(None) == {}
