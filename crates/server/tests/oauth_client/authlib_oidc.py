"""An OpenID Connect relying party against a running Gatehouse, written with authlib's OpenID
Connect client (a library written by others): it is given nothing but the issuer, its client id
and secret, reads the rest from the discovery document, signs a user in through the hosted login
page (hosted_login.py standing in for the browser), and validates the ID token itself: signature
against the published keys, issuer, audience, expiry, nonce and at_hash.

    python3 authlib_oidc.py ISSUER CLIENT_ID CLIENT_SECRET REDIRECT_URI EMAIL PASSWORD OTHER_CLIENT_ID

Prints one JSON object of what it saw; exits non-zero on the first thing that is wrong.
"""

import json
import sys
from urllib.parse import parse_qs, urlparse

from authlib.integrations.base_client import BaseApp, OAuth2Mixin, OpenIDMixin
from authlib.integrations.requests_client import OAuth2Session
from hosted_login import sign_in
from joserfc.errors import ClaimError


class RelyingParty(OAuth2Mixin, OpenIDMixin, BaseApp):
    """authlib's OpenID Connect client, outside a web framework."""

    client_cls = OAuth2Session

    def __init__(self, issuer: str, client_id: str, client_secret: str) -> None:
        super().__init__(
            framework=None,
            client_id=client_id,
            client_secret=client_secret,
            server_metadata_url=f"{issuer}/.well-known/openid-configuration",
            client_kwargs={
                "scope": "openid email profile",
                "code_challenge_method": "S256",
                "token_endpoint_auth_method": "client_secret_basic",
            },
        )

    def _on_update_token(self, token, refresh_token=None, access_token=None):
        pass

    def verify(self, token: dict, nonce: str):
        """authlib's ID token validation, the audience required to be this client."""
        metadata = self.load_server_metadata()
        options = {
            "iss": {"essential": True, "values": [metadata["issuer"]]},
            "aud": {"essential": True, "values": [self.client_id]},
        }
        return self.parse_id_token(token, nonce=nonce, claims_options=options)


def refused(parse) -> str:
    """The claim authlib refused; fails when it accepts the token."""
    try:
        parse()
    except ClaimError as error:
        return error.claim
    raise SystemExit("authlib accepted an ID token it should have refused")


def main() -> None:
    issuer, client_id, client_secret, redirect_uri, email, password, other_client_id = sys.argv[1:8]
    party = RelyingParty(issuer, client_id, client_secret)
    metadata = party.load_server_metadata()
    assert metadata["issuer"] == issuer, metadata
    assert "S256" in metadata["code_challenge_methods_supported"], metadata
    assert "RS256" in metadata["id_token_signing_alg_values_supported"], metadata

    # The client sends the browser to the authorization endpoint, with a nonce and PKCE.
    request = party.create_authorization_url(redirect_uri)
    assert request["nonce"] and request["code_verifier"], request

    # The browser: to the login page, sign in, back to the authorization, then to the client.
    callback = sign_in(issuer, request["url"], email, password, redirect_uri)
    query = parse_qs(urlparse(callback).query)
    assert query["state"] == [request["state"]], "the state comes back unchanged"

    # The client exchanges the code and validates the ID token: signature, iss, aud, exp, iat,
    # nonce, at_hash (authlib's CodeIDToken).
    token = party.fetch_access_token(
        redirect_uri=redirect_uri, code=query["code"][0], code_verifier=request["code_verifier"]
    )
    assert "id_token" in token, token
    user = party.verify(token, request["nonce"])
    assert user["aud"] == client_id, dict(user)
    assert user["iss"] == issuer, dict(user)

    # What authlib refuses: another nonce, an ID token meant for another client, an access
    # token the at_hash is not of.
    wrong_nonce = refused(lambda: party.verify(token, "not-the-nonce"))
    someone_else = RelyingParty(issuer, other_client_id, "unused")
    wrong_audience = refused(lambda: someone_else.verify(token, request["nonce"]))
    swapped = dict(token, access_token=token["access_token"] + "x")
    wrong_at_hash = refused(lambda: party.verify(swapped, request["nonce"]))

    # The userinfo endpoint says what the ID token says.
    info = party.userinfo(token=token)
    for claim in ("sub", "email", "email_verified", "name"):
        assert info[claim] == user[claim], (claim, dict(info), dict(user))

    print(
        json.dumps(
            {
                "sub": user["sub"],
                "aud": user["aud"],
                "email": user["email"],
                "email_verified": user["email_verified"],
                "name": user["name"],
                "amr": user["amr"],
                "auth_time": user["auth_time"],
                "iat": user["iat"],
                "userinfo": dict(info),
                "scope": token["scope"],
                "refused": {
                    "nonce": wrong_nonce,
                    "audience": wrong_audience,
                    "at_hash": wrong_at_hash,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
