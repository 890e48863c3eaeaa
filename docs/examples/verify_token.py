"""Verifies a Gatehouse access token in a Python product service, with PyJWT.

    pip install "pyjwt[crypto]"
    GATEHOUSE_URL=https://id.example.com python verify_token.py <access token>

Prints the verified claims and what the token may do in its organization, as JSON; exits 1
with the reason when the token is refused.
"""
import json
import os
import sys

import jwt

# Gatehouse's public URL: the tokens' issuer. Its keys are published beside it.
ISSUER = os.environ["GATEHOUSE_URL"].rstrip("/")
JWKS_URL = os.environ.get("GATEHOUSE_JWKS_URL", f"{ISSUER}/.well-known/jwks.json")
# `gatehouse` for first-party tokens (a sign-in through Gatehouse's /auth/*); a product that
# receives the tokens Gatehouse issues to its OAuth application sets its own client id.
AUDIENCE = os.environ.get("GATEHOUSE_AUDIENCE", "gatehouse")

# One per process: it caches the keys, and fetches them again when a token names a key id it
# does not hold (Gatehouse rotated its signing key).
jwks = jwt.PyJWKClient(JWKS_URL, cache_keys=True, lifespan=600, timeout=5)


def verify(token: str) -> dict:
    signing_key = jwks.get_signing_key_from_jwt(token)
    return jwt.decode(
        token,
        signing_key.key,
        algorithms=["RS256"],  # never "none", never HS256
        audience=AUDIENCE,
        issuer=ISSUER,
        leeway=5,  # seconds of clock skew on exp and nbf, no more
        options={"require": ["exp", "iss", "aud", "sub"]},
    )


def can(claims: dict, permission: str) -> bool:
    """Whether the token grants the permission in its organization (org_permissions), to this
    product: a token issued to an OAuth application is for that application's client id only
    (it names `gatehouse` too when it may call Gatehouse's own API)."""
    intended = claims.get("client_id") or "gatehouse"
    return intended == AUDIENCE and permission in claims.get("org_permissions", [])


if __name__ == "__main__":
    try:
        claims = verify(sys.argv[1])
    except jwt.PyJWTError as error:
        print(f"refused: {error}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({
        "sub": claims["sub"],
        "org_id": claims.get("org_id"),
        "org_role": claims.get("org_role"),
        "can_read_members": can(claims, "organization.members.read"),
        "claims": claims,
    }))
