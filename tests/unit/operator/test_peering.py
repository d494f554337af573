"""Seniority priorities for kopf peering."""

from __future__ import annotations

import datetime
import random

from kubenest_operator.peering import PRIORITY_SPREAD, TOP_PRIORITY, junior_priority, live_peers

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)


def seen(seconds_ago: int, priority: int, lifetime: int = 60) -> dict:
    return {"priority": priority, "lifetime": lifetime,
            "lastseen": (NOW - datetime.timedelta(seconds=seconds_ago)).isoformat()}


def test_only_unexpired_other_peers_count():
    status = {
        "me": seen(1, 5),
        "alive": seen(10, 100),
        "expired": seen(61, 200),
        "said-goodbye": seen(0, 300, lifetime=0),  # kopf's farewell: lifetime 0
        "naive-time": {"priority": 7, "lifetime": 60, "lastseen": "2026-01-01T11:59:30"},
        "garbage": {"priority": "x"},
        "not-a-dict": "x",
    }
    assert live_peers(status, "me", NOW) == {"alive": 100, "naive-time": 7}
    assert live_peers(None, "me", NOW) == {}


def test_a_newcomer_ranks_below_every_live_peer():
    rng = random.Random(1)
    assert TOP_PRIORITY - PRIORITY_SPREAD <= junior_priority([], rng) < TOP_PRIORITY
    assert junior_priority([500, 42], rng) < 42
    assert junior_priority([TOP_PRIORITY + 5], rng) < TOP_PRIORITY


def test_simultaneous_newcomers_rarely_collide():
    rng = random.Random(7)
    picks = {junior_priority([], rng) for _attempt in range(200)}
    assert len(picks) >= 195
