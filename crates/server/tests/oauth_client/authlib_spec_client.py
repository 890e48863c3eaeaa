"""A client written from the OAuth 2.0 spec's own fields (RFC 6749 §4.1), driven by authlib: the
authorization request carries response_type, client_id, redirect_uri, scope and state, and no
PKCE; the token request grant_type, code, redirect_uri, client_id and client_secret.

    python3 authlib_spec_client.py BASE_URL CLIENT_ID CLIENT_SECRET REDIRECT_URI EMAIL PASSWORD

Prints one JSON object of what it saw; exits non-zero on the first thing that is wrong.
"""

import json
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import requests
from authlib.common.security import generate_token
from authlib.integrations.base_client import OAuthError
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from hosted_login import sign_in

SPEC_FIELDS = {"response_type", "client_id", "redirect_uri", "scope", "state"}


def main() -> None:
    base, client_id, client_secret, redirect_uri, email, password = sys.argv[1:7]
    authorize_url = urljoin(base, "/oauth/authorize")
    token_url = urljoin(base, "/oauth/token")

    def client(secret: str) -> OAuth2Session:
        # No code_challenge_method: authlib sends no PKCE. The secret goes in the form.
        return OAuth2Session(
            client_id,
            secret,
            scope="read:user",
            redirect_uri=redirect_uri,
            token_endpoint_auth_method="client_secret_post",
        )

    def authorized(session: OAuth2Session) -> str:
        url, _ = session.create_authorization_url(authorize_url)
        sent = set(parse_qs(urlparse(url).query))
        assert sent == SPEC_FIELDS, sent
        return sign_in(base, url, email, password, redirect_uri)

    def refused(call) -> str:
        try:
            call()
        except OAuthError as error:
            return error.error
        raise SystemExit("the token endpoint answered tokens it should have refused")

    # 1. The spec's flow: a code without PKCE, exchanged with the client secret alone.
    session = client(client_secret)
    token = session.fetch_token(token_url, authorization_response=authorized(session))
    assert token["token_type"].lower() == "bearer", token
    jwks = requests.get(urljoin(base, "/.well-known/jwks.json")).json()
    claims = jwt.decode(token["access_token"], JsonWebKey.import_key_set(jwks))
    claims.validate()
    assert claims["client_id"] == client_id, dict(claims)

    # 2. Another code without PKCE, then a verifier for it: refused, so that a request stripped
    # of its challenge cannot pass as one made without PKCE. A wrong secret is refused too.
    # Neither uses the code up: the right request exchanges it afterwards.
    session = client(client_secret)
    callback = authorized(session)
    downgraded = refused(
        lambda: session.fetch_token(
            token_url, authorization_response=callback, code_verifier=generate_token(48)
        )
    )
    wrong = client("ghcs_wrong")
    wrong_secret = refused(lambda: wrong.fetch_token(token_url, authorization_response=callback))
    later = session.fetch_token(token_url, authorization_response=callback)

    print(
        json.dumps(
            {
                "scope": token["scope"],
                "client_id": claims["client_id"],
                "sub": claims["sub"],
                "refresh_token": "refresh_token" in token,
                "verifier_for_a_code_without_challenge": downgraded,
                "wrong_secret": wrong_secret,
                "exchanged_after_the_refusals": "access_token" in later,
            }
        )
    )


if __name__ == "__main__":
    main()
