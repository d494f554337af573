"""tests/support/rotation.py: which slow tests a commit's run takes, and what that turn costs."""

from __future__ import annotations

import pytest

from tests.support import rotation

COSTS = {"a": 300, "b": 250, "c": 200, "d": 150, "e": 100, "f": 50, "huge": 900}


def test_turns_hold_every_name_once_within_the_budget_and_a_dearer_name_alone():
    turns = rotation.turns(COSTS, 400)
    names = [name for turn in turns for name in turn]
    assert sorted(names) == sorted(COSTS)
    assert ("huge",) in turns
    assert all(sum(COSTS[n] for n in turn) <= 400 for turn in turns if turn != ("huge",))
    # the costliest first, each into the first turn with room: huge | a+e | b+d | c+f
    assert turns == [("huge",), ("a", "e"), ("b", "d"), ("c", "f")]


def test_the_packing_is_the_same_whatever_order_the_costs_come_in():
    reversed_costs = dict(reversed(list(COSTS.items())))
    assert rotation.turns(reversed_costs, 400) == rotation.turns(COSTS, 400)
    ties = {"y": 100, "x": 100, "z": 100}
    assert rotation.turns(ties, 200) == [("x", "y"), ("z",)]


def test_a_bad_budget_or_a_free_test_is_refused():
    with pytest.raises(ValueError, match="the budget must be at least 1 s, not 0"):
        rotation.turns(COSTS, 0)
    with pytest.raises(ValueError, match="'free' costs 0 s"):
        rotation.turns({"free": 0}, 100)


def test_the_projects_turns_keep_the_budget_and_successive_commits_cover_every_slow_test():
    turns = rotation.turns()
    for turn in turns:
        assert len(turn) == 1 or sum(rotation.COSTS[n] for n in turn) <= rotation.BUDGET_S, turn
    for start in (0, 7, 285):
        seen = {name for number in range(start, start + len(turns)) for name in rotation.taken(number)}
        assert seen == set(rotation.COSTS), start


def test_the_commit_number_comes_from_the_environment_when_set(monkeypatch):
    monkeypatch.setenv("KUBENEST_ROTATION", "12")
    assert rotation.commit_number() == 12
    monkeypatch.setenv("KUBENEST_ROTATION", "twelve")
    with pytest.raises(ValueError, match="KUBENEST_ROTATION must be a whole number, not 'twelve'"):
        rotation.commit_number()


def test_without_the_environment_it_is_the_count_of_commits(monkeypatch):
    monkeypatch.delenv("KUBENEST_ROTATION", raising=False)
    assert rotation.commit_number() > 0  # this checkout is a git clone with history


def _turn_holding(name: str) -> int:
    return next(i for i, turn in enumerate(rotation.turns()) if name in turn)


def test_every_point_is_long_and_only_those_of_the_turn_are_also_sampled(monkeypatch):
    steps = ["Drain", "Stash", "Images"]
    monkeypatch.setenv("KUBENEST_ROTATION", str(_turn_holding("promote-fault[Stash]")))
    marks = {p.id: {m.name for m in p.marks} for p in rotation.params(steps, steps, "promote-fault")}
    assert all("long" in names for names in marks.values())
    assert "sampled" in marks["Stash"]
    assert all(("sampled" in marks[step]) == (f"promote-fault[{step}]" in rotation.taken()) for step in steps)
    pairs = rotation.params([("a", "b"), ("c", "d")], ["Cordon-pods", "Wait-tenant"], "operator-kill")
    assert [p.values for p in pairs] == [("a", "b"), ("c", "d")]
    with pytest.raises(ValueError, match="2 points but 1 ids"):
        rotation.params(["x", "y"], ["x"], "promote-fault")
    with pytest.raises(ValueError, match=r"'promote-fault\[Nowhere\]' has no cost"):
        rotation.params(["x"], ["Nowhere"], "promote-fault")


def test_a_scenario_is_always_long_and_sampled_only_on_its_turn(monkeypatch):
    def marks_of(name):
        def probe():
            pass
        return {m.name for m in getattr(rotation.turn(name)(probe), "pytestmark", [])}

    for number, turn in enumerate(rotation.turns()):
        monkeypatch.setenv("KUBENEST_ROTATION", str(number))
        for name in ("awx-life-cycle", "node-count-up-and-down", "ca-rotation"):
            assert marks_of(name) == ({"long", "sampled"} if name in turn else {"long"}), (number, name)
    with pytest.raises(ValueError, match="'no-such' has no cost"):
        rotation.turn("no-such")
