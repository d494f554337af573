"""Command line -> Config."""

from __future__ import annotations

import pytest

from kubenest_operator.cli import config_from_args, parser


def config(*argv: str, kubeconfig: str):
    return config_from_args(parser().parse_args(["--kubeconfig", kubeconfig, *argv]))


def test_defaults(tmp_path):
    cfg = config(kubeconfig=str(tmp_path / "kc"))
    assert cfg.kubeconfig == str(tmp_path / "kc")
    assert cfg.namespaces == () and cfg.peering == "kubenest" and cfg.priority is None
    assert cfg.max_parallel == 4 and cfg.artifacts_keep == 10
    assert (cfg.playbook_dir / "virtualcluster.yml").is_file()


def test_namespaces_standalone_and_limits(tmp_path):
    cfg = config("-n", "a", "--namespace", "b", "c", "--standalone", "--max-parallel", "2", "--artifacts-keep", "0",
                 "--playbook-dir", str(tmp_path), "--runs-dir", str(tmp_path / "runs"),
                 "--backoff-base", "30", "--backoff-max", "5", kubeconfig="kc")
    assert cfg.namespaces == ("a", "b", "c") and cfg.peering is None
    assert cfg.max_parallel == 2 and cfg.artifacts_keep == 0
    assert cfg.playbook_dir == tmp_path.resolve() and cfg.runs_dir == (tmp_path / "runs").resolve()
    assert cfg.backoff_max == 30  # never below the base


@pytest.mark.parametrize("argv", [
    ["--standalone", "--peering", "x"], ["-n", "a", "--all-namespaces"], ["--max-parallel", "0"],
    ["--artifacts-keep", "-1"], ["--allowed-registry", "evil.example/path"], ["--allowed-registry", "a b"],
    ["--metrics-address", "9100"], ["--metrics-address", ":0"], ["--metrics-address", "host:http"],
])
def test_conflicting_or_bad_options_are_refused(argv):
    with pytest.raises(SystemExit):
        parser().parse_args(argv)


def test_kubeconfig_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "env-kc"))
    assert config_from_args(parser().parse_args([])).kubeconfig == str(tmp_path / "env-kc")


def test_allowed_registries_are_collected():
    cfg = config("--allowed-registry", "kubenest.local", "--allowed-registry", "registry.example.com:5000",
                 kubeconfig="kc")
    assert cfg.allowed_registries == ("kubenest.local", "registry.example.com:5000")


def test_runs_per_namespace_default_to_half_and_never_exceed_the_total():
    assert config(kubeconfig="kc").max_parallel_per_namespace == 2
    assert config("--max-parallel", "1", kubeconfig="kc").max_parallel_per_namespace == 1
    assert config("--max-parallel", "3", "--max-parallel-per-namespace", "9",
                  kubeconfig="kc").max_parallel_per_namespace == 3


def test_upgrade_runs_go_one_at_a_time_unless_asked_and_never_exceed_the_total():
    assert config(kubeconfig="kc").max_parallel_upgrades == 1
    assert config("--max-parallel-upgrades", "3", kubeconfig="kc").max_parallel_upgrades == 3
    assert config("--max-parallel", "2", "--max-parallel-upgrades", "9", kubeconfig="kc").max_parallel_upgrades == 2


@pytest.mark.parametrize("address", [":9100", "127.0.0.1:9100", "[::]:9100"])
def test_a_metrics_address_is_host_and_port(address):
    assert parser().parse_args(["--metrics-address", address]).metrics_address == address
