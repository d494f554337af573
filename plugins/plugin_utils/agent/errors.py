"""Client-side failures, split the way Ansible needs them: unreachable host vs failed operation."""

from __future__ import annotations

import errno
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
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

    # With TLS 1.3 the server checks our certificate after our side of the handshake is done, so its
    # alert surfaces later, wrapped in a websocket handshake error: report the underlying cause.
    cause = exc
    while isinstance(cause, InvalidHandshake) and not isinstance(cause, InvalidStatus) and cause.__cause__:
        cause = cause.__cause__
    if cause is not exc:
        return describe_connect_error(cause, where)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: the agent certificate at {where} is not trusted: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        reason = (exc.reason or str(exc)).lower().replace("_", " ")
        if "alert" in reason:
            return f"TLS: the agent at {where} did not accept our client certificate ({reason})"
        return f"TLS handshake with the agent at {where} failed: {reason}"
    if isinstance(exc, InvalidStatus):
        body = (exc.response.body or b"").decode(errors="replace").strip()
        return f"the agent at {where} refused the connection: HTTP {exc.response.status_code} {body}".rstrip()
    if isinstance(exc, InvalidHandshake):
        return f"websocket handshake with the agent at {where} failed: {exc}"
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
        return f"connection to the agent at {where} refused (is kubenest-agent running?)"
    if isinstance(exc, (TimeoutError, socket.timeout)) or getattr(exc, "errno", None) == errno.ETIMEDOUT:
        return f"timed out connecting to the agent at {where}"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the agent address {where}: {exc.strerror}"
    if isinstance(exc, (ConnectionResetError, EOFError, ConnectionClosed)):
        return (f"TLS: the agent at {where} dropped the connection during the handshake: it did not accept our "
                "client certificate (missing, expired, or from a CA it does not trust); its audit log has the reason")
    if isinstance(exc, OSError):
        return f"cannot connect to the agent at {where}: {exc.strerror or exc}"
    return f"cannot connect to the agent at {where}: {exc}"
