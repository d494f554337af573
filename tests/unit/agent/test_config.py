import pytest

from kubenest_agent.config import AgentConfig, ConfigError, load, parse_listen


@pytest.fixture
def tls_files(tmp_path):
    for name in ("c.crt", "c.key", "ca.crt"):
        (tmp_path / name).write_text("x")
    return tmp_path


def test_flags_override_file(tmp_path, tls_files):
    cfg_file = tmp_path / "agent.toml"
    cfg_file.write_text(f'listen = "127.0.0.1:9000"\ntls_cert = "{tls_files}/c.crt"\ntls_key = "{tls_files}/c.key"\n'
                        f'client_ca = "{tls_files}/ca.crt"\nallowed_clients = ["a", "b"]\n')
    cfg = load(str(cfg_file), {"listen": "127.0.0.2:9001", "allowed_clients": None})
    assert cfg.listen == ("127.0.0.2", 9001)
    assert cfg.allowed_clients == ["a", "b"]


def test_unknown_setting_is_named(tmp_path):
    cfg_file = tmp_path / "agent.toml"
    cfg_file.write_text('lisen = "x"\n')
    with pytest.raises(ConfigError, match="unknown setting 'lisen'"):
        load(str(cfg_file), {})


def test_tls_is_mandatory():
    with pytest.raises(ConfigError, match="mutual TLS is mandatory.*--tls-cert.*--client-ca"):
        load(None, {"listen": "127.0.0.1:1"})


def test_missing_tls_file_is_named(tls_files):
    with pytest.raises(ConfigError, match="client-ca '/nonexistent/ca.crt'"):
        load(None, {"tls_cert": f"{tls_files}/c.crt", "tls_key": f"{tls_files}/c.key",
                    "client_ca": "/nonexistent/ca.crt"})


@pytest.mark.parametrize("bad", ["nohost", "h:0", "h:70000", "h:abc"])
def test_bad_listen(bad):
    with pytest.raises(ConfigError, match="HOST:PORT"):
        parse_listen(bad)


def test_ipv6_listen():
    assert parse_listen("[::1]:7443") == ("::1", 7443)


def test_default_allow_list_is_the_controller():
    assert AgentConfig().allowed_clients == ["kubenest-controller"]
