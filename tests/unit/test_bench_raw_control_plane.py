"""bench/raw_control_plane.py: the create baseline takes its settings from the control_plane role, not a copy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench import raw_control_plane
from bench.raw_control_plane import RawControlPlane, hosted_gogc


def write_defaults(root: Path, gogc: dict) -> None:
    defaults = root / "roles" / "control_plane" / "defaults" / "main"
    defaults.mkdir(parents=True)
    (defaults / "hosted.yml").write_text(yaml.safe_dump({"control_plane_hosted_gogc": gogc, "other": 1}))


def test_gogc_is_the_roles_default_by_binary():
    role = yaml.safe_load((raw_control_plane.REPO / "roles/control_plane/defaults/main/hosted.yml").read_text())
    expected = {f"kube-{component}": str(value)
                for component, value in role["control_plane_hosted_gogc"].items() if int(value) > 0}
    assert hosted_gogc() == expected
    assert expected, "the role sets no GOGC: the hosted baseline would equal the lower bound"


def test_zero_keeps_gos_default(tmp_path, monkeypatch):
    write_defaults(tmp_path, {"apiserver": 50, "controller-manager": 0, "scheduler": 200})
    monkeypatch.setattr(raw_control_plane, "REPO", tmp_path)
    assert hosted_gogc() == {"kube-apiserver": "50", "kube-scheduler": "200"}


def test_an_unknown_component_is_an_error_not_a_silent_skip(tmp_path, monkeypatch):
    write_defaults(tmp_path, {"apiserver": 50, "kubelet": 25})
    monkeypatch.setattr(raw_control_plane, "REPO", tmp_path)
    with pytest.raises(KeyError, match="kubelet"):
        hosted_gogc()


def test_hosted_settings_sync_etcd_and_set_gogc_per_binary(tmp_path, monkeypatch):
    write_defaults(tmp_path, {"apiserver": 25, "controller-manager": 30, "scheduler": 0})
    monkeypatch.setattr(raw_control_plane, "REPO", tmp_path)
    monkeypatch.setenv("KUBENEST_PROBE", "kept")
    hosted = RawControlPlane("hosted", tmp_path)
    assert hosted.etcd_fsync and hosted.work_root == tmp_path
    assert hosted.env_of("kube-apiserver")["GOGC"] == "25"
    assert hosted.env_of("kube-controller-manager")["GOGC"] == "30"
    assert hosted.env_of("kube-apiserver")["KUBENEST_PROBE"] == "kept"  # added to the environment, not instead
    assert hosted.env_of("kube-scheduler") is None and hosted.env_of("etcd") is None


def test_upstream_syncs_etcd_and_keeps_every_binarys_own_defaults(tmp_path):
    upstream = RawControlPlane("upstream", tmp_path)
    assert upstream.etcd_fsync and upstream.work_root == tmp_path
    assert all(upstream.env_of(binary) is None
               for binary in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"))


def test_go_defaults_are_the_fixtures_own():
    lower = RawControlPlane("go-defaults")
    assert not lower.etcd_fsync
    assert all(lower.env_of(binary) is None
               for binary in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"))


def test_unknown_settings_are_refused():
    with pytest.raises(ValueError, match="settings must be one of"):
        RawControlPlane("fast")


def test_a_batch_starts_every_plane_on_ports_of_its_own_and_stops_them_all_when_one_fails(monkeypatch):
    calls: list[tuple[str, int, object]] = []
    monkeypatch.setattr(RawControlPlane, "prepare", lambda self, ports: calls.append(("prepare", id(self), ports)))

    def launch(self):
        calls.append(("launch", id(self), None))
        if len([c for c in calls if c[0] == "launch"]) == 2:
            raise RuntimeError("kube-apiserver /readyz")  # one plane failing still stops every plane

    monkeypatch.setattr(RawControlPlane, "launch", launch)
    monkeypatch.setattr(RawControlPlane, "stop", lambda self: calls.append(("stop", id(self), None)))
    with pytest.raises(RuntimeError, match="readyz"):
        raw_control_plane.batch_startup_seconds(3, "go-defaults")
    prepares = [c for c in calls if c[0] == "prepare"]
    assert len(prepares) == 3 and len({c[1] for c in prepares}) == 3
    ports = [port for c in prepares for port in c[2]]
    assert len(ports) == 15 and len(set(ports)) == 15
    assert {c[1] for c in calls if c[0] == "stop"} == {c[1] for c in prepares}
