"""node_reset's unit handling: one `systemctl show` decides, one `systemctl disable --now` acts."""

from __future__ import annotations

import os

import pytest
from ansible_collections.kosmos.kubenest.plugins.modules.node_reset import Reset, removal_script

SHOW = """Id=kubelet.service
LoadState=loaded
ActiveState=active
UnitFileState=enabled

Id=kube-proxy.service
LoadState=not-found
ActiveState=inactive
UnitFileState=

Id=kubenest-pod-routes.service
LoadState=loaded
ActiveState=inactive
UnitFileState=disabled

Id=late.service
LoadState=loaded
ActiveState=inactive
UnitFileState=enabled
"""


class FakeModule:
    def __init__(self, check_mode=False, show=SHOW):
        self.check_mode, self.show, self.calls = check_mode, show, []

    def get_bin_path(self, name, required=False):
        return "/usr/bin/" + name

    def run_command(self, argv, data=None, binary_data=False):
        self.calls.append(argv)
        return 0, self.show if argv[1] == "show" else "", ""

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs)


@pytest.mark.parametrize("check_mode", [False, True])
def test_only_units_that_run_or_start_at_boot_are_stopped(check_mode):
    module = FakeModule(check_mode)
    reset = Reset(module)
    reset.units(["kubelet", "kube-proxy", "kubenest-pod-routes", "late.service"])
    assert reset.result["stopped"] == ["kubelet.service", "late.service"]
    show = module.calls[0]
    assert show[1] == "show" and show[-4:] == ["kubelet.service", "kube-proxy.service",
                                               "kubenest-pod-routes.service", "late.service"]
    expected = [] if check_mode else [["/usr/bin/systemctl", "disable", "--now", "--", "kubelet.service",
                                       "late.service"]]
    assert module.calls[1:] == expected


def test_nothing_to_stop_runs_nothing():
    module = FakeModule(show="Id=kubelet.service\nLoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n")
    reset = Reset(module)
    reset.units(["kubelet"])
    assert reset.result["stopped"] == [] and len(module.calls) == 1
    Reset(module).units([])
    assert len(module.calls) == 1


@pytest.mark.parametrize("check_mode", [False, True])
def test_units_to_restart_go_in_one_call_and_are_reported_in_check_mode_too(check_mode):
    module = FakeModule(check_mode)
    reset = Reset(module)
    reset.restart(["containerd", "other.service"])
    assert reset.result["restarted"] == ["containerd.service", "other.service"]
    assert module.calls == ([] if check_mode else
                            [["/usr/bin/systemctl", "restart", "--", "containerd.service", "other.service"]])
    Reset(module).restart([])
    assert len(module.calls) == (0 if check_mode else 1)


SAVED_NAT = """*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:CNI-04f617d3bc04 - [0:0]
-A POSTROUTING -s 198.18.64.2/32 -m comment --comment "name: \\"kubenest-tenant\\" id: \\"db60\\"" -j CNI-04f617d3bc04
-A POSTROUTING -s 10.1.0.0/16 -j MASQUERADE
-A CNI-04f617d3bc04 -d 198.18.64.0/24 -j ACCEPT
COMMIT
"""


def test_removal_script_deletes_jumps_as_saved_then_the_chains():
    script = removal_script("nat", SAVED_NAT, ["CNI-04f617d3bc04"])
    assert script.splitlines() == [
        "*nat",
        '-D POSTROUTING -s 198.18.64.2/32 -m comment --comment "name: \\"kubenest-tenant\\" id: \\"db60\\""'
        " -j CNI-04f617d3bc04",
        "-F CNI-04f617d3bc04",
        "-X CNI-04f617d3bc04",
        "COMMIT",
    ]


class Containers(FakeModule):
    """ctr with one container whose `containers delete` fails; `still_there` says whether `info` finds it."""

    def __init__(self, still_there):
        super().__init__()
        self.still_there = still_there

    def run_command(self, argv, data=None, binary_data=False):
        self.calls.append(argv)
        verb = argv[3:5]
        if verb == ["containers", "ls"]:
            return 0, "c1\n", ""
        if verb == ["containers", "delete"]:
            return 1, "", 'container "c1" in namespace "k8s.io": not found'
        if verb == ["containers", "info"]:
            return (0, "{}", "") if self.still_there else (1, "", "not found")
        return 0, "", ""


@pytest.fixture
def containerd_socket(monkeypatch):
    real = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda path: path == "/run/containerd/containerd.sock" or real(path))


def test_a_container_gone_before_its_delete_counts_as_deleted(containerd_socket):
    reset = Reset(Containers(still_there=False))
    reset.containers("k8s.io")
    assert reset.result["containers"] == ["c1"]


def test_a_container_that_stays_fails_the_reset_by_name(containerd_socket):
    with pytest.raises(AssertionError, match="containers delete c1 failed"):
        Reset(Containers(still_there=True)).containers("k8s.io")


class FakeCtr(FakeModule):
    def __init__(self, check_mode=False, listed="kubenest.local/cilium:v1\nhost.example/private:1\n"
                 "kubenest.local/coredns:v1\n"):
        super().__init__(check_mode)
        self.listed = listed

    def run_command(self, argv, data=None, binary_data=False):
        self.calls.append(argv)
        return 0, self.listed if argv[3:5] == ["images", "ls"] else "", ""


@pytest.mark.parametrize("check_mode", [False, True])
def test_every_image_but_those_kept_is_removed_with_its_content(check_mode, monkeypatch):
    monkeypatch.setattr(os.path, "exists", lambda path: True)
    module = FakeCtr(check_mode)
    reset = Reset(module)
    reset.images("k8s.io", ["kubenest.local/coredns:v1"])
    assert reset.result["images"] == ["kubenest.local/cilium:v1", "host.example/private:1"]
    removal = [["/usr/bin/ctr", "-n", "k8s.io", "images", "rm", "--sync", "--", "kubenest.local/cilium:v1",
                "host.example/private:1"]]
    assert module.calls[1:] == ([] if check_mode else removal)


def test_nothing_to_remove_is_no_call(monkeypatch):
    monkeypatch.setattr(os.path, "exists", lambda path: True)
    module = FakeCtr(listed="kubenest.local/coredns:v1\n")
    reset = Reset(module)
    reset.images("k8s.io", ["kubenest.local/coredns:v1"])
    assert reset.result["images"] == [] and len(module.calls) == 1
