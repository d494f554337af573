"""Controller side of the agent's TLS: the client context and certificate pins (TLS 1.3, mutual, only)."""

from __future__ import annotations

import datetime
import hashlib
import ssl


def client_context(ca_file: str, cert_file: str, key_file: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(cafile=ca_file)
    ctx.load_cert_chain(cert_file, key_file)
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def fingerprint(der: bytes) -> str:
    """SHA-256 of a DER certificate, lowercase hex: the form pins are written in."""
    return hashlib.sha256(der).hexdigest()


def normalize_pins(pins) -> tuple[str, ...]:
    """Pins as given ("sha256:AB:CD...", any case, a list or a comma-separated string) in fingerprint form."""
    if isinstance(pins, str):
        pins = pins.split(",")
    out = []
    for pin in pins or ():
        value = pin.strip().lower().removeprefix("sha256:").replace(":", "")
        if value:
            if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
                raise ValueError(f"not a SHA-256 certificate fingerprint: {pin!r}")
            out.append(value)
    return tuple(sorted(set(out)))


def pin_mismatch(ssl_object, pins: tuple[str, ...], where: str) -> str | None:
    """Why the peer's certificate is not acceptable under `pins` (None when it is, or when nothing is pinned).
    A pin narrows the CA's trust to the certificates recorded for that agent: one it re-issued replaces
    the old, which the CA alone would still accept."""
    if not pins:
        return None
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    seen = fingerprint(der) if der else "none"
    if seen in pins:
        return None
    return (f"TLS: the agent at {where} presented certificate sha256:{seen}, which is not the one recorded for it "
            f"(sha256:{', sha256:'.join(pins)}); it may be an old certificate of that node or another machine")


def peer_common_name(ssl_object) -> str | None:
    """The common name of the certificate the peer presented (checked against the CA on the handshake), or None.
    An agent's certificate names its node: the audit record is kept under that name, whichever inventory host
    (delegating tasks, say) the connection was opened for."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and value:
                return value
    return None


def _load_pem(cert_file: str):
    from cryptography import x509

    with open(cert_file, "rb") as fh:
        return x509.load_pem_x509_certificate(fh.read())


def same_subject(cert_file: str, other_file: str) -> bool:
    """Whether two PEM certificates name the same subject and issuer (one identity, two issues)."""
    one, other = _load_pem(cert_file), _load_pem(other_file)
    return one.subject == other.subject and one.issuer == other.issuer


def issued_after(cert_file: str) -> int:
    """The first second after the notBefore of the PEM certificate in `cert_file`: what an agent is asked to
    refuse everything issued before, to retire that certificate and its elders."""
    cert = _load_pem(cert_file)
    not_before = getattr(cert, "not_valid_before_utc", None) or cert.not_valid_before.replace(
        tzinfo=datetime.timezone.utc)
    return int(not_before.timestamp()) + 1
