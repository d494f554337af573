"""tests/support/rotation.py: which points of a slow matrix a commit's run takes."""

from __future__ import annotations

import math

import pytest

from tests.support import rotation

STEPS = ["Drain", "Stash", "Images", "Reset", "RemoveHostNode"]


@pytest.mark.parametrize("per_run", [1, 2, 3])
def test_successive_commits_cover_every_point_within_the_period(per_run):
    period = math.ceil(len(STEPS) / per_run)
    for start in (0, 7, 285):
        seen = {step for number in range(start, start + period) for step in rotation.sample(STEPS, per_run, number)}
        assert seen == set(STEPS), (start, per_run)


def test_a_commit_takes_per_run_points_in_the_matrix_order():
    assert rotation.sample(STEPS, 2, number=2) == ["Drain", "RemoveHostNode"]
    assert rotation.sample(STEPS, 1, number=6) == ["Stash"]
    assert rotation.sample(STEPS, 9, number=3) == STEPS


def test_an_empty_matrix_takes_nothing_and_per_run_below_one_is_refused():
    assert rotation.sample([], 1, number=4) == []
    with pytest.raises(ValueError, match="per_run must be at least 1"):
        rotation.sample(STEPS, 0, number=1)


def test_the_commit_number_comes_from_the_environment_when_set(monkeypatch):
    monkeypatch.setenv("KUBENEST_ROTATION", "12")
    assert rotation.commit_number() == 12
    monkeypatch.setenv("KUBENEST_ROTATION", "twelve")
    with pytest.raises(ValueError, match="KUBENEST_ROTATION must be a whole number, not 'twelve'"):
        rotation.commit_number()


def test_without_the_environment_it_is_the_count_of_commits(monkeypatch):
    monkeypatch.delenv("KUBENEST_ROTATION", raising=False)
    assert rotation.commit_number() > 0  # this checkout is a git clone with history


def test_every_point_is_long_and_only_the_sample_is_also_sampled(monkeypatch):
    monkeypatch.setenv("KUBENEST_ROTATION", "3")
    params = rotation.params(STEPS, STEPS)
    marks = {p.id: {m.name for m in p.marks} for p in params}
    assert all("long" in names for names in marks.values())
    assert [name for name, names in marks.items() if "sampled" in names] == ["Reset"]
    pairs = rotation.params([("a", "b"), ("c", "d")], ["ab", "cd"])
    assert [p.values for p in pairs] == [("a", "b"), ("c", "d")]
    with pytest.raises(ValueError, match="2 points but 1 ids"):
        rotation.params(["x", "y"], ["x"])


def test_the_life_cycles_and_slow_scenarios_take_one_turn_between_them_and_each_is_always_long(monkeypatch):
    group_of = {**{name: rotation.LIFE_CYCLES for name in rotation.LIFE_CYCLES},
                **{name: rotation.SLOW_SCENARIOS for name in rotation.SLOW_SCENARIOS}}

    def marks_of(name):
        def probe():
            pass
        return {m.name for m in getattr(rotation.turn(name, group_of[name])(probe), "pytestmark", [])}

    assert not set(rotation.SLOW_SCENARIOS) & set(rotation.LIFE_CYCLES)
    assert set(rotation.TURNS) == set(group_of)
    for number, name in enumerate(rotation.TURNS):
        monkeypatch.setenv("KUBENEST_ROTATION", str(number))
        assert marks_of(name) == {"long", "sampled"}
        assert all(marks_of(other) == {"long"} for other in rotation.TURNS if other != name)
    with pytest.raises(ValueError, match="'no-such' is not one of"):
        rotation.turn("no-such")
    with pytest.raises(ValueError, match="'awx-life-cycle' is not one of"):
        rotation.turn("awx-life-cycle", rotation.SLOW_SCENARIOS)
