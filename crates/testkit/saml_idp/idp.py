"""A SAML 2.0 identity provider for Gatehouse's service-provider tests, built on pysaml2
(an IdP written by others) with xmlsec1 doing the XML signatures.

    python3 idp.py

Starts an HTTP server on 127.0.0.1 (a free port), prints ONE line of JSON to stdout:

    {"url": "http://127.0.0.1:PORT", "entity_id": "http://127.0.0.1:PORT/metadata",
     "sso_url": "http://127.0.0.1:PORT/sso", "certificate": "<PEM of main>",
     "other_certificate": "<PEM of other>"}

and serves until its standard input reaches EOF (drop the child's stdin to end it). Logs go to
stderr only. "main" is the IdP's real signing key; "other" is an attacker's key.

Endpoints:

  GET /sso       HTTP-Redirect binding: SAMLRequest, RelayState, optional email, optional name,
                 optional format (html, the default, or json). pysaml2 parses the AuthnRequest;
                 one it refuses is a 400 with the reason. Without email (html): a sign-in form.
                 With email: a signed response for that user, as an auto-submitting HTTP-POST
                 form to the request's AssertionConsumerServiceURL (html) or as JSON
                 {request_id, acs_url, audience, relay_state, saml_response, xml, assertion_id}.
  POST /response JSON in, JSON out: any crafted response (see `build_response` for the fields),
                 answered {saml_response, xml, assertion_id}. A bad field is a 400; anything
                 else that fails is a 500 with the traceback.
  GET /metadata  the IdP's metadata (made by pysaml2), which is also its entity id.

The SP needs no configuration here: a minimal SP EntityDescriptor is made on the fly from the
AuthnRequest's Issuer and AssertionConsumerServiceURL (or from the JSON fields) and put into
pysaml2's metadata store before each response is built.
"""

import base64
import copy
import datetime
import html
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit
from xml.etree import ElementTree

# pysaml2 imports a cipher mode that cryptography has deprecated; the warning is noise here.
warnings.filterwarnings("ignore", module=r"saml2\.")

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402
from lxml import etree  # noqa: E402
from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT, samlp  # noqa: E402
from saml2 import saml  # noqa: E402
from saml2.attribute_converter import AttributeConverter  # noqa: E402
from saml2.config import IdPConfig  # noqa: E402
from saml2.mdstore import InMemoryMetaData  # noqa: E402
from saml2.metadata import create_metadata_string  # noqa: E402
from saml2.s_utils import sid  # noqa: E402
from saml2.saml import NAME_FORMAT_BASIC, NAMEID_FORMAT_EMAILADDRESS  # noqa: E402
from saml2.server import Server  # noqa: E402
from saml2.sigver import pre_signature_part, read_cert_from_file  # noqa: E402
from saml2.time_util import instant  # noqa: E402
from saml2.xmldsig import DIGEST_SHA1, DIGEST_SHA256, SIG_RSA_SHA1, SIG_RSA_SHA256  # noqa: E402

log = logging.getLogger("saml_idp")

XMLSEC1 = shutil.which("xmlsec1") or "/usr/bin/xmlsec1"

NS = {
    "samlp": "urn:oasis:names:tc:SAML:2.0:protocol",
    "saml": "urn:oasis:names:tc:SAML:2.0:assertion",
    "ds": "http://www.w3.org/2000/09/xmldsig#",
}
# pysaml2 serializes through ElementTree, which otherwise names namespaces ns0, ns1, ...
# (and would reuse ns0 for the separately made signature template). Conventional prefixes.
for _prefix, _uri in NS.items():
    ElementTree.register_namespace(_prefix, _uri)
# The names xmlsec1 is told carry an ID attribute (pysaml2's class_name of each).
ASSERTION_NODE = f"{NS['saml']}:Assertion"
RESPONSE_NODE = f"{NS['samlp']}:Response"

ALGORITHMS = {"sha256": (SIG_RSA_SHA256, DIGEST_SHA256), "sha1": (SIG_RSA_SHA1, DIGEST_SHA1)}
SIGN_CHOICES = ("assertion", "response", "both", "none")
ATTACKS = (
    None,
    "xsw_before",
    "xsw_after",
    "xsw_extensions",
    "xsw_object",
    "duplicate_id",
    "comment_nameid",
    "doctype",
)
DEFAULT_EVIL_EMAIL = "attacker@example.com"
DEFAULT_COMMENT_NAMEID = "admin@example.com.evil.com"

# Attributes go out under their plain names (Name="email", Name="name", basic name format)
# rather than pysaml2's default URI/OID names, so an SP finds them by the obvious name.
ATTRIBUTE_MAP = {
    "identifier": NAME_FORMAT_BASIC,
    "fro": {"email": "email", "name": "name"},
    "to": {"email": "email", "name": "name"},
}

# A parser that never fetches or expands anything: the IdP only ever parses its own output.
PARSER = etree.XMLParser(resolve_entities=False, no_network=True, remove_blank_text=False)


class BadRequest(Exception):
    """A field the caller got wrong: answered 400 with the message."""


# ---------------------------------------------------------------------------------------------
# Keys


class Key:
    """An RSA-2048 key with its self-signed certificate, on disk for pysaml2 and xmlsec1."""

    def __init__(self, directory: str, name: str):
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Gatehouse test IdP ({name})")])
        now = datetime.datetime.now(datetime.timezone.utc)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(private.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .sign(private, hashes.SHA256())
        )
        self.name = name
        self.pem = certificate.public_bytes(serialization.Encoding.PEM).decode()
        self.key_file = os.path.join(directory, f"{name}.key.pem")
        self.cert_file = os.path.join(directory, f"{name}.cert.pem")
        with open(self.key_file, "wb") as out:
            out.write(
                private.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.TraditionalOpenSSL,
                    serialization.NoEncryption(),
                )
            )
        with open(self.cert_file, "w") as out:
            out.write(self.pem)
        # The bare base64 body, as pysaml2 puts it into <ds:X509Certificate>.
        self.cert_b64 = read_cert_from_file(self.cert_file, "pem")


# ---------------------------------------------------------------------------------------------
# Small XML helpers (lxml)


def q(prefix: str, local: str) -> str:
    return "{%s}%s" % (NS[prefix], local)


def parse(xml: str) -> etree._Element:
    return etree.fromstring(xml.encode(), PARSER)


def serialize(root: etree._Element) -> str:
    return etree.tostring(root, encoding="unicode")


def only(root: etree._Element, path: str) -> etree._Element:
    found = root.findall(path, NS)
    if len(found) != 1:
        raise RuntimeError(f"expected one {path}, found {len(found)}")
    return found[0]


def by_id(root: etree._Element, ident: str) -> etree._Element:
    found = [el for el in root.iter() if el.get("ID") == ident]
    if len(found) != 1:
        raise RuntimeError(f"expected one element with ID {ident}, found {len(found)}")
    return found[0]


def set_or_remove(element: etree._Element, attribute: str, value) -> None:
    if value is None:
        element.attrib.pop(attribute, None)
    else:
        element.set(attribute, value)


def offset(spec: dict, field: str, default: float) -> float:
    """A time offset field of a crafted response (absent or null: the default)."""
    value = spec.get(field)
    if value is None:
        return float(default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRequest(f"{field} must be a number of seconds")
    return float(value)


def at(offset_seconds: float) -> str:
    """A SAML timestamp (UTC, seconds) offset_seconds from now."""
    return instant(time_stamp=time.time() + offset_seconds)


# ---------------------------------------------------------------------------------------------
# The IdP


class IdentityProvider:
    def __init__(self, url: str, workdir: str):
        self.url = url
        self.entity_id = f"{url}/metadata"
        self.sso_url = f"{url}/sso"
        self.keys = {name: Key(workdir, name) for name in ("main", "other")}
        config = IdPConfig().load(
            {
                "entityid": self.entity_id,
                "service": {
                    "idp": {
                        "name": "Gatehouse test IdP",
                        "endpoints": {"single_sign_on_service": [(self.sso_url, BINDING_HTTP_REDIRECT)]},
                        "name_id_format": [NAMEID_FORMAT_EMAILADDRESS],
                        # Unsigned AuthnRequests are fine (a signature, if any, is not checked).
                        "want_authn_requests_signed": False,
                        "policy": {"default": {"lifetime": {"minutes": 5}, "name_form": NAME_FORMAT_BASIC}},
                    }
                },
                "key_file": self.keys["main"].key_file,
                "cert_file": self.keys["main"].cert_file,
                "xmlsec_binary": XMLSEC1,
                "metadata": {},  # an empty store; SPs are added on the fly (ensure_sp)
            }
        )
        converter = AttributeConverter(NAME_FORMAT_BASIC)
        converter.from_dict(ATTRIBUTE_MAP)
        config.attribute_converters = [converter]
        self.server = Server(config=config)
        self.metadata_xml = create_metadata_string(None, config=config)
        if isinstance(self.metadata_xml, bytes):
            self.metadata_xml = self.metadata_xml.decode()
        # pysaml2's Server (its metadata store above all) is not meant for concurrent use.
        self.lock = threading.Lock()

    # -- SP metadata -------------------------------------------------------------------------

    def ensure_sp(self, entity_id: str, acs_url: str) -> None:
        """Put a minimal SP EntityDescriptor for entity_id/acs_url into pysaml2's metadata store,
        replacing any earlier one for the same SP (keyed by entity id in the store's dict)."""
        descriptor = etree.Element(
            "{urn:oasis:names:tc:SAML:2.0:metadata}EntityDescriptor",
            nsmap={"md": "urn:oasis:names:tc:SAML:2.0:metadata"},
            entityID=entity_id,
        )
        sp = etree.SubElement(
            descriptor,
            "{urn:oasis:names:tc:SAML:2.0:metadata}SPSSODescriptor",
            protocolSupportEnumeration=NS["samlp"],
        )
        etree.SubElement(sp, "{urn:oasis:names:tc:SAML:2.0:metadata}NameIDFormat").text = NAMEID_FORMAT_EMAILADDRESS
        etree.SubElement(
            sp,
            "{urn:oasis:names:tc:SAML:2.0:metadata}AssertionConsumerService",
            Binding=BINDING_HTTP_POST,
            Location=acs_url,
            index="0",
        )
        store = InMemoryMetaData(self.server.config.attribute_converters, serialize(descriptor))
        store.load()
        if entity_id not in store:
            raise RuntimeError(f"pysaml2 did not accept the SP metadata made for {entity_id!r}")
        self.server.metadata.metadata[f"sp:{entity_id}"] = store

    # -- AuthnRequest ------------------------------------------------------------------------

    def parse_authn_request(self, saml_request: str, relay_state, sigalg=None, signature=None):
        """pysaml2's reading of an HTTP-Redirect AuthnRequest; BadRequest when it refuses it."""
        with self.lock:
            try:
                parsed = self.server.parse_authn_request(
                    saml_request, BINDING_HTTP_REDIRECT, relay_state=relay_state, sigalg=sigalg, signature=signature
                )
            except Exception as error:  # pysaml2 raises many kinds; all of them mean "refused"
                raise BadRequest(f"pysaml2 refused the AuthnRequest: {type(error).__name__}: {error}") from error
        if parsed is None or parsed.message is None:
            raise BadRequest("pysaml2 refused the AuthnRequest")
        request = parsed.message
        if request.issuer is None or not request.issuer.text:
            raise BadRequest("the AuthnRequest has no Issuer")
        if not request.assertion_consumer_service_url:
            raise BadRequest("the AuthnRequest has no AssertionConsumerServiceURL (this IdP needs one)")
        if request.protocol_binding and request.protocol_binding != BINDING_HTTP_POST:
            raise BadRequest(f"unsupported ProtocolBinding {request.protocol_binding} (only HTTP-POST)")
        return request

    # -- Responses ---------------------------------------------------------------------------

    def build_response(self, spec: dict) -> dict:
        """Build, sign and (optionally) tamper with a Response. Fields of spec (only acs_url,
        audience and email are required):

        acs_url, audience, email; in_response_to (string, or null/absent: IdP-initiated);
        sign: "assertion" (default) | "response" | "both" | "none";
        key: "main" (default) | "other"; algorithm: "sha256" (default) | "sha1";
        issuer (Response and Assertion Issuer, default the IdP's entity id);
        destination (Response Destination, default acs_url; null removes it);
        recipient (SubjectConfirmationData Recipient, default acs_url; null removes it);
        issue_instant_offset (0), not_before_offset (-60), not_on_or_after_offset (300):
            seconds from now; NotOnOrAfter applies to Conditions and SubjectConfirmationData;
        name: optional display-name attribute;
        assertion_id: the Assertion's ID (default pysaml2's random one), to replay one;
        attack: null | xsw_before | xsw_after | xsw_extensions | xsw_object | duplicate_id |
            comment_nameid | doctype; evil_email (default attacker@example.com);
            comment_after (comment_nameid only: the prefix of the NameID after which the
            comment goes; default the local part, "@" and the first two domain labels).

        Returns {"saml_response": base64, "xml": str, "assertion_id": the signed one's ID}.
        """
        spec = dict(spec)
        for field in ("acs_url", "audience", "email"):
            if not isinstance(spec.get(field), str) or not spec[field]:
                raise BadRequest(f"{field} is required (a non-empty string)")
        sign = spec.get("sign") or "assertion"
        if sign not in SIGN_CHOICES:
            raise BadRequest(f"sign must be one of {SIGN_CHOICES}")
        key_name = spec.get("key") or "main"
        if key_name not in self.keys:
            raise BadRequest("key must be main or other")
        algorithm = spec.get("algorithm") or "sha256"
        if algorithm not in ALGORITHMS:
            raise BadRequest("algorithm must be sha256 or sha1")
        attack = spec.get("attack")
        if attack not in ATTACKS:
            raise BadRequest(f"attack must be one of {ATTACKS}")
        in_response_to = spec.get("in_response_to")
        if in_response_to is not None and not isinstance(in_response_to, str):
            raise BadRequest("in_response_to must be a string or null")
        acs_url, audience = spec["acs_url"], spec["audience"]
        evil_email = spec.get("evil_email") or DEFAULT_EVIL_EMAIL

        # The user as the IdP signs it. For comment_nameid that is the longer, evil address.
        email = spec["email"]
        if attack == "comment_nameid":
            email = spec.get("evil_email") or DEFAULT_COMMENT_NAMEID
        identity = {"email": [email]}
        if spec.get("name"):
            identity["name"] = [spec["name"]]

        # 1. The unsigned Response, made by pysaml2.
        with self.lock:
            self.ensure_sp(audience, acs_url)
            response = self.server.create_authn_response(
                identity,
                in_response_to,
                acs_url,
                audience,
                name_id=saml.NameID(format=NAMEID_FORMAT_EMAILADDRESS, text=email),
                authn={"class_ref": saml.AUTHN_PASSWORD_PROTECTED, "authn_auth": self.entity_id},
                sign_response=False,
                sign_assertion=False,
            )
        if not isinstance(response, samlp.Response):
            raise RuntimeError(f"pysaml2 did not make a Response: {response!r}")
        if response.status.status_code.value != samlp.STATUS_SUCCESS:
            raise RuntimeError(f"pysaml2 made an error Response: {response}")

        # 2. Times and fields, with lxml.
        root = parse(str(response))
        assertion = only(root, "saml:Assertion")
        response_id, assertion_id = root.get("ID"), assertion.get("ID")
        if spec.get("assertion_id"):
            # A chosen id: the same assertion id under two requests is a replay.
            assertion_id = str(spec["assertion_id"])
            assertion.set("ID", assertion_id)
        issued = at(offset(spec, "issue_instant_offset", 0))
        not_before = at(offset(spec, "not_before_offset", -60))
        not_on_or_after = at(offset(spec, "not_on_or_after_offset", 300))
        issuer = spec.get("issuer") or self.entity_id
        root.set("IssueInstant", issued)
        assertion.set("IssueInstant", issued)
        for statement in assertion.findall("saml:AuthnStatement", NS):
            statement.set("AuthnInstant", issued)
        only(root, "saml:Issuer").text = issuer
        only(assertion, "saml:Issuer").text = issuer
        set_or_remove(root, "Destination", spec.get("destination", acs_url))
        confirmation = only(assertion, "saml:Subject/saml:SubjectConfirmation/saml:SubjectConfirmationData")
        set_or_remove(confirmation, "Recipient", spec.get("recipient", acs_url))
        confirmation.set("NotOnOrAfter", not_on_or_after)
        conditions = only(assertion, "saml:Conditions")
        conditions.set("NotBefore", not_before)
        conditions.set("NotOnOrAfter", not_on_or_after)
        only(conditions, "saml:AudienceRestriction/saml:Audience").text = audience
        xml = serialize(root)

        # 3. Signatures: the Assertion first, so that the Response's signature covers it.
        key = self.keys[key_name]
        if sign in ("assertion", "both"):
            xml = self.sign(xml, assertion_id, ASSERTION_NODE, key, algorithm, identifier=2)
        if sign in ("response", "both"):
            xml = self.sign(xml, response_id, RESPONSE_NODE, key, algorithm, identifier=1)

        # 4. The attack, on the signed document.
        xml = apply_attack(xml, attack, assertion_id, evil_email, spec.get("comment_after"))
        return {
            "saml_response": base64.b64encode(xml.encode()).decode(),
            "xml": xml,
            "assertion_id": assertion_id,
        }

    def sign(self, xml: str, ident: str, node_name: str, key: Key, algorithm: str, identifier: int) -> str:
        """Sign the element with ID=ident: pysaml2's signature template (exclusive C14N,
        enveloped-signature transform, Reference URI="#ident", the key's certificate in KeyInfo)
        goes right after the element's Issuer, then pysaml2's security context has xmlsec1 fill
        it in with the key."""
        sign_alg, digest_alg = ALGORITHMS[algorithm]
        template = pre_signature_part(
            ident, key.cert_b64, identifier=identifier, sign_alg=sign_alg, digest_alg=digest_alg
        )
        root = parse(xml)
        only(by_id(root, ident), "saml:Issuer").addnext(parse(str(template)))
        with self.lock:
            signed = self.server.sec.sign_statement(
                serialize(root), node_name, key_file=key.key_file, node_id=ident
            )
        return serialize(parse(signed))  # drops xmlsec1's XML declaration


# ---------------------------------------------------------------------------------------------
# Attacks (applied after signing; none of them re-signs anything)


def evil_twin(
    signed: etree._Element, evil_email: str, keep_id: bool = False, keep_signature: bool = False
) -> etree._Element:
    """A copy of the signed assertion about evil_email (NameID and email attribute), with a
    fresh ID unless keep_id, and without the (now wrong) signature unless keep_signature."""
    evil = copy.deepcopy(signed)
    if not keep_signature:
        for signature in evil.findall("ds:Signature", NS):
            evil.remove(signature)
    if not keep_id:
        evil.set("ID", sid())
    only(evil, "saml:Subject/saml:NameID").text = evil_email
    for value in evil.findall("saml:AttributeStatement/saml:Attribute[@Name='email']/saml:AttributeValue", NS):
        value.text = evil_email
    return evil


def apply_attack(xml: str, attack, assertion_id: str, evil_email: str, comment_after) -> str:
    if attack is None:
        return xml
    if attack == "doctype":
        # A DTD with an internal entity declaration (never referenced: the signed content is
        # untouched, so the signature still verifies); an SP must refuse any DTD outright.
        return (
            '<!DOCTYPE samlp:Response [\n'
            '  <!ENTITY gatehouse "an internal entity an SP must never expand">\n'
            "]>\n" + xml
        )

    root = parse(xml)
    signed = by_id(root, assertion_id)
    parent = signed.getparent()

    if attack == "xsw_before":  # XSW3: an unsigned evil assertion before the signed one
        signed.addprevious(evil_twin(signed, evil_email))
    elif attack == "xsw_after":  # the same, after the signed one
        signed.addnext(evil_twin(signed, evil_email))
    elif attack == "duplicate_id":  # an unsigned evil assertion with the signed one's ID, first
        signed.addprevious(evil_twin(signed, evil_email, keep_id=True))
    elif attack == "xsw_extensions":
        # XSW7-like: the signed assertion (its signature intact) hidden in the Response's
        # <samlp:Extensions>, which goes where the schema puts it (after Issuer and Signature);
        # an unsigned evil assertion takes the signed one's place.
        extensions = etree.Element(q("samlp", "Extensions"))
        anchor = None
        for child in root:
            if child.tag in (q("saml", "Issuer"), q("ds", "Signature")):
                anchor = child
        anchor.addnext(extensions)
        parent.replace(signed, evil_twin(signed, evil_email))
        extensions.append(signed)
    elif attack == "xsw_object":
        # XSW8 ("On Breaking SAML", Somorovsky et al., 2012; SAML Raider's XSW8): the evil
        # assertion (fresh ID, evil NameID) takes the original's place and keeps a copy of the
        # original's <ds:Signature>, whose Reference still says URI="#<original ID>". A
        # <ds:Object> appended to that copied Signature holds the original assertion with its
        # own signature removed, so the Reference resolves to it. A verifier that looks IDs up
        # document-wide and implements the enveloped transform as "drop the Signature child of
        # the referenced element" finds the digest and SignatureValue correct, then reads the
        # evil assertion. A correct one (xmlsec1) fails: the referenced assertion lies inside
        # the verifying Signature, which the enveloped transform removes whole.
        evil = evil_twin(signed, evil_email, keep_signature=True)
        original = copy.deepcopy(signed)
        for signature in original.findall("ds:Signature", NS):
            original.remove(signature)
        obj = etree.SubElement(only(evil, "ds:Signature"), q("ds", "Object"))
        obj.append(original)
        parent.replace(signed, evil)
    elif attack == "comment_nameid":
        # The IdP signed the whole (evil) address; a comment now splits the NameID's text (and
        # the email attribute's) after the part an SP might allow, e.g.
        # admin@example.com<!---->.evil.com. Exclusive C14N drops comments, so the signature
        # still verifies; an SP that reads only the first text node sees admin@example.com.
        targets = [only(signed, "saml:Subject/saml:NameID")]
        targets += signed.findall("saml:AttributeStatement/saml:Attribute[@Name='email']/saml:AttributeValue", NS)
        for element in targets:
            value = element.text or ""
            prefix = comment_after or default_comment_prefix(value)
            if not value.startswith(prefix) or prefix == value:
                raise BadRequest(f"comment_after {prefix!r} is not a proper prefix of {value!r}")
            element.text = prefix
            comment = etree.Comment("")
            comment.tail = value[len(prefix):]
            element.append(comment)
    return serialize(root)


def default_comment_prefix(value: str) -> str:
    """admin@example.com.evil.com -> admin@example.com (local part, "@", two domain labels);
    with fewer labels, just the first: bob@example.com -> bob@example."""
    local, _, domain = value.partition("@")
    labels = domain.split(".")
    keep = 2 if len(labels) > 2 else 1
    return f"{local}@{'.'.join(labels[:keep])}"


# ---------------------------------------------------------------------------------------------
# HTTP


SIGN_IN_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Test IdP sign-in</title></head>
<body>
<h1>Test IdP sign-in</h1>
<p>Signing in to {audience}</p>
<form method="get" action="/sso">
{hidden}
<label for="email">Email</label>
<input type="email" id="email" name="email" required autofocus>
<button type="submit">Sign in</button>
</form>
</body>
</html>
"""

POST_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Test IdP: back to the application</title></head>
<body>
<form id="saml-post" method="post" action="{acs_url}">
{hidden}
<button type="submit">Continue to the application</button>
</form>
<script>window.addEventListener("load", function () {{ document.getElementById("saml-post").submit(); }});</script>
</body>
</html>
"""


def hidden_fields(fields: dict) -> str:
    return "\n".join(
        f'<input type="hidden" name="{html.escape(name)}" value="{html.escape(value)}">'
        for name, value in fields.items()
        if value is not None
    )


class Handler(BaseHTTPRequestHandler):
    idp: IdentityProvider  # set on the class in main()
    server_version = "GatehouseTestIdP/1"

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        sys.stderr.write("idp: %s %s\n" % (self.address_string(), format % args))

    def reply(self, status: int, body, content_type: str) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def reply_json(self, status: int, value) -> None:
        self.reply(status, json.dumps(value), "application/json")

    def guarded(self, work) -> None:
        """Run work(); BadRequest is a 400 with its message, anything else a 500 with the
        traceback (a test tool: make the errors obvious)."""
        try:
            work()
        except BadRequest as error:
            log.warning("400: %s", error)
            self.reply(400, f"{error}\n", "text/plain; charset=utf-8")
        except Exception:
            text = traceback.format_exc()
            log.error("500:\n%s", text)
            self.reply(500, text, "text/plain; charset=utf-8")

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/sso":
            self.guarded(lambda: self.sso(parse_qs(url.query)))
        elif url.path == "/metadata":
            self.reply(200, self.idp.metadata_xml, "application/samlmetadata+xml")
        else:
            self.reply(404, "not found\n", "text/plain; charset=utf-8")

    def do_POST(self):
        if urlsplit(self.path).path == "/response":
            self.guarded(self.crafted_response)
        else:
            self.reply(404, "not found\n", "text/plain; charset=utf-8")

    def sso(self, query: dict) -> None:
        def one(name):
            values = query.get(name)
            return values[0] if values else None

        saml_request, relay_state = one("SAMLRequest"), one("RelayState")
        email, name, fmt = one("email"), one("name"), one("format") or "html"
        if fmt not in ("html", "json"):
            raise BadRequest("format must be html or json")
        if not saml_request:
            raise BadRequest("SAMLRequest is missing")
        request = self.idp.parse_authn_request(saml_request, relay_state, one("SigAlg"), one("Signature"))
        request_id = request.id
        acs_url = request.assertion_consumer_service_url
        audience = request.issuer.text

        if not email:
            if fmt == "json":
                # What the IdP read from the request, with no user (yet) to answer for.
                self.reply_json(
                    200,
                    {
                        "request_id": request_id,
                        "acs_url": acs_url,
                        "audience": audience,
                        "relay_state": relay_state,
                        "saml_response": None,
                        "xml": None,
                    },
                )
            else:
                hidden = hidden_fields({"SAMLRequest": saml_request, "RelayState": relay_state})
                page = SIGN_IN_PAGE.format(audience=html.escape(audience), hidden=hidden)
                self.reply(200, page, "text/html; charset=utf-8")
            return

        built = self.idp.build_response(
            {"acs_url": acs_url, "audience": audience, "email": email, "name": name, "in_response_to": request_id}
        )
        if fmt == "json":
            self.reply_json(
                200,
                {
                    "request_id": request_id,
                    "acs_url": acs_url,
                    "audience": audience,
                    "relay_state": relay_state,
                    "saml_response": built["saml_response"],
                    "xml": built["xml"],
                    "assertion_id": built["assertion_id"],
                },
            )
        else:
            hidden = hidden_fields({"SAMLResponse": built["saml_response"], "RelayState": relay_state})
            page = POST_PAGE.format(acs_url=html.escape(acs_url), hidden=hidden)
            self.reply(200, page, "text/html; charset=utf-8")

    def crafted_response(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            spec = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as error:
            raise BadRequest(f"the body is not JSON: {error}") from error
        if not isinstance(spec, dict):
            raise BadRequest("the body must be a JSON object")
        self.reply_json(200, self.idp.build_response(spec))


# ---------------------------------------------------------------------------------------------


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="idp: %(levelname)s %(name)s: %(message)s")
    # Only the one JSON line goes to the real stdout; anything else printed goes to stderr.
    stdout, sys.stdout = sys.stdout, sys.stderr

    workdir = tempfile.mkdtemp(prefix="gatehouse-saml-idp-")

    def finish(*_):
        shutil.rmtree(workdir, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, finish)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    url = "http://127.0.0.1:%d" % httpd.server_address[1]
    Handler.idp = idp = IdentityProvider(url, workdir)

    def watch_stdin():
        while os.read(0, 4096):
            pass
        log.info("stdin closed; exiting")
        finish()

    threading.Thread(target=watch_stdin, daemon=True).start()

    stdout.write(
        json.dumps(
            {
                "url": url,
                "entity_id": idp.entity_id,
                "sso_url": idp.sso_url,
                "certificate": idp.keys["main"].pem,
                "other_certificate": idp.keys["other"].pem,
            }
        )
        + "\n"
    )
    stdout.flush()
    try:
        httpd.serve_forever()
    finally:
        finish()


if __name__ == "__main__":
    main()
