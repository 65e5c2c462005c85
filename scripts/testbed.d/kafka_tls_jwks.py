"""Prints the JWKS (one RSA key, kid "topicberg-testbed") of a PEM private key.

usage: kafka_tls_jwks.py KEY_PEM
"""

import base64
import json
import sys

from cryptography.hazmat.primitives import serialization


def b64url_int(n: int) -> str:
    data = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


with open(sys.argv[1], "rb") as f:
    numbers = serialization.load_pem_private_key(f.read(), password=None).public_key().public_numbers()
print(json.dumps({"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "topicberg-testbed",
                            "n": b64url_int(numbers.n), "e": b64url_int(numbers.e)}]}))
