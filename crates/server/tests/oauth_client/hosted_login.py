"""The browser's part of the authorization-code flow, for the OAuth client tests: requests
standing in for a browser that follows the authorization URL to Gatehouse's hosted login page,
signs in there, and comes back to the client's redirect URI."""

import html
import re
from urllib.parse import urljoin

import requests


def hidden(page: str, name: str) -> str:
    match = re.search(r'name="%s" value="([^"]*)"' % re.escape(name), page)
    if not match:
        raise SystemExit(f"the login page has no {name} field")
    return html.unescape(match.group(1))


def sign_in(base: str, authorization_url: str, email: str, password: str, redirect_uri: str) -> str:
    """Signs `email` in on the hosted page the authorization URL leads to; returns the URL the
    browser is sent back to (the redirect URI with the code and the state)."""
    browser = requests.Session()
    response = browser.get(authorization_url, allow_redirects=False)
    assert response.status_code == 302, response.status_code
    login_url = urljoin(base, response.headers["Location"])
    page = browser.get(login_url)
    assert page.status_code == 200, page.status_code
    response = browser.post(
        urljoin(base, "/login"),
        data={
            "email": email,
            "password": password,
            "csrf_token": hidden(page.text, "csrf_token"),
            "return_to": hidden(page.text, "return_to"),
        },
        allow_redirects=False,
    )
    assert response.status_code == 303, (response.status_code, response.text[:200])
    response = browser.get(urljoin(base, response.headers["Location"]), allow_redirects=False)
    assert response.status_code == 302, response.status_code
    callback = response.headers["Location"]
    assert callback.startswith(redirect_uri), callback
    return callback
