"""An OpenID Connect issuer for tests: serves its discovery document and key set over TLS (its own CA, which the
API server is given inline) and signs RS256 tokens. The API server fetches the document and keys from it exactly
as from any issuer; only the tokens are minted here rather than after a login."""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(number: int) -> str:
    return _b64(number.to_bytes((number.bit_length() + 7) // 8, "big"))


class JwtIssuer:
    """Context manager: `url` is https://<address>:<port>, `ca_pem` its CA; `token(...)` a signed ID token.
    Counts the requests for its key set in `key_fetches`."""

    KEY_ID = "kubenest-test"

    def __init__(self, address: str = "127.0.0.1", port: int = 0):
        self.address, self.port = address, port
        self.ca = pki.new_ca("kubenest-test-issuer-ca")
        self.ca_pem = pki.certificate_pem(self.ca.cert).decode()
        self.key = pki.generate_private_key()
        self.key_fetches = 0
        self.server: ThreadingHTTPServer | None = None
        self.url = ""

    def documents(self) -> dict[str, dict]:
        numbers = self.key.public_key().public_numbers()
        jwks = {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": self.KEY_ID,
                          "n": _uint(numbers.n), "e": _uint(numbers.e)}]}
        discovery = {"issuer": self.url, "jwks_uri": self.url + "/keys", "response_types_supported": ["id_token"],
                     "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["RS256"]}
        return {"/.well-known/openid-configuration": discovery, "/keys": jwks}

    def __enter__(self) -> JwtIssuer:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                document = issuer.documents().get(self.path)
                if self.path == "/keys":
                    issuer.key_fetches += 1
                body = json.dumps(document).encode() if document is not None else b"not found"
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args):
                pass

        self.server = ThreadingHTTPServer((self.address, self.port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"https://{self.address}:{self.port}"
        serving = pki.issue_certificate(self.ca, "issuer", ip_addresses=[self.address], server=True)
        with tempfile.TemporaryDirectory() as work:
            cert, key = Path(work) / "tls.crt", Path(work) / "tls.key"
            cert.write_bytes(pki.certificate_pem(serving.cert))
            key.write_bytes(pki.private_key_pem(serving.key))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(cert), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True, name="jwt-issuer").start()
        return self

    def __exit__(self, *_exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def token(self, subject: str, audience: str, groups: tuple[str, ...] = (), lifetime: int = 600,
              issuer: str | None = None) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.KEY_ID}
        claims = {"iss": issuer or self.url, "sub": subject, "aud": audience, "iat": now, "nbf": now - 5,
                  "exp": now + lifetime, "groups": list(groups)}
        signing_input = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing_input + "." + _b64(signature)

    def authentication(self, audience: str, prefix: str = "oidc:") -> dict:
        """spec.controlPlane.apiServer.authentication trusting this issuer."""
        return {"jwt": [{"issuer": {"url": self.url, "audiences": [audience], "certificateAuthority": self.ca_pem},
                         "claimMappings": {"username": {"claim": "sub", "prefix": prefix},
                                           "groups": {"claim": "groups", "prefix": prefix}}}]}
