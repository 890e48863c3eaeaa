//! `User` and `Group` resources: rendered from the domain's directory types, and read from
//! `POST` and `PUT` bodies (and from a patched resource, see [`crate::Patch`]).

use gatehouse_domain::model::{
    timestamp, DirectoryEmail, DirectoryGroup, DirectoryGroupId, DirectoryName, DirectoryText,
    DirectoryUser, DirectoryUserId, GroupAttributes, UserAttributes, MAX_DIRECTORY_EMAILS,
    MAX_GROUP_MEMBERS,
};
use serde_json::{json, Map, Value};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::attr::{self, Kind, Qualified};
use crate::{ScimError, GROUP_SCHEMA, USER_SCHEMA};

/// Renders resources and discovery documents under one base URL, such as
/// `https://id.example.com/scim/v2/<organization id>`: a resource's `meta.location` is the base
/// URL, its endpoint and its id (`.../Users/<id>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resources {
    base_url: String,
}

impl Resources {
    /// Resources under `base_url` (a trailing `/` is dropped).
    pub fn new(base_url: impl Into<String>) -> Self {
        let mut base_url = base_url.into();
        while base_url.ends_with('/') {
            base_url.pop();
        }
        Self { base_url }
    }

    /// The base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The base URL followed by `/` and `path` (`Users/<id>`, `Schemas/<urn>`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.base_url)
    }

    /// A user's URL (`meta.location`, and the `Location` header of a `201 Created`).
    pub fn user_location(&self, id: DirectoryUserId) -> String {
        self.url(&format!("Users/{id}"))
    }

    /// A group's URL (`meta.location`, and the `Location` header of a `201 Created`).
    pub fn group_location(&self, id: DirectoryGroupId) -> String {
        self.url(&format!("Groups/{id}"))
    }

    /// The user as a SCIM `User`: `schemas`, `id`, `externalId`, `userName`, `displayName`,
    /// `name` (`formatted`, `givenName`, `familyName`), `emails` (`value`, `type`, `primary`),
    /// `active` and `meta`. An attribute without a value is left out.
    pub fn user(&self, user: &DirectoryUser) -> Value {
        let mut resource = Map::new();
        resource.insert("schemas".into(), json!([USER_SCHEMA]));
        resource.insert("id".into(), user.id.to_string().into());
        resource.extend(user_document(&user.attributes));
        resource.insert(
            "meta".into(),
            meta(
                "User",
                self.user_location(user.id),
                user.created_at,
                user.updated_at,
            ),
        );
        Value::Object(resource)
    }

    /// The group as a SCIM `Group`: `schemas`, `id`, `externalId`, `displayName`, `members`
    /// (`value`, `$ref`, `type`, always `User`) and `meta`.
    pub fn group(&self, group: &DirectoryGroup) -> Value {
        let mut resource = Map::new();
        resource.insert("schemas".into(), json!([GROUP_SCHEMA]));
        resource.insert("id".into(), group.id.to_string().into());
        resource.extend(group_document(&group.attributes, Some(self)));
        resource.insert(
            "meta".into(),
            meta(
                "Group",
                self.group_location(group.id),
                group.created_at,
                group.updated_at,
            ),
        );
        Value::Object(resource)
    }
}

/// `meta`: the resource type, the timestamps (RFC 3339, UTC), the location and a weak version
/// that changes whenever the resource does (its `updated_at`, in nanoseconds).
fn meta(
    resource_type: &str,
    location: String,
    created: OffsetDateTime,
    modified: OffsetDateTime,
) -> Value {
    json!({
        "resourceType": resource_type,
        "created": timestamp::format(created),
        "lastModified": timestamp::format(modified),
        "location": location,
        "version": format!("W/\"{}\"", modified.unix_timestamp_nanos()),
    })
}

fn text(value: &DirectoryText) -> Value {
    Value::String(value.as_str().to_owned())
}

/// The attributes a user's resource carries beyond `schemas`, `id` and `meta`: what a `PATCH`
/// operates on.
pub(crate) fn user_document(user: &UserAttributes) -> Map<String, Value> {
    let mut document = Map::new();
    if let Some(external_id) = &user.external_id {
        document.insert("externalId".into(), text(external_id));
    }
    document.insert("userName".into(), text(&user.user_name));
    if let Some(display_name) = &user.display_name {
        document.insert("displayName".into(), text(display_name));
    }
    let mut name = Map::new();
    for (key, part) in [
        ("formatted", &user.name.formatted),
        ("givenName", &user.name.given_name),
        ("familyName", &user.name.family_name),
    ] {
        if let Some(part) = part {
            name.insert(key.into(), text(part));
        }
    }
    if !name.is_empty() {
        document.insert("name".into(), Value::Object(name));
    }
    if !user.emails.is_empty() {
        let emails = user
            .emails
            .iter()
            .map(|email| {
                let mut entry = Map::new();
                entry.insert("value".into(), text(&email.value));
                if let Some(kind) = &email.kind {
                    entry.insert("type".into(), text(kind));
                }
                entry.insert("primary".into(), email.primary.into());
                Value::Object(entry)
            })
            .collect();
        document.insert("emails".into(), Value::Array(emails));
    }
    document.insert("active".into(), user.active.into());
    document
}

/// The attributes a group's resource carries beyond `schemas`, `id` and `meta`; each member's
/// `$ref` and `type` where `resources` is given (a `PATCH` operates on the values alone).
pub(crate) fn group_document(
    group: &GroupAttributes,
    resources: Option<&Resources>,
) -> Map<String, Value> {
    let mut document = Map::new();
    if let Some(external_id) = &group.external_id {
        document.insert("externalId".into(), text(external_id));
    }
    document.insert("displayName".into(), text(&group.display_name));
    if !group.members.is_empty() {
        let members = group
            .members
            .iter()
            .map(|member| match resources {
                Some(resources) => json!({
                    "value": member.to_string(),
                    "$ref": resources.user_location(*member),
                    "type": "User",
                }),
                None => json!({ "value": member.to_string() }),
            })
            .collect();
        document.insert("members".into(), Value::Array(members));
    }
    document
}

/// A body's attributes by lowercase name: fully qualified names in the resource's own schema
/// lose their URN; any other URN (a schema extension) is left out.
fn attributes(body: &Value, kind: Kind) -> Result<Map<String, Value>, ScimError> {
    let Value::Object(object) = body else {
        return Err(ScimError::invalid_syntax(
            "the body must be a JSON object (a SCIM resource)",
        ));
    };
    let mut attributes = Map::new();
    for (key, value) in object {
        let name = match attr::qualified(key) {
            Qualified::Plain(name) => name,
            Qualified::Core(schema, name) if schema == kind.schema() && !name.is_empty() => name,
            Qualified::Core(..) | Qualified::Foreign => continue,
        };
        attributes.insert(name.to_ascii_lowercase(), value.clone());
    }
    Ok(attributes)
}

/// Whether the value counts as unassigned: missing, `null`, or (for an optional text) empty.
fn unassigned(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::String(text)) => text.trim().is_empty(),
        Some(_) => false,
    }
}

/// A required text: `what` names it in the error.
fn required_text(value: Option<&Value>, what: &str) -> Result<DirectoryText, ScimError> {
    match value {
        None | Some(Value::Null) => Err(ScimError::invalid_value(format!("{what} is required"))),
        Some(Value::String(raw)) => DirectoryText::parse(raw)
            .map_err(|error| ScimError::invalid_value(format!("{what} {error}"))),
        Some(_) => Err(ScimError::invalid_value(format!("{what} must be a string"))),
    }
}

/// An optional text: unassigned when missing, `null` or empty.
fn optional_text(value: Option<&Value>, what: &str) -> Result<Option<DirectoryText>, ScimError> {
    if unassigned(value) {
        return Ok(None);
    }
    required_text(value, what).map(Some)
}

fn boolean(value: Option<&Value>, what: &str, default: bool) -> Result<bool, ScimError> {
    match value {
        None | Some(Value::Null) => Ok(default),
        Some(value) => attr::boolean(value)
            .ok_or_else(|| ScimError::invalid_value(format!("{what} must be true or false"))),
    }
}

/// A multi-valued attribute's values: none when unassigned; each must be an object.
fn entries<'a>(
    value: Option<&'a Value>,
    what: &str,
) -> Result<Vec<&'a Map<String, Value>>, ScimError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(values)) => values
            .iter()
            .enumerate()
            .map(|(index, value)| {
                value.as_object().ok_or_else(|| {
                    ScimError::invalid_value(format!("{what}[{index}] must be an object"))
                })
            })
            .collect(),
        Some(_) => Err(ScimError::invalid_value(format!("{what} must be an array"))),
    }
}

/// The attributes of a `User` in a `POST` or `PUT` body (or a patched user).
///
/// `userName` is required; `active` is `true` unless given (as a boolean, or `"true"` /
/// `"false"` in any case). Attribute names are matched without case and may be fully qualified.
/// Attributes Gatehouse does not keep (`password`, `locale`, `roles`, ...), schema extensions and
/// read-only attributes (`id`, `meta`, `groups`) are ignored, and so is `schemas`. An optional
/// text that is `null` or empty is unassigned; an address without a value is dropped.
///
/// # Errors
/// `invalidSyntax` when the body is not an object; `invalidValue` naming the attribute when
/// `userName` is missing, a value has the wrong JSON type, a text breaks the directory's rules
/// ([`DirectoryText`]), there are more than [`MAX_DIRECTORY_EMAILS`] addresses, or more than one
/// is primary.
pub fn parse_user(body: &Value) -> Result<UserAttributes, ScimError> {
    let attributes = attributes(body, Kind::User)?;
    let user_name = required_text(attributes.get("username"), "userName")?;
    let external_id = optional_text(attributes.get("externalid"), "externalId")?;
    let display_name = optional_text(attributes.get("displayname"), "displayName")?;
    let name = match attributes.get("name") {
        None | Some(Value::Null) => DirectoryName::default(),
        Some(Value::Object(name)) => DirectoryName {
            formatted: optional_text(attr::get(name, "formatted"), "name.formatted")?,
            given_name: optional_text(attr::get(name, "givenName"), "name.givenName")?,
            family_name: optional_text(attr::get(name, "familyName"), "name.familyName")?,
        },
        Some(_) => return Err(ScimError::invalid_value("name must be an object")),
    };
    let mut emails = Vec::new();
    for (index, entry) in entries(attributes.get("emails"), "emails")?
        .into_iter()
        .enumerate()
    {
        let what = format!("emails[{index}]");
        let Some(value) = optional_text(attr::get(entry, "value"), &format!("{what}.value"))?
        else {
            continue;
        };
        emails.push(DirectoryEmail {
            value,
            kind: optional_text(attr::get(entry, "type"), &format!("{what}.type"))?,
            primary: boolean(
                attr::get(entry, "primary"),
                &format!("{what}.primary"),
                false,
            )?,
        });
    }
    if emails.len() > MAX_DIRECTORY_EMAILS {
        return Err(ScimError::invalid_value(format!(
            "emails holds at most {MAX_DIRECTORY_EMAILS} addresses"
        )));
    }
    if emails.iter().filter(|email| email.primary).count() > 1 {
        return Err(ScimError::invalid_value(
            "emails: at most one address may be primary",
        ));
    }
    let active = boolean(attributes.get("active"), "active", true)?;
    Ok(UserAttributes {
        user_name,
        external_id,
        display_name,
        name,
        emails,
        active,
    })
}

/// The attributes of a `Group` in a `POST` or `PUT` body (or a patched group).
///
/// `displayName` is required; each member's `value` must be a user's id (a UUID); `$ref`,
/// `display` and anything else Gatehouse does not keep are ignored. Members end each once, in
/// order ([`GroupAttributes::normalized`]).
///
/// # Errors
/// `invalidSyntax` when the body is not an object; `invalidValue` naming the attribute when
/// `displayName` is missing or invalid, a member has no UUID `value` or is a group (nested
/// groups are not kept), or there are more than [`MAX_GROUP_MEMBERS`] members.
pub fn parse_group(body: &Value) -> Result<GroupAttributes, ScimError> {
    let attributes = attributes(body, Kind::Group)?;
    let display_name = required_text(attributes.get("displayname"), "displayName")?;
    let external_id = optional_text(attributes.get("externalid"), "externalId")?;
    let entries = entries(attributes.get("members"), "members")?;
    let mut members = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        if attr::get(entry, "type")
            .and_then(Value::as_str)
            .is_some_and(|kind| kind.eq_ignore_ascii_case("Group"))
        {
            return Err(ScimError::invalid_value(format!(
                "members[{index}] is a group: a group's members are users"
            )));
        }
        let id = match attr::get(entry, "value") {
            Some(Value::String(value)) => Uuid::parse_str(value.trim()).ok(),
            _ => None,
        };
        let Some(id) = id else {
            return Err(ScimError::invalid_value(format!(
                "members[{index}].value must be a user's id"
            )));
        };
        members.push(DirectoryUserId::from_uuid(id));
    }
    let group = GroupAttributes {
        display_name,
        external_id,
        members,
    }
    .normalized();
    if group.members.len() > MAX_GROUP_MEMBERS {
        return Err(ScimError::invalid_value(format!(
            "members holds at most {MAX_GROUP_MEMBERS} users"
        )));
    }
    Ok(group)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ScimType;
    use gatehouse_domain::model::OrganizationId;
    use time::macros::datetime;

    pub(crate) const BASE: &str =
        "https://id.example.com/scim/v2/0190d0a0-0000-7000-8000-000000000001";

    pub(crate) fn t(text: &str) -> DirectoryText {
        DirectoryText::parse(text).unwrap()
    }

    pub(crate) fn ada() -> UserAttributes {
        UserAttributes {
            user_name: t("ada@acme.test"),
            external_id: Some(t("00u-Ada")),
            display_name: Some(t("Ada Lovelace")),
            name: DirectoryName {
                formatted: Some(t("Ada King")),
                given_name: Some(t("Ada")),
                family_name: Some(t("Lovelace")),
            },
            emails: vec![
                DirectoryEmail {
                    value: t("ada@acme.test"),
                    kind: Some(t("work")),
                    primary: true,
                },
                DirectoryEmail {
                    value: t("ada@home.test"),
                    kind: Some(t("home")),
                    primary: false,
                },
            ],
            active: true,
        }
    }

    pub(crate) fn user_id(n: u128) -> DirectoryUserId {
        DirectoryUserId::from_uuid(Uuid::from_u128(n))
    }

    pub(crate) fn directory_user(attributes: UserAttributes) -> DirectoryUser {
        DirectoryUser {
            id: user_id(0xada),
            organization_id: OrganizationId::from_uuid(Uuid::from_u128(1)),
            attributes,
            created_at: datetime!(2026-11-25 10:00 UTC),
            updated_at: datetime!(2026-11-26 11:30:00.5 UTC),
        }
    }

    pub(crate) fn directory_group(attributes: GroupAttributes) -> DirectoryGroup {
        DirectoryGroup {
            id: DirectoryGroupId::from_uuid(Uuid::from_u128(0xe)),
            organization_id: OrganizationId::from_uuid(Uuid::from_u128(1)),
            attributes,
            created_at: datetime!(2026-11-25 10:00 UTC),
            updated_at: datetime!(2026-11-25 10:00 UTC),
        }
    }

    #[test]
    fn a_full_user_renders_every_attribute_and_parses_back() {
        let user = directory_user(ada());
        let json = Resources::new(format!("{BASE}/")).user(&user);
        assert_eq!(
            json,
            json!({
                "schemas": [USER_SCHEMA],
                "id": "00000000-0000-0000-0000-000000000ada",
                "externalId": "00u-Ada",
                "userName": "ada@acme.test",
                "displayName": "Ada Lovelace",
                "name": {"formatted": "Ada King", "givenName": "Ada", "familyName": "Lovelace"},
                "emails": [
                    {"value": "ada@acme.test", "type": "work", "primary": true},
                    {"value": "ada@home.test", "type": "home", "primary": false},
                ],
                "active": true,
                "meta": {
                    "resourceType": "User",
                    "created": "2026-11-25T10:00:00Z",
                    "lastModified": "2026-11-26T11:30:00.500Z",
                    "location": format!("{BASE}/Users/00000000-0000-0000-0000-000000000ada"),
                    "version": "W/\"1795692600500000000\"",
                },
            })
        );
        assert_eq!(parse_user(&json).unwrap(), user.attributes);
    }

    #[test]
    fn a_minimal_user_leaves_out_what_it_does_not_have() {
        let minimal = UserAttributes {
            user_name: t("grace"),
            external_id: None,
            display_name: None,
            name: DirectoryName::default(),
            emails: Vec::new(),
            active: false,
        };
        let json = Resources::new(BASE).user(&directory_user(minimal.clone()));
        let object = json.as_object().unwrap();
        for absent in ["externalId", "displayName", "name", "emails"] {
            assert!(!object.contains_key(absent), "{absent}");
        }
        assert_eq!(json["active"], false);
        assert_eq!(parse_user(&json).unwrap(), minimal);
    }

    #[test]
    fn a_group_renders_its_members_as_user_references_and_parses_back() {
        let group = directory_group(GroupAttributes {
            display_name: t("Engineering"),
            external_id: Some(t("00g-eng")),
            members: vec![user_id(1), user_id(2)],
        });
        let json = Resources::new(BASE).group(&group);
        assert_eq!(
            json,
            json!({
                "schemas": [GROUP_SCHEMA],
                "id": "00000000-0000-0000-0000-00000000000e",
                "externalId": "00g-eng",
                "displayName": "Engineering",
                "members": [
                    {
                        "value": "00000000-0000-0000-0000-000000000001",
                        "$ref": format!("{BASE}/Users/00000000-0000-0000-0000-000000000001"),
                        "type": "User",
                    },
                    {
                        "value": "00000000-0000-0000-0000-000000000002",
                        "$ref": format!("{BASE}/Users/00000000-0000-0000-0000-000000000002"),
                        "type": "User",
                    },
                ],
                "meta": {
                    "resourceType": "Group",
                    "created": "2026-11-25T10:00:00Z",
                    "lastModified": "2026-11-25T10:00:00Z",
                    "location": format!("{BASE}/Groups/00000000-0000-0000-0000-00000000000e"),
                    "version": "W/\"1795600800000000000\"",
                },
            })
        );
        assert_eq!(parse_group(&json).unwrap(), group.attributes);
        let empty = directory_group(GroupAttributes {
            display_name: t("Nobody"),
            external_id: None,
            members: Vec::new(),
        });
        let json = Resources::new(BASE).group(&empty);
        assert!(json.get("members").is_none());
        assert_eq!(parse_group(&json).unwrap(), empty.attributes);
    }

    /// Okta's "Create the user" request (Okta's SCIM 2.0 provisioning guide).
    #[test]
    fn okta_creates_a_user() {
        let body = json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
            "userName": "isaac.brock@example.com",
            "name": {"givenName": "Isaac", "familyName": "Brock"},
            "emails": [{"primary": true, "value": "isaac.brock@example.com", "type": "work"}],
            "displayName": "Isaac Brock",
            "locale": "en-US",
            "externalId": "00ujl29u0le5T6Aj10h7",
            "groups": [],
            "password": "1mz050nq",
            "active": true
        });
        let user = parse_user(&body).unwrap();
        assert_eq!(
            user,
            UserAttributes {
                user_name: t("isaac.brock@example.com"),
                external_id: Some(t("00ujl29u0le5T6Aj10h7")),
                display_name: Some(t("Isaac Brock")),
                name: DirectoryName {
                    formatted: None,
                    given_name: Some(t("Isaac")),
                    family_name: Some(t("Brock")),
                },
                emails: vec![DirectoryEmail {
                    value: t("isaac.brock@example.com"),
                    kind: Some(t("work")),
                    primary: true,
                }],
                active: true,
            }
        );
    }

    /// Microsoft Entra ID's "Create User" request (its SCIM endpoint guide), enterprise
    /// extension and all.
    #[test]
    fn entra_creates_a_user() {
        let body = json!({
            "schemas": [
                "urn:ietf:params:scim:schemas:core:2.0:User",
                "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
            ],
            "externalId": "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef",
            "userName": "Test_User_ab6490ee-1e48-479e-a20b-2d77186b5dd1",
            "active": true,
            "emails": [{"primary": true, "type": "work", "value": "Test_User_fd0ea19b-0777-472c-9f96-4f70d2226f2e@testuser.com"}],
            "meta": {"resourceType": "User"},
            "name": {"formatted": "givenName familyName", "familyName": "familyName", "givenName": "givenName"},
            "roles": [],
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {
                "department": "Engineering",
                "manager": {"value": "manager-id"}
            }
        });
        let user = parse_user(&body).unwrap();
        assert_eq!(
            user.user_name.as_str(),
            "Test_User_ab6490ee-1e48-479e-a20b-2d77186b5dd1"
        );
        assert_eq!(
            user.external_id.unwrap().as_str(),
            "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef"
        );
        assert_eq!(
            user.name.formatted.unwrap().as_str(),
            "givenName familyName"
        );
        assert_eq!(user.emails.len(), 1);
        assert!(user.emails[0].primary);
        assert!(user.active);
        assert_eq!(user.display_name, None);
    }

    #[test]
    fn active_defaults_to_true_and_takes_strings_in_any_case() {
        let user = |active: Value| {
            let mut body = json!({"userName": "ada"});
            body["active"] = active;
            parse_user(&body).map(|user| user.active)
        };
        assert!(parse_user(&json!({"userName": "ada"})).unwrap().active);
        assert_eq!(user(Value::Null), Ok(true));
        assert_eq!(user(json!("False")), Ok(false));
        assert_eq!(user(json!("TRUE")), Ok(true));
        assert_eq!(user(json!(false)), Ok(false));
        let error = user(json!("no")).unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidValue));
        assert!(error.detail.contains("active"), "{}", error.detail);
    }

    #[test]
    fn names_are_matched_without_case_and_may_be_qualified() {
        let body = json!({
            "USERNAME": "ada",
            "urn:ietf:params:scim:schemas:core:2.0:User:displayName": "Ada",
            "Name": {"GivenName": "Ada"},
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:userName": "ignored",
        });
        let user = parse_user(&body).unwrap();
        assert_eq!(user.user_name.as_str(), "ada");
        assert_eq!(user.display_name.unwrap().as_str(), "Ada");
        assert_eq!(user.name.given_name.unwrap().as_str(), "Ada");
    }

    #[test]
    fn a_user_without_a_valid_user_name_is_refused_naming_the_attribute() {
        for (body, says) in [
            (json!({}), "userName is required"),
            (json!({"userName": null}), "userName is required"),
            (json!({"userName": "  "}), "userName must not be empty"),
            (json!({"userName": 7}), "userName must be a string"),
            (
                json!({"userName": "a\u{7}b"}),
                "userName must not contain control characters",
            ),
            (
                json!({"userName": "x".repeat(257)}),
                "userName must be at most 256 characters",
            ),
        ] {
            let error = parse_user(&body).unwrap_err();
            assert_eq!(error.scim_type, Some(ScimType::InvalidValue), "{body}");
            assert_eq!(error.detail, says);
        }
        let error = parse_user(&json!(["userName"])).unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidSyntax));
    }

    #[test]
    fn wrong_types_are_invalid_values() {
        for (body, names) in [
            (json!({"userName": "a", "displayName": 1}), "displayName"),
            (json!({"userName": "a", "name": "Ada"}), "name"),
            (
                json!({"userName": "a", "name": {"givenName": []}}),
                "name.givenName",
            ),
            (
                json!({"userName": "a", "emails": {"value": "a@b.test"}}),
                "emails",
            ),
            (
                json!({"userName": "a", "emails": ["a@b.test"]}),
                "emails[0]",
            ),
            (
                json!({"userName": "a", "emails": [{"value": "a@b.test", "primary": "yes"}]}),
                "emails[0].primary",
            ),
            (json!({"userName": "a", "externalId": "a\nb"}), "externalId"),
        ] {
            let error = parse_user(&body).unwrap_err();
            assert_eq!(error.scim_type, Some(ScimType::InvalidValue), "{body}");
            assert!(error.detail.starts_with(names), "{}", error.detail);
        }
    }

    #[test]
    fn empty_optional_texts_are_unassigned_and_addresses_are_bounded() {
        let user = parse_user(&json!({
            "userName": "ada", "displayName": "", "externalId": null,
            "emails": [{"value": "", "type": "work"}, {"value": "a@b.test", "type": " "}]
        }))
        .unwrap();
        assert_eq!(user.display_name, None);
        assert_eq!(user.external_id, None);
        assert_eq!(user.emails.len(), 1);
        assert_eq!(user.emails[0].kind, None);

        let emails: Vec<Value> = (0..=MAX_DIRECTORY_EMAILS)
            .map(|n| json!({"value": format!("a{n}@b.test")}))
            .collect();
        let error = parse_user(&json!({"userName": "ada", "emails": emails})).unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidValue));

        let two_primaries = json!({"userName": "ada", "emails": [
            {"value": "a@b.test", "primary": true}, {"value": "c@b.test", "primary": "True"}
        ]});
        assert_eq!(
            parse_user(&two_primaries),
            Err(ScimError::invalid_value(
                "emails: at most one address may be primary"
            ))
        );
    }

    #[test]
    fn a_group_needs_a_name_and_users_as_members() {
        let id = "00000000-0000-0000-0000-000000000002";
        let group = parse_group(&json!({
            "schemas": [GROUP_SCHEMA],
            "displayName": "Engineering",
            "members": [
                {"value": id, "display": "Bob"},
                {"value": "00000000-0000-0000-0000-000000000001", "$ref": "ignored"},
                {"value": id.to_uppercase()},
            ]
        }))
        .unwrap();
        assert_eq!(group.members, vec![user_id(1), user_id(2)]);
        assert_eq!(group.external_id, None);

        for body in [
            json!({}),
            json!({"displayName": ""}),
            json!({"displayName": "G", "members": [{"value": "bob"}]}),
            json!({"displayName": "G", "members": [{"display": "Bob"}]}),
            json!({"displayName": "G", "members": [{"value": id, "type": "Group"}]}),
            json!({"displayName": "G", "members": "bob"}),
        ] {
            let error = parse_group(&body).unwrap_err();
            assert_eq!(error.scim_type, Some(ScimType::InvalidValue), "{body}");
        }
        let error = parse_group(&json!("Engineering")).unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidSyntax));
    }

    #[test]
    fn a_group_holds_at_most_the_limit_of_members() {
        let members: Vec<Value> = (0..=MAX_GROUP_MEMBERS as u128)
            .map(|n| json!({"value": Uuid::from_u128(n + 1).to_string()}))
            .collect();
        let error = parse_group(&json!({"displayName": "All", "members": members})).unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidValue));
        assert!(error.detail.contains("at most"));
    }
}
