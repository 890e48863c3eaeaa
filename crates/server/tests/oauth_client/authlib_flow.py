"""The OAuth 2.0 authorization-code flow with PKCE against a running Gatehouse, driven by
authlib (a client library written by others), with requests standing in for the browser.

    python3 authlib_flow.py BASE_URL CLIENT_ID CLIENT_SECRET REDIRECT_URI EMAIL PASSWORD

Prints one JSON object of what it saw; exits non-zero on the first thing that is wrong.
"""

import json
import sys
from urllib.parse import urljoin

import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from hosted_login import sign_in


def main() -> None:
    base, client_id, client_secret, redirect_uri, email, password = sys.argv[1:7]
    token_url = urljoin(base, "/oauth/token")
    client = OAuth2Session(
        client_id,
        client_secret,
        scope="read:user read:resources",
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_basic",
    )
    code_verifier = generate_token(64)
    authorization_url, state = client.create_authorization_url(
        urljoin(base, "/oauth/authorize"), code_verifier=code_verifier
    )

    # The browser: to the login page, sign in, back to the authorization, then to the client.
    callback = sign_in(base, authorization_url, email, password, redirect_uri)

    # The client: authlib checks the state, sends the verifier, and parses the answer.
    token = client.fetch_token(
        token_url, authorization_response=callback, code_verifier=code_verifier
    )
    assert token["token_type"].lower() == "bearer", token
    assert token["scope"] == "read:user read:resources", token

    # The access token verifies against the published key set.
    jwks = requests.get(urljoin(base, "/.well-known/jwks.json")).json()
    claims = jwt.decode(token["access_token"], JsonWebKey.import_key_set(jwks))
    claims.validate()
    assert claims["client_id"] == client_id, dict(claims)
    assert claims["scope"] == "read:user read:resources", dict(claims)

    # It carries no API scope: it reads nothing of the user's account (only /oauth/userinfo,
    # with openid, which this client did not ask for).
    me = requests.get(
        urljoin(base, "/api/v1/users/me"),
        headers={"Authorization": f"Bearer {token['access_token']}"},
    )
    assert me.status_code == 403, me.text

    # And authlib refreshes it.
    refreshed = client.refresh_token(token_url, refresh_token=token["refresh_token"])
    refreshed_claims = jwt.decode(refreshed["access_token"], JsonWebKey.import_key_set(jwks))
    refreshed_claims.validate()

    print(
        json.dumps(
            {
                "state_checked": state is not None,
                "scope": token["scope"],
                "client_id": claims["client_id"],
                "sub": claims["sub"],
                "refreshed": refreshed_claims["sid"] == claims["sid"],
            }
        )
    )


if __name__ == "__main__":
    main()
