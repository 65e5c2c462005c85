"""The test bed's OAuth 2.0 token endpoint for the OAUTHBEARER listener.

POST /token with grant_type=client_credentials and the client's id and secret
(HTTP basic auth, or client_id/client_secret in the form) answers a JWT signed
RS256 with the test bed's key (the broker checks it against jwks.json, made
from the same key): sub = the client id, aud, iss, scope, exp = now + TTL.
A wrong id or secret gets 401 invalid_client. Nothing else is served.

usage: kafka_tls_token.py PORT KEY_PEM CLIENT_ID CLIENT_SECRET AUDIENCE ISSUER TTL_S
"""

import base64
import json
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

PORT, KEY_PEM, CLIENT_ID, CLIENT_SECRET, AUDIENCE, ISSUER, TTL_S = sys.argv[1:8]
with open(KEY_PEM, "rb") as f:
    KEY = serialization.load_pem_private_key(f.read(), password=None)
KID = "topicberg-testbed"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(sub: str, scope: str) -> str:
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": KID}
    claims = {"sub": sub, "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + int(TTL_S)}
    if scope:  # Kafka refuses an empty scope claim
        claims["scope"] = scope
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    signature = KEY.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + b64url(signature)


class Handler(BaseHTTPRequestHandler):
    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # readiness
        self._answer(200 if self.path == "/health" else 404, {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        client_id = form.get("client_id", [""])[0]
        secret = form.get("client_secret", [""])[0]
        auth = self.headers.get("Authorization", "")
        if auth.lower().startswith("basic "):
            decoded = base64.b64decode(auth[6:]).decode()
            client_id, _, secret = decoded.partition(":")
            client_id, secret = urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
        if self.path != "/token" or form.get("grant_type", [""])[0] != "client_credentials":
            self._answer(400, {"error": "unsupported_grant_type"})
        elif client_id != CLIENT_ID or secret != CLIENT_SECRET:
            self._answer(401, {"error": "invalid_client"})
        else:
            scope = form.get("scope", [""])[0]
            self._answer(200, {"access_token": jwt(client_id, scope), "token_type": "bearer",
                               "expires_in": int(TTL_S)})

    def log_message(self, fmt: str, *args) -> None:
        sys.stderr.write("token endpoint: " + (fmt % args) + "\n")


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(PORT)), Handler).serve_forever()
