"""Verifies a Gatehouse access token as a relying party would, with PyJWT: the key is picked
from the published key set by the token's `kid`; signature (RS256 only), `iss`, `aud`, `exp`
and `nbf` are checked. Prints `{"header": ..., "claims": ...}` as JSON. The audience is
`gatehouse` (a first-party product's), or the one given (an application's client id).

    python verify_jwt.py <base url> <token> [audience]
"""
import json
import sys

import jwt

base, token = sys.argv[1], sys.argv[2]
audience = sys.argv[3] if len(sys.argv) > 3 else "gatehouse"
client = jwt.PyJWKClient(f"{base}/.well-known/jwks.json", cache_keys=False)
signing_key = client.get_signing_key_from_jwt(token)
claims = jwt.decode(
    token,
    signing_key.key,
    algorithms=["RS256"],
    audience=audience,
    issuer=base,
    options={"require": ["exp", "iat", "nbf", "iss", "aud", "sub", "jti"]},
)
print(json.dumps({
    "header": jwt.get_unverified_header(token),
    "claims": claims,
}))
