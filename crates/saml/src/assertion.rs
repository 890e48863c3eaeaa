//! The domain's [`SamlAssertion`] from the assertion samael verified, and the checks of it
//! samael leaves out.

use gatehouse_domain::model::{SamlAssertion, SamlTrust};
use gatehouse_domain::ports::SamlRejection;
use samael::attribute::Attribute;
use samael::schema::{Assertion, SubjectConfirmation};
use time::OffsetDateTime;

const BEARER: &str = "urn:oasis:names:tc:SAML:2.0:cm:bearer";

/// The longest full name taken, in characters.
pub const MAX_FULL_NAME_CHARS: usize = 200;

/// Attributes holding the whole name, most specific first: the plain names, then the display
/// name's OID (eduPerson/inetOrgPerson) and Microsoft's claim.
const FULL_NAME: [&str; 5] = [
    "name",
    "displayName",
    "cn",
    "urn:oid:2.16.840.1.113730.3.1.241",
    "http://schemas.microsoft.com/identity/claims/displayname",
];

/// Given name and surname, joined when both are sent and no [`FULL_NAME`] attribute is.
const GIVEN_NAME: [&str; 4] = [
    "givenName",
    "firstName",
    "urn:oid:2.5.4.42",
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/givenname",
];
const SURNAME: [&str; 5] = [
    "sn",
    "surname",
    "lastName",
    "urn:oid:2.5.4.4",
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/surname",
];

/// The last resort: the common name's OID, and the WS-Federation `name` claim (Azure AD and
/// AD FS put the user principal name there, an address rather than a name, hence after the
/// given name and surname).
const FALLBACK_NAME: [&str; 2] = [
    "urn:oid:2.5.4.3",
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name",
];

/// Reads the assertion samael returned (every value comes from the signed element), after
/// the checks samael leaves out:
///
/// - an `AudienceRestriction` is required, and every one must name `sp_entity_id` (samael
///   checks audiences only when there are conditions, and is satisfied by any one restriction);
/// - the `NameID` must be present and not empty;
/// - the bearer confirmations addressed to `acs_url` must agree on `InResponseTo`.
///
/// `valid_until` is the later of the conditions' and those confirmations' `NotOnOrAfter`, as
/// the port says. samael accepts the assertion until [`SAML_CLOCK_SKEW`] after it: its id
/// must be remembered until `valid_until + SAML_CLOCK_SKEW`.
///
/// [`SAML_CLOCK_SKEW`]: gatehouse_domain::model::SAML_CLOCK_SKEW
pub(crate) fn read(
    assertion: &Assertion,
    trust: &SamlTrust,
) -> Result<SamlAssertion, SamlRejection> {
    let restrictions = assertion
        .conditions
        .as_ref()
        .and_then(|conditions| conditions.audience_restrictions.as_deref())
        .unwrap_or_default();
    if restrictions.is_empty()
        || !restrictions
            .iter()
            .all(|restriction| restriction.audience.contains(&trust.sp_entity_id))
    {
        return Err(invalid(
            "the assertion is not restricted to this service provider's audience",
        ));
    }

    let subject = assertion
        .subject
        .as_ref()
        .ok_or_else(|| invalid("the assertion has no subject"))?;
    let name_id = subject
        .name_id
        .as_ref()
        .map(|name_id| name_id.value.clone())
        .filter(|value| !value.trim().is_empty())
        .ok_or_else(|| invalid("the assertion's subject has no NameID"))?;

    let ours: Vec<&SubjectConfirmation> = subject
        .subject_confirmations
        .iter()
        .flatten()
        .filter(|confirmation| confirmation.method.as_deref() == Some(BEARER))
        .filter(|confirmation| {
            confirmation
                .subject_confirmation_data
                .as_ref()
                .is_some_and(|data| data.recipient.as_deref() == Some(trust.acs_url.as_str()))
        })
        .collect();
    let mut answers = ours.iter().filter_map(|confirmation| {
        confirmation
            .subject_confirmation_data
            .as_ref()
            .map(|data| data.in_response_to.clone())
    });
    let in_response_to = answers
        .next()
        .ok_or_else(|| invalid("the assertion has no bearer confirmation for this service"))?;
    if answers.any(|other| other != in_response_to) {
        return Err(invalid(
            "the assertion's bearer confirmations disagree on InResponseTo",
        ));
    }

    let latest = ours
        .iter()
        .filter_map(|confirmation| {
            confirmation
                .subject_confirmation_data
                .as_ref()
                .and_then(|data| data.not_on_or_after)
        })
        .chain(
            assertion
                .conditions
                .as_ref()
                .and_then(|conditions| conditions.not_on_or_after),
        )
        .max()
        .ok_or_else(|| invalid("the assertion has no NotOnOrAfter"))?;
    let valid_until = to_time(latest)?;

    Ok(SamlAssertion {
        id: assertion.id.clone(),
        name_id,
        in_response_to,
        valid_until,
        full_name: full_name(assertion),
    })
}

fn invalid(why: &str) -> SamlRejection {
    SamlRejection::Invalid(why.to_owned())
}

fn to_time(at: chrono::DateTime<chrono::Utc>) -> Result<OffsetDateTime, SamlRejection> {
    let seconds = OffsetDateTime::from_unix_timestamp(at.timestamp())
        .map_err(|_| invalid("a time of the assertion is out of range"))?;
    seconds
        .replace_nanosecond(at.timestamp_subsec_nanos().min(999_999_999))
        .map_err(|_| invalid("a time of the assertion is out of range"))
}

/// The user's name: a [`FULL_NAME`] attribute, else given name and surname when both are sent,
/// else a [`FALLBACK_NAME`] attribute; trimmed, at most [`MAX_FULL_NAME_CHARS`] characters.
fn full_name(assertion: &Assertion) -> Option<String> {
    let attributes: Vec<&Attribute> = assertion
        .attribute_statements
        .iter()
        .flatten()
        .flat_map(|statement| statement.attributes.iter())
        .collect();
    let first_of = |names: &[&str]| {
        names.iter().find_map(|name| {
            attributes
                .iter()
                .filter(|attribute| attribute.name.as_deref() == Some(*name))
                .flat_map(|attribute| attribute.values.iter())
                .filter_map(|value| value.value.as_deref())
                .map(str::trim)
                .find(|value| !value.is_empty())
        })
    };
    let name = first_of(&FULL_NAME)
        .map(str::to_owned)
        .or_else(|| match (first_of(&GIVEN_NAME), first_of(&SURNAME)) {
            (Some(given), Some(surname)) => Some(format!("{given} {surname}")),
            _ => None,
        })
        .or_else(|| first_of(&FALLBACK_NAME).map(str::to_owned))?;
    let bounded: String = name.chars().take(MAX_FULL_NAME_CHARS).collect();
    let trimmed = bounded.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assertion(attributes: &str) -> Assertion {
        format!(
            r#"<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="_a" IssueInstant="2030-01-01T00:00:00Z" Version="2.0">
<saml:Issuer>https://idp.example.com</saml:Issuer>
<saml:AttributeStatement>{attributes}</saml:AttributeStatement>
</saml:Assertion>"#
        )
        .parse()
        .unwrap()
    }

    fn attribute(name: &str, value: &str) -> String {
        format!(
            r#"<saml:Attribute Name="{name}"><saml:AttributeValue>{value}</saml:AttributeValue></saml:Attribute>"#
        )
    }

    #[test]
    fn the_name_comes_from_the_first_known_attribute() {
        let a = assertion(&(attribute("email", "a@b.c") + &attribute("displayName", "  Ada L.  ")));
        assert_eq!(full_name(&a).as_deref(), Some("Ada L."));
        let a = assertion(&(attribute("cn", "Common") + &attribute("name", "Plain")));
        assert_eq!(full_name(&a).as_deref(), Some("Plain"));
        let a = assertion(&attribute("urn:oid:2.16.840.1.113730.3.1.241", "Oid Name"));
        assert_eq!(full_name(&a).as_deref(), Some("Oid Name"));
        let a = assertion(&attribute("name", "   "));
        assert_eq!(full_name(&a), None);
    }

    #[test]
    fn given_name_and_surname_when_both_are_sent() {
        let a = assertion(&(attribute("givenName", "Ada") + &attribute("sn", "Lovelace")));
        assert_eq!(full_name(&a).as_deref(), Some("Ada Lovelace"));
        let a = assertion(&attribute("givenName", "Ada"));
        assert_eq!(full_name(&a), None);
        let a = assertion(
            &(attribute(
                "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name",
                "ada@example.com",
            ) + &attribute(
                "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/givenname",
                "Ada",
            ) + &attribute(
                "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/surname",
                "Lovelace",
            )),
        );
        assert_eq!(full_name(&a).as_deref(), Some("Ada Lovelace"));
        let a = assertion(&attribute(
            "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name",
            "Ada Lovelace",
        ));
        assert_eq!(full_name(&a).as_deref(), Some("Ada Lovelace"));
    }

    #[test]
    fn the_name_is_bounded() {
        let long = format!("{} tail", "é".repeat(MAX_FULL_NAME_CHARS - 1));
        let a = assertion(&attribute("name", &long));
        let name = full_name(&a).unwrap();
        assert_eq!(name.chars().count(), MAX_FULL_NAME_CHARS - 1);
        assert!(!name.ends_with(' '));
    }
}
