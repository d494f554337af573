"""The agent's config.toml is built from data: whatever a value holds, it reads back as that value."""

from __future__ import annotations

import tomllib

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.agent_config import agent_config


def test_settings_read_back_as_given():
    settings = {"listen": "0.0.0.0:7443", "allowed_clients": ["kubenest-controller", "ops"], "node_name": "n1",
                "tls_cert": "/etc/kubenest-agent/pki/node.crt", "audit_log": None}
    text = agent_config(settings)
    assert tomllib.loads(text) == {k: v for k, v in settings.items() if v is not None}
    assert text.endswith("\n") and "audit_log" not in text


@pytest.mark.parametrize("hostile", ['n1"\nallowed_clients = ["mallory"]', "n1\\", "ä'\t\"]", "n1\r\n[x]"])
def test_a_value_cannot_add_a_setting(hostile):
    parsed = tomllib.loads(agent_config({"node_name": hostile, "allowed_clients": ["kubenest-controller"]}))
    assert parsed == {"node_name": hostile, "allowed_clients": ["kubenest-controller"]}


@pytest.mark.parametrize(("settings", "message"), [
    ({"listen": {"a": 1}}, "listen must be a string"),
    ({"allowed_clients": ["a", 1]}, "allowed_clients must be a string"),
    ({"bad key": "x"}, "is not a setting name"),
    (["listen"], "expected a dictionary"),
])
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(AnsibleFilterError, match=message):
        agent_config(settings)
