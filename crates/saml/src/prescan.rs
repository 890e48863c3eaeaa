//! What is checked before any XML library that resolves anything sees the response: its size,
//! its encoding, and one streaming pass of quick-xml (which expands nothing) over the document.

use base64::Engine as _;
use gatehouse_domain::ports::SamlRejection;
use quick_xml::events::attributes::Attribute;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::{Namespace, ResolveResult};
use quick_xml::{NsReader, XmlVersion};

/// The longest `SAMLResponse` read, in bytes of base64 text: 512 KiB.
pub const MAX_RESPONSE_BYTES: usize = 512 * 1024;

/// The deepest element nesting read: 32 levels (a SAML response needs about 8).
pub const MAX_DEPTH: usize = 32;

/// The most elements read: 4,096. A response with a thousand attribute values (a user in a
/// thousand groups) holds about 2,100; past the bound, the verified document's processing costs
/// seconds of CPU per response (a 370 KB response of 18,000 elements took about 5 s), which a
/// sender of padded responses would make every other sign-in wait for.
pub const MAX_ELEMENTS: usize = 4096;

const DSIG: &[u8] = b"http://www.w3.org/2000/09/xmldsig#";
const PROTOCOL: &[u8] = b"urn:oasis:names:tc:SAML:2.0:protocol";
const SUCCESS: &str = "urn:oasis:names:tc:SAML:2.0:status:Success";

/// The `SignatureMethod`s accepted: RSA and ECDSA over SHA-256, SHA-384 and SHA-512.
pub(crate) const SIGNATURE_METHODS: [&str; 6] = [
    "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
    "http://www.w3.org/2001/04/xmldsig-more#rsa-sha384",
    "http://www.w3.org/2001/04/xmldsig-more#rsa-sha512",
    "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256",
    "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384",
    "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512",
];

/// The `DigestMethod`s accepted: SHA-256, SHA-384 and SHA-512.
pub(crate) const DIGEST_METHODS: [&str; 3] = [
    "http://www.w3.org/2001/04/xmlenc#sha256",
    "http://www.w3.org/2001/04/xmldsig-more#sha384",
    "http://www.w3.org/2001/04/xmlenc#sha512",
];

/// The `SAMLResponse` field as XML text: at most [`MAX_RESPONSE_BYTES`] of base64 (line breaks
/// and spaces, which some identity providers wrap it with, are ignored), decoding to UTF-8
/// (a byte order mark is dropped).
pub(crate) fn decode(saml_response: &str) -> Result<String, SamlRejection> {
    if saml_response.len() > MAX_RESPONSE_BYTES {
        return Err(SamlRejection::TooLarge(MAX_RESPONSE_BYTES));
    }
    let compact: Vec<u8> = saml_response
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|_| malformed("the response is not base64"))?;
    let text = String::from_utf8(bytes).map_err(|_| malformed("the response is not UTF-8"))?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    })
}

/// One streaming pass over the document, before libxml2 parses it:
///
/// - a document type declaration (and with it any entity) or a processing instruction other
///   than the XML declaration is [`SamlRejection::Forbidden`];
/// - elements nested deeper than [`MAX_DEPTH`] are [`SamlRejection::TooDeep`], and more than
///   [`MAX_ELEMENTS`] of them [`SamlRejection::TooManyElements`];
/// - anything not well-formed is [`SamlRejection::Malformed`]: mismatched or unclosed tags,
///   duplicate attributes, a reference to an undefined entity, a character XML forbids, text or
///   a second element outside the root, an XML declaration that is not first, is not of
///   version 1.0 or names another encoding than UTF-8 (libxml2, which samael runs in recovery mode, must never have to guess);
/// - no `ds:Signature` anywhere is [`SamlRejection::Unsigned`];
/// - a `ds:SignatureMethod` or `ds:DigestMethod` outside [`SIGNATURE_METHODS`] and
///   [`DIGEST_METHODS`] is [`SamlRejection::WeakAlgorithm`];
/// - a root `samlp:Response` whose `Destination` is present and is not `acs_url`, or whose
///   top-level `samlp:StatusCode` is not `Success`, is [`SamlRejection::Invalid`] (SAML core
///   3.2.2: a recipient discards the former). samael checks both only when the response itself
///   is signed (it drops an unsigned envelope around a signed assertion); this refuses them on
///   an unsigned envelope too. Nothing is *read* from the envelope: it can only refuse.
///
/// Comments are allowed: samael refuses one that splits a text node of the signed content (the
/// NameID trick, `admin@example.com<!---->.evil.com`; see the crate documentation).
pub(crate) fn scan(xml: &str, acs_url: &str) -> Result<(), SamlRejection> {
    if let Some(c) = xml.chars().find(|&c| !is_xml_char(c)) {
        return Err(malformed(format!(
            "the response holds the character U+{:04X}, which XML forbids",
            u32::from(c)
        )));
    }

    let mut reader = NsReader::from_str(xml);
    {
        let config = reader.config_mut();
        config.check_end_names = true;
        config.check_comments = true;
        config.allow_unmatched_ends = false;
        config.allow_dangling_amp = false;
        config.expand_empty_elements = false;
        config.trim_text(false);
    }

    let mut depth = 0usize;
    let mut elements = 0usize;
    let mut root_seen = false;
    let mut first_event = true;
    let mut signed = false;
    let mut weak = false;
    let mut wrong_destination = false;
    let mut root_is_response = false;
    let mut in_status = false;
    let mut failed_status = false;

    loop {
        let (namespace, event) = reader
            .read_resolved_event()
            .map_err(|error| malformed(format!("the response is not well-formed XML: {error}")))?;
        let was_first = std::mem::replace(&mut first_event, false);
        match event {
            Event::Start(ref element) | Event::Empty(ref element) => {
                if depth == 0 {
                    if root_seen {
                        return Err(malformed("the response has more than one root element"));
                    }
                    root_seen = true;
                    root_is_response =
                        is(&namespace, PROTOCOL) && element.local_name().as_ref() == b"Response";
                    if root_is_response
                        && attribute(element, b"Destination")?
                            .is_some_and(|destination| destination != acs_url)
                    {
                        wrong_destination = true;
                    }
                }
                if root_is_response && is(&namespace, PROTOCOL) {
                    match (depth, element.local_name().as_ref()) {
                        (1, b"Status") => in_status = matches!(event, Event::Start(_)),
                        (2, b"StatusCode") if in_status => {
                            failed_status |=
                                attribute(element, b"Value")?.as_deref() != Some(SUCCESS);
                        }
                        _ => {}
                    }
                }
                if depth + 1 > MAX_DEPTH {
                    return Err(SamlRejection::TooDeep(MAX_DEPTH));
                }
                elements += 1;
                if elements > MAX_ELEMENTS {
                    return Err(SamlRejection::TooManyElements(MAX_ELEMENTS));
                }
                check_attributes(element)?;
                if is(&namespace, DSIG) {
                    match element.local_name().as_ref() {
                        b"Signature" => signed = true,
                        b"SignatureMethod" => {
                            weak |= !attribute(element, b"Algorithm")?
                                .is_some_and(|a| SIGNATURE_METHODS.contains(&a.as_str()));
                        }
                        b"DigestMethod" => {
                            weak |= !attribute(element, b"Algorithm")?
                                .is_some_and(|a| DIGEST_METHODS.contains(&a.as_str()));
                        }
                        _ => {}
                    }
                }
                if matches!(event, Event::Start(_)) {
                    depth += 1;
                }
            }
            Event::End(_) => {
                if depth == 2 {
                    in_status = false;
                }
                depth = depth.saturating_sub(1);
            }
            Event::Text(text) => {
                if depth == 0 && !text.iter().all(u8::is_ascii_whitespace) {
                    return Err(malformed("the response has text outside its root element"));
                }
            }
            Event::CData(_) => {
                if depth == 0 {
                    return Err(malformed("the response has text outside its root element"));
                }
            }
            Event::GeneralRef(reference) => {
                if depth == 0 {
                    return Err(malformed("the response has text outside its root element"));
                }
                check_reference(&reference)?;
            }
            Event::Comment(_) => {}
            Event::Decl(declaration) => {
                if !was_first {
                    return Err(malformed("the XML declaration is not at the start"));
                }
                if declaration.version().ok().as_deref() != Some(b"1.0".as_slice()) {
                    return Err(malformed("the response is not XML 1.0"));
                }
                if let Some(encoding) = declaration.encoding() {
                    let encoding = encoding.map_err(|error| {
                        malformed(format!("the XML declaration is malformed: {error}"))
                    })?;
                    if !encoding.eq_ignore_ascii_case(b"utf-8") {
                        return Err(malformed(
                            "the response declares an encoding other than UTF-8",
                        ));
                    }
                }
            }
            Event::PI(_) | Event::DocType(_) => return Err(SamlRejection::Forbidden),
            Event::Eof => break,
        }
    }
    if !root_seen {
        return Err(malformed("the response has no root element"));
    }
    if depth != 0 {
        return Err(malformed("the response ends inside an element"));
    }
    if !signed {
        return Err(SamlRejection::Unsigned);
    }
    if weak {
        return Err(SamlRejection::WeakAlgorithm);
    }
    if wrong_destination {
        return Err(SamlRejection::Invalid(
            "the response's Destination is not this service's assertion consumer".to_owned(),
        ));
    }
    if failed_status {
        return Err(SamlRejection::Invalid(
            "the identity provider's status is not Success".to_owned(),
        ));
    }
    Ok(())
}

fn malformed(why: impl Into<String>) -> SamlRejection {
    SamlRejection::Malformed(why.into())
}

fn is(namespace: &ResolveResult<'_>, expected: &[u8]) -> bool {
    matches!(namespace, ResolveResult::Bound(Namespace(bound)) if *bound == expected)
}

/// Every attribute is well-formed, unique, holds no `<` and refers to no undefined entity.
fn check_attributes(element: &BytesStart<'_>) -> Result<(), SamlRejection> {
    for attribute in element.attributes().with_checks(true) {
        let attribute =
            attribute.map_err(|error| malformed(format!("an attribute is malformed: {error}")))?;
        value_of(&attribute)?;
    }
    Ok(())
}

/// The unprefixed attribute `name` of the element, unescaped.
fn attribute(element: &BytesStart<'_>, name: &[u8]) -> Result<Option<String>, SamlRejection> {
    for attribute in element.attributes().with_checks(true) {
        let attribute =
            attribute.map_err(|error| malformed(format!("an attribute is malformed: {error}")))?;
        if attribute.key.as_ref() == name {
            return value_of(&attribute).map(Some);
        }
    }
    Ok(None)
}

fn value_of(attribute: &Attribute<'_>) -> Result<String, SamlRejection> {
    if attribute.value.contains(&b'<') {
        return Err(malformed("an attribute value holds '<'"));
    }
    let value = attribute
        .normalized_value(XmlVersion::Implicit1_0)
        .map_err(|error| malformed(format!("an attribute value is malformed: {error}")))?;
    if let Some(c) = value.chars().find(|&c| !is_xml_char(c)) {
        return Err(malformed(format!(
            "an attribute refers to the character U+{:04X}, which XML forbids",
            u32::from(c)
        )));
    }
    Ok(value.into_owned())
}

/// A character reference to a character XML allows, or one of the five predefined entities.
fn check_reference(reference: &quick_xml::events::BytesRef<'_>) -> Result<(), SamlRejection> {
    if reference.is_char_ref() {
        return match reference.resolve_char_ref() {
            Ok(Some(c)) if is_xml_char(c) => Ok(()),
            _ => Err(malformed(
                "a character reference is not a character XML allows",
            )),
        };
    }
    match reference.as_ref() {
        b"lt" | b"gt" | b"amp" | b"apos" | b"quot" => Ok(()),
        _ => Err(malformed("the response refers to an undefined entity")),
    }
}

/// XML 1.0's `Char` production.
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACS: &str = "https://sp.example.com/acs";

    fn signed(inner: &str) -> String {
        format!(
            r#"<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" Destination="{ACS}"><ds:Signature><ds:SignedInfo><ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/><ds:Reference><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/></ds:Reference></ds:SignedInfo></ds:Signature>{inner}</samlp:Response>"#
        )
    }

    fn scanned(xml: &str) -> Result<(), SamlRejection> {
        scan(xml, ACS)
    }

    #[test]
    fn a_plain_signed_document_passes() {
        scanned(&signed("<a>x &amp; &#233; <![CDATA[y]]><!-- c --></a>")).unwrap();
        scanned(&format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}\n",
            signed("")
        ))
        .unwrap();
    }

    #[test]
    fn decoding_bounds_the_size_and_ignores_line_breaks() {
        assert!(matches!(
            decode(&"A".repeat(MAX_RESPONSE_BYTES + 1)),
            Err(SamlRejection::TooLarge(MAX_RESPONSE_BYTES))
        ));
        assert_eq!(decode("PGEv\r\nPg==\n").unwrap(), "<a/>");
        assert_eq!(decode("77u/PGEvPg==").unwrap(), "<a/>"); // with a BOM
        assert!(matches!(
            decode("not base64!"),
            Err(SamlRejection::Malformed(_))
        ));
        assert!(matches!(decode("/w=="), Err(SamlRejection::Malformed(_)))); // 0xFF
    }

    #[test]
    fn doctypes_and_processing_instructions_are_forbidden() {
        let doctype = format!("<!DOCTYPE r [<!ENTITY e \"x\">]>{}", signed(""));
        assert!(matches!(scanned(&doctype), Err(SamlRejection::Forbidden)));
        let pi = signed("<?evil stuff?>");
        assert!(matches!(scanned(&pi), Err(SamlRejection::Forbidden)));
        let stylesheet = format!("<?xml-stylesheet href=\"x\"?>{}", signed(""));
        assert!(matches!(
            scanned(&stylesheet),
            Err(SamlRejection::Forbidden)
        ));
    }

    #[test]
    fn the_number_of_elements_is_bounded() {
        // The envelope of `signed` holds six elements.
        scanned(&signed(&"<a/>".repeat(MAX_ELEMENTS - 6))).unwrap();
        assert!(matches!(
            scanned(&signed(&"<a>x</a>".repeat(MAX_ELEMENTS - 5))),
            Err(SamlRejection::TooManyElements(MAX_ELEMENTS))
        ));
    }

    #[test]
    fn depth_is_bounded() {
        let nest = |levels: usize| {
            signed(&format!(
                "{}{}",
                "<a>".repeat(levels),
                "</a>".repeat(levels)
            ))
        };
        // The root is level 1.
        scanned(&nest(MAX_DEPTH - 1)).unwrap();
        assert!(matches!(
            scanned(&nest(MAX_DEPTH)),
            Err(SamlRejection::TooDeep(MAX_DEPTH))
        ));
        let empty_too_deep = signed(&format!(
            "{}<a/>{}",
            "<a>".repeat(MAX_DEPTH - 1),
            "</a>".repeat(MAX_DEPTH - 1)
        ));
        assert!(matches!(
            scanned(&empty_too_deep),
            Err(SamlRejection::TooDeep(MAX_DEPTH))
        ));
    }

    #[test]
    fn what_is_not_well_formed_is_malformed() {
        for bad in [
            String::new(),
            "   ".to_owned(),
            signed("<a></b>"),
            signed("<a>"),
            signed("<a x='1' x='2'/>"),
            signed("<a x='<'/>"),
            signed("&undefined;"),
            signed("<a x='&undefined;'/>"),
            signed("&#1;"),
            signed("\u{1}"),
            format!("{}<second/>", signed("")),
            format!("{}text", signed("")),
            format!("<!-- c -->{}<?xml version=\"1.0\"?>", signed("")),
            format!(
                "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>{}",
                signed("")
            ),
            signed("<a>-- <!-- a -- b --></a>"),
            format!("<?xml version=\"1.1\"?>{}", signed("")),
        ] {
            assert!(
                matches!(scanned(&bad), Err(SamlRejection::Malformed(_))),
                "{bad:?}: {:?}",
                scanned(&bad)
            );
        }
    }

    #[test]
    fn signatures_and_their_algorithms() {
        let unsigned = r#"<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol"><Signature/></samlp:Response>"#;
        assert!(matches!(scanned(unsigned), Err(SamlRejection::Unsigned)));
        // ds:Signature in another namespace is no signature.
        let other_ns = r#"<r xmlns:ds="urn:evil"><ds:Signature/></r>"#;
        assert!(matches!(scanned(other_ns), Err(SamlRejection::Unsigned)));

        let sha1 = signed("")
            .replace("rsa-sha256", "rsa-sha1")
            .replace("xmldsig-more#rsa-sha1", "xmldsig#rsa-sha1");
        assert!(matches!(scanned(&sha1), Err(SamlRejection::WeakAlgorithm)));
        let sha1_digest = signed("").replace(
            "http://www.w3.org/2001/04/xmlenc#sha256",
            "http://www.w3.org/2000/09/xmldsig#sha1",
        );
        assert!(matches!(
            scanned(&sha1_digest),
            Err(SamlRejection::WeakAlgorithm)
        ));
        let missing =
            signed("").replace(r#"Algorithm="http://www.w3.org/2001/04/xmlenc#sha256""#, "");
        assert!(matches!(
            scanned(&missing),
            Err(SamlRejection::WeakAlgorithm)
        ));
        let ecdsa = signed("").replace("rsa-sha256", "ecdsa-sha512");
        scanned(&ecdsa).unwrap();
    }

    #[test]
    fn a_failed_status_on_the_envelope_is_refused() {
        let status = |code: &str| {
            signed(&format!(
                r#"<samlp:Status><samlp:StatusCode Value="{code}"><samlp:StatusCode Value="urn:x"/></samlp:StatusCode></samlp:Status>"#
            ))
        };
        scanned(&status(SUCCESS)).unwrap();
        let requester = status("urn:oasis:names:tc:SAML:2.0:status:Requester");
        assert!(matches!(
            scanned(&requester),
            Err(SamlRejection::Invalid(_))
        ));
        // A StatusCode elsewhere is not the response's status.
        let elsewhere =
            signed(r#"<a><samlp:Status><samlp:StatusCode Value="urn:x"/></samlp:Status></a>"#);
        scanned(&elsewhere).unwrap();
        let no_value = signed("<samlp:Status><samlp:StatusCode/></samlp:Status>");
        assert!(matches!(scanned(&no_value), Err(SamlRejection::Invalid(_))));
    }

    #[test]
    fn a_wrong_destination_on_the_envelope_is_refused() {
        let elsewhere = signed("").replace(ACS, "https://evil.example.com/acs");
        assert!(matches!(
            scanned(&elsewhere),
            Err(SamlRejection::Invalid(_))
        ));
        let absent = signed("").replace(&format!(" Destination=\"{ACS}\""), "");
        scanned(&absent).unwrap();
    }
}
