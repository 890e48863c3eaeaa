"""Self-check of idp.py: starts it, asks it for responses of every kind, checks their signatures
with the xmlsec1 command line and their shape with lxml, runs an SP-initiated sign-in through
GET /sso with pysaml2's own SP client (which must then accept the response), and checks that
closing the IdP's stdin ends it.

    python3 check_idp.py

Prints one line per check; exits non-zero if any failed.
"""

import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from urllib.parse import urlencode

warnings.filterwarnings("ignore", module=r"saml2\.")

from lxml import etree  # noqa: E402
from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT  # noqa: E402
from saml2.client import Saml2Client  # noqa: E402
from saml2.config import SPConfig  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NS = {
    "samlp": "urn:oasis:names:tc:SAML:2.0:protocol",
    "saml": "urn:oasis:names:tc:SAML:2.0:assertion",
    "ds": "http://www.w3.org/2000/09/xmldsig#",
}
EXC_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
ENVELOPED = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
RSA_SHA1 = "http://www.w3.org/2000/09/xmldsig#rsa-sha1"
SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
SHA1 = "http://www.w3.org/2000/09/xmldsig#sha1"

SP_ENTITY_ID = "http://127.0.0.1:9/sp"
SP_ACS = "http://127.0.0.1:9/acs"

failures = []


def check(name: str, condition: bool, detail: str = "") -> None:
    print(f"{'ok  ' if condition else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not condition:
        failures.append(name)


# --- talking to the IdP -----------------------------------------------------------------------


def http(url: str, body=None):
    """(status, content type, body text) of a GET, or of a POST of body as JSON."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read().decode()


def crafted(idp: dict, **spec) -> dict:
    body = {"acs_url": SP_ACS, "audience": SP_ENTITY_ID, "email": "ada@example.com", "in_response_to": "id-req-1"}
    body.update(spec)
    status, _, text = http(idp["url"] + "/response", body)
    if status != 200:
        raise SystemExit(f"POST /response {spec} answered {status}:\n{text}")
    result = json.loads(text)
    assert base64.b64decode(result["saml_response"]).decode() == result["xml"]
    return result


# --- xmlsec1 and lxml -------------------------------------------------------------------------


def xmlsec_verify(xml: str, cert_file: str, node_xpath: str = None):
    """(verified, xmlsec1's first line of output). Only the given certificate's key is used, never the one in
    the document's KeyInfo (that is what --enabled-key-data raw-x509-cert is for)."""
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as out:
        out.write(xml)
    command = [
        "xmlsec1", "--verify",
        "--enabled-reference-uris", "empty,same-doc",
        "--enabled-key-data", "raw-x509-cert",
        "--pubkey-cert-pem", cert_file,
        "--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:assertion:Assertion",
        "--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:protocol:Response",
    ]  # fmt: skip
    if node_xpath:
        command += ["--node-xpath", node_xpath]
    try:
        run = subprocess.run(command + [out.name], capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(out.name)
    lines = (run.stdout + run.stderr).strip().splitlines() or ["(no output)"]
    return run.returncode == 0, lines[0][-110:]  # "OK", or the first complaint


def tree(xml: str):
    return etree.fromstring(xml.encode(), etree.XMLParser(resolve_entities=False, no_network=True))


def signature_shape(element, algorithm: str) -> str:
    """'' when element's signature is where and what SAML wants, else what is wrong."""
    children = list(element)
    if len(children) < 2 or children[0].tag != "{%s}Issuer" % NS["saml"]:
        return "the first child is not the Issuer"
    signature = children[1]
    if signature.tag != "{%s}Signature" % NS["ds"]:
        return "no ds:Signature right after the Issuer"
    method = RSA_SHA1 if algorithm == "sha1" else RSA_SHA256
    digest = SHA1 if algorithm == "sha1" else SHA256
    want = {
        "ds:SignedInfo/ds:CanonicalizationMethod/@Algorithm": [EXC_C14N],
        "ds:SignedInfo/ds:SignatureMethod/@Algorithm": [method],
        "ds:SignedInfo/ds:Reference/@URI": ["#" + element.get("ID")],
        "ds:SignedInfo/ds:Reference/ds:Transforms/ds:Transform/@Algorithm": [ENVELOPED, EXC_C14N],
        "ds:SignedInfo/ds:Reference/ds:DigestMethod/@Algorithm": [digest],
    }
    for path, expected in want.items():
        got = signature.xpath(path, namespaces=NS)
        if got != expected:
            return f"{path} is {got}, not {expected}"
    return ""


# --- the checks -------------------------------------------------------------------------------


def check_signing(idp: dict, main_cert: str, other_cert: str) -> None:
    assertion_xpath = "//*[local-name()='Response']/*[local-name()='Assertion']"
    for label, spec in [
        ("default (assertion signed, sha256)", {}),
        ("sign=response", {"sign": "response"}),
        ("sign=both", {"sign": "both"}),
        ("algorithm=sha1", {"algorithm": "sha1"}),
    ]:
        result = crafted(idp, **spec)
        root = tree(result["xml"])
        assertion = root.find("saml:Assertion", NS)
        sign = spec.get("sign", "assertion")
        algorithm = spec.get("algorithm", "sha256")
        problems = []
        if assertion.get("ID") != result["assertion_id"]:
            problems.append("assertion_id is not the Assertion's ID")
        if sign in ("assertion", "both"):
            problems.append(signature_shape(assertion, algorithm))
        elif assertion.find("ds:Signature", NS) is not None:
            problems.append("the Assertion is signed")
        if sign in ("response", "both"):
            problems.append(signature_shape(root, algorithm))
        elif root.find("ds:Signature", NS) is not None:
            problems.append("the Response is signed")
        problems = [p for p in problems if p]
        check(f"{label}: shape", not problems, "; ".join(problems))
        ok, out = xmlsec_verify(result["xml"], main_cert)
        check(f"{label}: xmlsec1 verifies the first signature with main", ok, out)
        if sign == "both":
            ok, out = xmlsec_verify(result["xml"], main_cert, assertion_xpath)
            check(f"{label}: xmlsec1 verifies the Assertion's signature too", ok, out)

    result = crafted(idp, key="other")
    ok, out = xmlsec_verify(result["xml"], main_cert)
    check("key=other: xmlsec1 refuses it with main", not ok, out)
    ok, out = xmlsec_verify(result["xml"], other_cert)
    check("key=other: xmlsec1 verifies it with other", ok, out)

    result = crafted(idp, sign="none")
    check("sign=none: no signature at all", "Signature" not in result["xml"])


def check_fields(idp: dict) -> None:
    result = crafted(idp, name="Ada Lovelace")
    root = tree(result["xml"])
    a = root.find("saml:Assertion", NS)
    values = {
        "Response/@InResponseTo": root.get("InResponseTo"),
        "Response/@Destination": root.get("Destination"),
        "Issuers": {i.text for i in root.iter("{%s}Issuer" % NS["saml"])},
        "NameID": a.findtext("saml:Subject/saml:NameID", namespaces=NS),
        "NameID/@Format": a.find("saml:Subject/saml:NameID", NS).get("Format"),
        "SubjectConfirmation/@Method": a.find("saml:Subject/saml:SubjectConfirmation", NS).get("Method"),
        "Recipient": a.find(".//saml:SubjectConfirmationData", NS).get("Recipient"),
        "SCD/@InResponseTo": a.find(".//saml:SubjectConfirmationData", NS).get("InResponseTo"),
        "Audience": a.findtext(".//saml:Audience", namespaces=NS),
        "attributes": {
            x.get("Name"): x.findtext("saml:AttributeValue", namespaces=NS)
            for x in a.iter("{%s}Attribute" % NS["saml"])
        },
    }
    want = {
        "Response/@InResponseTo": "id-req-1",
        "Response/@Destination": SP_ACS,
        "Issuers": {idp["entity_id"]},
        "NameID": "ada@example.com",
        "NameID/@Format": "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
        "SubjectConfirmation/@Method": "urn:oasis:names:tc:SAML:2.0:cm:bearer",
        "Recipient": SP_ACS,
        "SCD/@InResponseTo": "id-req-1",
        "Audience": SP_ENTITY_ID,
        "attributes": {"email": "ada@example.com", "name": "Ada Lovelace"},
    }
    wrong = {k: v for k, v in values.items() if v != want[k]}
    check("default fields", not wrong, json.dumps(wrong, default=sorted))

    result = crafted(
        idp,
        in_response_to=None,
        issuer="http://evil.example/idp",
        destination="http://elsewhere/acs",
        recipient=None,
        audience="http://other-sp",
        issue_instant_offset=-3600,
        not_before_offset=600,
        not_on_or_after_offset=-30,
    )
    root = tree(result["xml"])
    a = root.find("saml:Assertion", NS)
    stamp = lambda offset: time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + offset))  # noqa: E731
    got = [
        "InResponseTo" not in result["xml"],
        {i.text for i in root.iter("{%s}Issuer" % NS["saml"])} == {"http://evil.example/idp"},
        root.get("Destination") == "http://elsewhere/acs",
        a.find(".//saml:SubjectConfirmationData", NS).get("Recipient") is None,
        a.findtext(".//saml:Audience", namespaces=NS) == "http://other-sp",
        a.get("IssueInstant").startswith(stamp(-3600)),
        a.find("saml:Conditions", NS).get("NotBefore").startswith(stamp(600)),
        a.find("saml:Conditions", NS).get("NotOnOrAfter").startswith(stamp(-30)),
        a.find(".//saml:SubjectConfirmationData", NS).get("NotOnOrAfter").startswith(stamp(-30)),
    ]
    check("overrides (IdP-initiated, issuer, destination, no recipient, audience, times)", all(got), str(got))


def check_attacks(idp: dict, main_cert: str) -> None:
    def assertions(root):
        return root.findall("saml:Assertion", NS)

    def nameid(assertion):
        return "".join(assertion.find("saml:Subject/saml:NameID", NS).itertext())

    for attack, verifies in [
        ("xsw_before", True),
        ("xsw_after", True),
        ("xsw_extensions", True),
        ("xsw_object", False),
        ("duplicate_id", False),
        ("comment_nameid", True),
        ("doctype", True),
    ]:
        result = crafted(idp, attack=attack, evil_email="mallory@example.com" if attack != "comment_nameid" else None)
        xml, aid = result["xml"], result["assertion_id"]
        ok, out = xmlsec_verify(xml, main_cert)
        check(
            f"attack={attack}: xmlsec1 {'verifies' if verifies else 'refuses'} it",
            ok == verifies,
            out,
        )
        root = tree(xml)
        top = assertions(root)
        if attack in ("xsw_before", "xsw_after"):
            evil, signed = (top[0], top[1]) if attack == "xsw_before" else (top[1], top[0])
            shape = (
                len(top) == 2
                and evil.get("ID") != aid
                and evil.find("ds:Signature", NS) is None
                and nameid(evil) == "mallory@example.com"
                and signed.get("ID") == aid
                and signed.find("ds:Signature", NS) is not None
            )
        elif attack == "duplicate_id":
            shape = (
                len(top) == 2
                and top[0].get("ID") == top[1].get("ID") == aid
                and top[0].find("ds:Signature", NS) is None
                and nameid(top[0]) == "mallory@example.com"
                and top[1].find("ds:Signature", NS) is not None
            )
        elif attack == "xsw_extensions":
            hidden = root.findall("samlp:Extensions/saml:Assertion", NS)
            shape = (
                [child.tag.split("}")[1] for child in root] == ["Issuer", "Extensions", "Status", "Assertion"]
                and len(top) == 1
                and top[0].get("ID") != aid
                and nameid(top[0]) == "mallory@example.com"
                and top[0].find("ds:Signature", NS) is None
                and len(hidden) == 1
                and hidden[0].get("ID") == aid
                and hidden[0].find("ds:Signature", NS) is not None
            )
        elif attack == "xsw_object":
            inner = root.findall("saml:Assertion/ds:Signature/ds:Object/saml:Assertion", NS)
            shape = (
                len(top) == 1
                and top[0].get("ID") != aid
                and nameid(top[0]) == "mallory@example.com"
                and top[0].find("ds:Signature/ds:SignedInfo/ds:Reference", NS).get("URI") == "#" + aid
                and len(inner) == 1
                and inner[0].get("ID") == aid
                and inner[0].find("ds:Signature", NS) is None
                and nameid(inner[0]) == "ada@example.com"
            )
        elif attack == "comment_nameid":
            element = top[0].find("saml:Subject/saml:NameID", NS)
            shape = (
                "<!---->" in xml
                and element.text == "admin@example.com"
                and nameid(top[0]) == "admin@example.com.evil.com"
                and "admin@example.com<!---->.evil.com" in xml
            )
        elif attack == "doctype":
            shape = xml.startswith("<!DOCTYPE") and "<!ENTITY" in xml
        check(f"attack={attack}: shape", shape)


def check_sso(idp: dict) -> None:
    status, _, metadata = http(idp["entity_id"])
    check("GET /metadata", status == 200 and idp["entity_id"] in metadata)
    config = SPConfig().load(
        {
            "entityid": SP_ENTITY_ID,
            "service": {
                "sp": {
                    "endpoints": {"assertion_consumer_service": [(SP_ACS, BINDING_HTTP_POST)]},
                    "authn_requests_signed": False,
                    "want_response_signed": False,
                    "want_assertions_signed": True,
                    "allow_unsolicited": False,
                }
            },
            "metadata": {"inline": [metadata]},
            "allow_unknown_attributes": True,  # keep "email" and "name" as they are
            "xmlsec_binary": "/usr/bin/xmlsec1",
        }
    )
    client = Saml2Client(config)
    request_id, info = client.prepare_for_authenticate(
        entityid=idp["entity_id"], relay_state="state-123", binding=BINDING_HTTP_REDIRECT
    )
    location = dict(info["headers"])["Location"]
    check("the SP's AuthnRequest goes to sso_url", location.startswith(idp["sso_url"] + "?"), location[:60])

    status, content_type, page = http(location)
    check(
        "GET /sso without email: the sign-in form",
        status == 200
        and "Test IdP sign-in" in page
        and 'id="email"' in page
        and 'name="email"' in page
        and 'name="SAMLRequest"' in page
        and 'name="RelayState" value="state-123"' in page
        and "Sign in" in page,
        content_type,
    )

    status, _, text = http(location + "&" + urlencode({"format": "json", "email": "ada@example.com"}))
    answer = json.loads(text) if status == 200 else {}
    check(
        "GET /sso format=json: request_id, acs_url, audience, relay_state",
        (answer.get("request_id"), answer.get("acs_url"), answer.get("audience"), answer.get("relay_state"))
        == (request_id, SP_ACS, SP_ENTITY_ID, "state-123"),
        f"{status} {text[:200] if status != 200 else ''}",
    )
    if answer.get("saml_response"):
        # pysaml2's SP must accept what pysaml2's IdP said (signature, times, audience, ids).
        try:
            parsed = client.parse_authn_request_response(
                answer["saml_response"], BINDING_HTTP_POST, outstanding={request_id: "/"}
            )
            identity = parsed.get_identity()
            subject = parsed.get_subject().text
            check(
                "pysaml2's SP accepts the response",
                subject == "ada@example.com" and identity == {"email": ["ada@example.com"]},
                f"NameID {subject}, attributes {identity}",
            )
        except Exception as error:  # noqa: BLE001
            check("pysaml2's SP accepts the response", False, f"{type(error).__name__}: {error}")

    status, _, page = http(location + "&" + urlencode({"email": "ada@example.com"}))
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', page))
    check(
        "GET /sso format=html with email: the auto-posting form",
        status == 200
        and f'method="post" action="{SP_ACS}"' in page
        and "SAMLResponse" in fields
        and fields.get("RelayState") == "state-123"
        and "Continue to the application" in page
        and "<script>" in page,
    )

    status, _, text = http(idp["sso_url"] + "?" + urlencode({"SAMLRequest": "bm90IGEgcmVxdWVzdA==", "format": "json"}))
    check("GET /sso with a broken SAMLRequest: 400", status == 400, text.strip()[:100])

    # A well-formed request for some other IdP (its Destination is not our sso_url).
    _, request = client.create_authn_request("http://127.0.0.1:9/not-the-idp", binding=BINDING_HTTP_POST)
    info = client.apply_binding(BINDING_HTTP_REDIRECT, str(request), idp["sso_url"], relay_state="x")
    status, _, text = http(dict(info["headers"])["Location"] + "&format=json&email=ada@example.com")
    check("GET /sso with a request for another Destination: 400", status == 400, text.strip()[:100])


def main() -> None:
    child = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "idp.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    started = time.monotonic()
    idp = json.loads(child.stdout.readline())
    print(f"idp started in {time.monotonic() - started:.1f}s at {idp['url']}", flush=True)
    check(
        "the JSON line",
        set(idp) == {"url", "entity_id", "sso_url", "certificate", "other_certificate"}
        and idp["entity_id"] == idp["url"] + "/metadata"
        and idp["sso_url"] == idp["url"] + "/sso"
        and idp["certificate"].startswith("-----BEGIN CERTIFICATE-----")
        and idp["certificate"] != idp["other_certificate"],
    )
    with tempfile.TemporaryDirectory() as workdir:
        main_cert, other_cert = os.path.join(workdir, "main.pem"), os.path.join(workdir, "other.pem")
        with open(main_cert, "w") as out:
            out.write(idp["certificate"])
        with open(other_cert, "w") as out:
            out.write(idp["other_certificate"])
        try:
            check_signing(idp, main_cert, other_cert)
            check_fields(idp)
            check_attacks(idp, main_cert)
            check_sso(idp)
        finally:
            child.stdin.close()  # EOF on the IdP's stdin: it must exit
            try:
                code = child.wait(timeout=10)
                check("closing stdin ends the IdP", code == 0, f"exit status {code}")
            except subprocess.TimeoutExpired:
                child.kill()
                check("closing stdin ends the IdP", False, "still running after 10s")
    print(f"{len(failures)} failed" if failures else "all checks passed", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
