"""Agent settings: a TOML file, overridden by command-line flags."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .devpki import DEFAULT_CLIENT_NAME

DEFAULT_PORT = 7443
DEFAULT_CONFIG = "/etc/kubenest-agent/config.toml"


class ConfigError(Exception):
    pass


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"listen address must be HOST:PORT, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass
class AgentConfig:
    listen: tuple[str, int] = ("0.0.0.0", DEFAULT_PORT)
    tls_cert: str | None = None
    tls_key: str | None = None
    client_ca: str | None = None
    allowed_clients: list[str] = field(default_factory=lambda: [DEFAULT_CLIENT_NAME])
    state_dir: str = "/var/lib/kubenest-agent"
    audit_log: str | None = None  # None: the audit stream goes to stderr (journald under systemd)
    node_name: str | None = None
    log_level: str = "INFO"

    KEYS = ("listen", "tls_cert", "tls_key", "client_ca", "allowed_clients", "state_dir", "audit_log",
            "node_name", "log_level")

    def apply(self, values: dict, source: str) -> None:
        for key, value in values.items():
            if value is None:
                continue
            if key not in self.KEYS:
                raise ConfigError(f"{source}: unknown setting {key!r} (known: {', '.join(self.KEYS)})")
            if key == "listen":
                value = parse_listen(str(value))
            elif key == "allowed_clients":
                if isinstance(value, str):
                    value = [v for v in value.split(",") if v]
                if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
                    raise ConfigError(f"{source}: allowed_clients must be a non-empty list of names")
            elif not isinstance(value, str):
                raise ConfigError(f"{source}: {key} must be a string")
            setattr(self, key, value)

    def validate(self) -> None:
        missing = [k for k in ("tls_cert", "tls_key", "client_ca") if not getattr(self, k)]
        if missing:
            flags = ", ".join("--" + m.replace("_", "-") for m in missing)
            raise ConfigError(f"mutual TLS is mandatory; missing: {flags}")
        for key in ("tls_cert", "tls_key", "client_ca"):
            if not Path(getattr(self, key)).is_file():
                raise ConfigError(f"{key.replace('_', '-')} {getattr(self, key)!r} is not a readable file")


def load(path: str | None, flags: dict) -> AgentConfig:
    cfg = AgentConfig()
    file_path = path or (DEFAULT_CONFIG if Path(DEFAULT_CONFIG).is_file() else None)
    if file_path:
        try:
            data = tomllib.loads(Path(file_path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config {file_path}: {exc}") from None
        cfg.apply(data, file_path)
    cfg.apply(flags, "command line")
    cfg.validate()
    return cfg
