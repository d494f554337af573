"""kopf posts events only inside a running operator: here they are collected instead (`posted`)."""

from __future__ import annotations

import kopf
import pytest


@pytest.fixture(autouse=True)
def posted(monkeypatch):
    found = []
    monkeypatch.setattr(kopf, "info", lambda body, reason, message: found.append(("Normal", reason, message)))
    monkeypatch.setattr(kopf, "warn", lambda body, reason, message: found.append(("Warning", reason, message)))
    return found
