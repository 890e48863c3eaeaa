"""Verifies a Gatehouse access token as a relying party would, with PyJWT: the key is picked
from the published key set by the token's `kid`; signature (RS256 only), `iss`, `aud`, `exp`
and `nbf` are checked. Prints `{"header": ..., "claims": ...}` as JSON.

    python verify_jwt.py <base url> <token>
"""
import json
import sys

import jwt

base, token = sys.argv[1], sys.argv[2]
client = jwt.PyJWKClient(f"{base}/.well-known/jwks.json", cache_keys=False)
signing_key = client.get_signing_key_from_jwt(token)
claims = jwt.decode(
    token,
    signing_key.key,
    algorithms=["RS256"],
    audience="gatehouse",
    issuer=base,
    options={"require": ["exp", "iat", "nbf", "iss", "aud", "sub", "jti"]},
)
print(json.dumps({
    "header": jwt.get_unverified_header(token),
    "claims": claims,
}))
