"""bench/settle.py: the CPU pressure it reads, and that it waits for quiet within its floor and ceiling."""

from __future__ import annotations

import pytest

from bench import settle

PSI = "some avg10={some} avg60=15.35 avg300=23.95 total=27034695797\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


@pytest.fixture
def pressure(tmp_path, monkeypatch):
    path = tmp_path / "cpu"
    monkeypatch.setattr(settle, "PRESSURE", path)
    return path


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(settle.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(settle.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    return now


def test_the_ten_second_average_of_some_is_read(pressure):
    pressure.write_text(PSI.format(some="17.82"))
    assert settle.cpu_pressure() == 17.82


def test_without_psi_there_is_no_reading(pressure):
    assert settle.cpu_pressure() is None


def test_a_quiet_machine_waits_the_floor_only(pressure, clock):
    pressure.write_text(PSI.format(some="12.00"))
    assert settle.settle(floor_s=10, ceiling_s=120) == 10


def test_a_busy_machine_is_waited_for_until_it_is_quiet(pressure, clock, monkeypatch):
    readings = iter(["60.00", "40.00", "20.00"])
    monkeypatch.setattr(settle, "cpu_pressure", lambda: float(next(readings)))
    assert settle.settle(floor_s=10, ceiling_s=120) == 12


def test_a_machine_that_stays_busy_is_waited_for_up_to_the_ceiling(pressure, clock):
    pressure.write_text(PSI.format(some="90.00"))
    assert settle.settle(floor_s=10, ceiling_s=30) == 30
