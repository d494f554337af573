"""``kubenest-agent``: serve, or issue a development PKI. The controller side (client, mux) is in the
collection, under plugins/plugin_utils/agent."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from . import __version__


def _serve(args) -> int:
    from .config import ConfigError, load
    from .server import Agent

    flags = {"listen": args.listen, "tls_cert": args.tls_cert, "tls_key": args.tls_key, "client_ca": args.client_ca,
             "allowed_clients": args.allow_client, "state_dir": args.state_dir, "audit_log": args.audit_log,
             "node_name": args.node_name, "log_level": args.log_level}
    try:
        cfg = load(args.config, flags)
    except ConfigError as exc:
        print(f"kubenest-agent: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=cfg.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if cfg.audit_log:
        handler = logging.FileHandler(cfg.audit_log)
        handler.setFormatter(logging.Formatter("%(message)s"))
        audit_log = logging.getLogger("kubenest_agent.audit")
        audit_log.addHandler(handler)
        audit_log.propagate = False
    try:
        agent = Agent(cfg)
    except (OSError, ValueError) as exc:
        print(f"kubenest-agent: cannot load TLS material: {exc}", file=sys.stderr)
        return 2
    asyncio.run(agent.serve())
    return 0


def _certs(args) -> int:
    from .devpki import ensure_dev_pki

    paths = ensure_dev_pki(Path(args.out), args.node, args.ip or [])
    print(json.dumps(paths, indent=2))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kubenest-agent", description=__doc__)
    parser.add_argument("--version", action="version", version=f"kubenest-agent {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the agent (mutual TLS only)")
    serve.add_argument("--config", help="TOML config file (flags override it)")
    serve.add_argument("--listen", help="HOST:PORT to listen on (default 0.0.0.0:7443)")
    serve.add_argument("--tls-cert", help="server certificate (PEM)")
    serve.add_argument("--tls-key", help="server private key (PEM)")
    serve.add_argument("--client-ca", help="CA that signs allowed client certificates")
    serve.add_argument("--allow-client", action="append", help="client certificate CN to accept (repeatable)")
    serve.add_argument("--state-dir", help="directory for the agent's own state")
    serve.add_argument("--audit-log", help="write audit lines to this file instead of stderr")
    serve.add_argument("--node-name", help="name reported by health (default: hostname)")
    serve.add_argument("--log-level", help="DEBUG, INFO, WARNING ...")
    serve.set_defaults(func=_serve)

    certs = sub.add_parser(
        "certs", help="write the agents' CA and the controller's client pair, and a node's server pair with --node "
                      "(an existing CA and client pair are kept)")
    certs.add_argument("--out", required=True, help="directory for the PKI files")
    certs.add_argument("--node", help="node name (certificate CN and DNS SAN) of a server pair to issue")
    certs.add_argument("--ip", action="append", help="IP SAN for the node (repeatable)")
    certs.set_defaults(func=_certs)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
