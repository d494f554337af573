"""The agent's TLS context: mutual TLS is the only mode, TLS 1.3 only (both ends are ours)."""

from __future__ import annotations

import ssl


def server_context(cert_file: str, key_file: str, client_ca_file: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(cert_file, key_file)
    ctx.load_verify_locations(cafile=client_ca_file)
    ctx.verify_mode = ssl.CERT_REQUIRED
    # No TLS 1.3 session tickets: no client resumes a session, and a ticket that arrives while a threaded
    # client (websockets' sync client reads in one thread, writes in another) sends its upgrade request
    # makes OpenSSL drop that request, which then times out on the agent's side.
    ctx.num_tickets = 0
    return ctx


def peer_identity(ssl_object) -> str | None:
    """Common name of the verified peer certificate, or None."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None
