"""An OAuth identity provider in the test process, for OAUTHBEARER against a broker that verifies tokens: POST /token
(client-credentials grant, HTTP Basic) answers an RS256-signed JWT, GET /jwks the public key. The secured broker's
OIDC listener (conftest) runs Kafka's OAuthBearerValidatorCallbackHandler against this JWKS."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["AUDIENCE", "CLIENT_ID", "CLIENT_SECRET", "IdentityProvider", "b64url", "start_identity_provider"]

CLIENT_ID = "spark-writer"
CLIENT_SECRET = "oidc-Secret-9Q7x"  # distinctive: searched for in errors
# A client whose provider form-decodes the Basic credentials (RFC 6749 2.3.1), with a secret that changes when it is.
RFC_CLIENT_ID = "rfc writer"
RFC_CLIENT_SECRET = "p+w/d=%41&x"
AUDIENCE = "kafka-test"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class IdentityProvider:
    """An OAuth server: POST /token (client credentials, HTTP Basic) answers a signed JWT, GET /jwks the key."""

    server: ThreadingHTTPServer
    key: Any
    token_requests: list[dict[str, list[str]]] = field(default_factory=list)
    fail_next: list[int] = field(default_factory=list)  # HTTP statuses to answer before the next good one
    delay_s: float = 0.0  # a slow provider: this long before each token answer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"  # bound there by the fixture

    def token(self, subject: str, lifetime: float = 3600) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        now = time.time()
        header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": "k1"}).encode())
        claims = b64url(json.dumps({"sub": subject, "aud": AUDIENCE, "iss": self.url, "iat": int(now),
                                    "exp": int(now + lifetime), "scope": "kafka"}).encode())
        signature = self.key.sign(f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{header}.{claims}.{b64url(signature)}"

    def jwks(self) -> dict[str, Any]:
        numbers = self.key.public_key().public_numbers()
        as_bytes = [n.to_bytes((n.bit_length() + 7) // 8, "big") for n in (numbers.n, numbers.e)]
        return {"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
                          "n": b64url(as_bytes[0]), "e": b64url(as_bytes[1])}]}


def _client(authorization: str) -> str | None:
    """The client a Basic header proves, or None. CLIENT_ID's credentials are compared as sent (as most providers
    and Java's default, sasl.oauthbearer.header.urlencode=false, have it); RFC_CLIENT_ID's are form-decoded first
    (RFC 6749 2.3.1), so its secret's '+', '/', '%' and '=' must arrive encoded."""
    scheme, _, encoded = authorization.partition(" ")
    try:
        client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
    except ValueError:
        return None
    if scheme != "Basic":
        return None
    if (client_id, secret) == (CLIENT_ID, CLIENT_SECRET):
        return CLIENT_ID
    if (urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret)) == (RFC_CLIENT_ID, RFC_CLIENT_SECRET):
        return RFC_CLIENT_ID
    return None


def _handler(idp: list[IdentityProvider]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self._answer(200, idp[0].jwks()) if self.path == "/jwks" else self._answer(404, {})

        def do_POST(self) -> None:  # noqa: N802
            form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            idp[0].token_requests.append(form)
            time.sleep(idp[0].delay_s)  # the provider's own slowness (what the read timeout is tested against)
            if idp[0].fail_next:
                self._answer(idp[0].fail_next.pop(0), {"error": "temporarily_unavailable"})
            elif _client(self.headers.get("Authorization") or "") is None:
                self._answer(401, {"error": "invalid_client", "error_description": "bad client secret"})
            elif form.get("grant_type") != ["client_credentials"]:
                self._answer(400, {"error": "unsupported_grant_type"})
            else:
                self._answer(200, {"access_token": idp[0].token(str(_client(self.headers["Authorization"]))),
                                   "token_type": "Bearer",
                                   "expires_in": 3600})

    return Handler


def start_identity_provider() -> tuple[IdentityProvider, Callable[[], None]]:
    """The provider, serving on 127.0.0.1 in a thread, and the function that stops it."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that gave up (the timeout test) closes before its answer: nothing to report

    holder: list[IdentityProvider] = []
    server = Server(("127.0.0.1", 0), _handler(holder))
    holder.append(IdentityProvider(server, rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return holder[0], stop
