"""Client-side failures, split the way Ansible needs them: unreachable host vs failed operation."""

from __future__ import annotations

import socket
import ssl


class AgentError(Exception):
    """Anything that went wrong talking to an agent."""


class AgentUnreachable(AgentError):
    """No working connection: refused, timed out, TLS rejected, identity refused, or lost."""


class AgentConnectionLost(AgentUnreachable):
    """The connection dropped while an operation was running."""


class AgentOpError(AgentError):
    """The agent refused or failed one operation; ``code`` comes from the protocol."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def describe_connect_error(exc: BaseException, where: str) -> str:
    """A message naming the cause, for errors raised while opening a connection."""
    # Imported lazily: the plugin side must not pay for websockets when it only talks to the mux.
    from websockets.exceptions import InvalidHandshake, InvalidStatus

    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: the agent certificate at {where} is not trusted: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        reason = (exc.reason or str(exc)).lower().replace("_", " ")
        if "alert" in reason:
            return f"TLS: the agent at {where} rejected our client certificate ({reason})"
        return f"TLS handshake with the agent at {where} failed: {reason}"
    if isinstance(exc, InvalidStatus):
        body = (exc.response.body or b"").decode(errors="replace").strip()
        return f"the agent at {where} refused the connection: HTTP {exc.response.status_code} {body}".rstrip()
    if isinstance(exc, InvalidHandshake):
        return f"websocket handshake with the agent at {where} failed: {exc}"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection to the agent at {where} refused (is kubenest-agent running?)"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"timed out connecting to the agent at {where}"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the agent address {where}: {exc.strerror}"
    if isinstance(exc, (ConnectionResetError, EOFError)):
        return f"the agent at {where} closed the connection during the handshake (TLS client certificate rejected?)"
    if isinstance(exc, OSError):
        return f"cannot connect to the agent at {where}: {exc.strerror or exc}"
    return f"cannot connect to the agent at {where}: {exc}"
