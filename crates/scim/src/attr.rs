//! Attribute names: matched without case (RFC 7643 §2.1), possibly qualified by their schema's
//! URN, and the attributes Gatehouse keeps for each resource type.

use serde_json::{Map, Value};

use crate::{GROUP_SCHEMA, USER_SCHEMA};

/// The resource types Gatehouse serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `User`.
    User,
    /// `Group`.
    Group,
}

/// How an attribute holds its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// One simple value (`userName`, `active`).
    Simple,
    /// One complex value (`name`).
    Complex,
    /// A list of complex values (`emails`, `members`).
    Multi,
}

/// An attribute Gatehouse keeps: its name as written, its shape, and the sub-attributes it keeps.
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) name: &'static str,
    pub(crate) shape: Shape,
    pub(crate) subs: &'static [&'static str],
}

const USER_ATTRIBUTES: &[Kept] = &[
    Kept {
        name: "userName",
        shape: Shape::Simple,
        subs: &[],
    },
    Kept {
        name: "externalId",
        shape: Shape::Simple,
        subs: &[],
    },
    Kept {
        name: "displayName",
        shape: Shape::Simple,
        subs: &[],
    },
    Kept {
        name: "active",
        shape: Shape::Simple,
        subs: &[],
    },
    Kept {
        name: "name",
        shape: Shape::Complex,
        subs: &["formatted", "givenName", "familyName"],
    },
    Kept {
        name: "emails",
        shape: Shape::Multi,
        subs: &["value", "type", "primary"],
    },
];

const GROUP_ATTRIBUTES: &[Kept] = &[
    Kept {
        name: "displayName",
        shape: Shape::Simple,
        subs: &[],
    },
    Kept {
        name: "externalId",
        shape: Shape::Simple,
        subs: &[],
    },
    Kept {
        name: "members",
        shape: Shape::Multi,
        subs: &["value"],
    },
];

impl Kind {
    /// The resource type's core schema.
    pub(crate) const fn schema(self) -> &'static str {
        match self {
            Self::User => USER_SCHEMA,
            Self::Group => GROUP_SCHEMA,
        }
    }

    /// The attribute Gatehouse keeps by this name (without case), if any. `id`, `meta`,
    /// `schemas` and `groups` are read-only: not kept.
    pub(crate) fn kept(self, name: &str) -> Option<&'static Kept> {
        let attributes = match self {
            Self::User => USER_ATTRIBUTES,
            Self::Group => GROUP_ATTRIBUTES,
        };
        attributes
            .iter()
            .find(|kept| kept.name.eq_ignore_ascii_case(name))
    }
}

impl Kept {
    /// The sub-attribute kept by this name (without case), as written.
    pub(crate) fn sub(&self, name: &str) -> Option<&'static str> {
        self.subs
            .iter()
            .copied()
            .find(|sub| sub.eq_ignore_ascii_case(name))
    }
}

/// An attribute path with its schema URN taken off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Qualified<'a> {
    /// No URN: the path as given.
    Plain(&'a str),
    /// A path in a core resource schema: the schema, and the rest (empty for the URN alone).
    Core(&'static str, &'a str),
    /// A path in another schema (an extension such as the enterprise `User`): nothing
    /// Gatehouse keeps.
    Foreign,
}

/// `path` with a leading `urn:...:User:` or `urn:...:Group:` taken off (without case).
pub(crate) fn qualified(path: &str) -> Qualified<'_> {
    if !starts_with_ignore_case(path, "urn:") {
        return Qualified::Plain(path);
    }
    for schema in [USER_SCHEMA, GROUP_SCHEMA] {
        if path.eq_ignore_ascii_case(schema) {
            return Qualified::Core(schema, "");
        }
        if starts_with_ignore_case(path, schema) && path.as_bytes().get(schema.len()) == Some(&b':')
        {
            if let Some(rest) = path.get(schema.len() + 1..) {
                return Qualified::Core(schema, rest);
            }
        }
    }
    Qualified::Foreign
}

/// Whether `text` starts with `prefix`, ASCII case aside.
pub(crate) fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// The value of `object`'s member named `name` without case (the first, should two differ
/// only in case).
pub(crate) fn get<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    object
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value)
}

/// Takes out every member of `object` named `name` without case; the last one taken.
pub(crate) fn remove(object: &mut Map<String, Value>, name: &str) -> Option<Value> {
    let keys: Vec<String> = object
        .keys()
        .filter(|key| key.eq_ignore_ascii_case(name))
        .cloned()
        .collect();
    keys.into_iter()
        .filter_map(|key| object.remove(&key))
        .last()
}

/// Sets `object`'s member `name` (as written), replacing any member of that name but for case.
pub(crate) fn set(object: &mut Map<String, Value>, name: &str, value: Value) {
    remove(object, name);
    object.insert(name.to_owned(), value);
}

/// Whether the attribute (or sub-attribute) compares with case (`caseExact: true`): the ids,
/// `externalId`, `meta.version`, `meta.location`, `schemas`, and a member's `value` and `$ref`.
/// Everything else Gatehouse serves compares without case.
pub(crate) fn case_exact(attribute: &str, sub: Option<&str>) -> bool {
    let is = |name: &str| attribute.eq_ignore_ascii_case(name);
    let sub_is = |name: &str| sub.is_some_and(|sub| sub.eq_ignore_ascii_case(name));
    is("id")
        || is("externalId")
        || is("schemas")
        || (is("meta") && (sub_is("version") || sub_is("location")))
        || (is("members") && (sub_is("value") || sub_is("$ref")))
}

/// A boolean as a directory sends it: `true`, or the strings `"true"` and `"false"` in any case
/// (Entra ID sends `"False"`).
pub(crate) fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::String(text) if text.trim().eq_ignore_ascii_case("true") => Some(true),
        Value::String(text) if text.trim().eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_qualified_path_loses_its_core_urn_and_an_extension_is_foreign() {
        assert_eq!(qualified("userName"), Qualified::Plain("userName"));
        assert_eq!(
            qualified("urn:ietf:params:scim:schemas:core:2.0:User:name.givenName"),
            Qualified::Core(USER_SCHEMA, "name.givenName")
        );
        assert_eq!(
            qualified("URN:IETF:PARAMS:SCIM:SCHEMAS:CORE:2.0:GROUP:displayName"),
            Qualified::Core(GROUP_SCHEMA, "displayName")
        );
        assert_eq!(
            qualified("urn:ietf:params:scim:schemas:core:2.0:User"),
            Qualified::Core(USER_SCHEMA, "")
        );
        assert_eq!(
            qualified("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department"),
            Qualified::Foreign
        );
        assert_eq!(
            qualified("urn:ietf:params:scim:schemas:core:2.0:Users"),
            Qualified::Foreign
        );
        assert_eq!(qualified("urn:é"), Qualified::Foreign);
    }

    #[test]
    fn members_are_found_and_replaced_without_case() {
        let mut object = json!({"UserName": "a", "username": "b"})
            .as_object()
            .cloned()
            .unwrap();
        assert!(get(&object, "USERNAME").is_some());
        set(&mut object, "userName", json!("c"));
        assert_eq!(Value::Object(object), json!({"userName": "c"}));
    }

    #[test]
    fn booleans_come_as_booleans_or_strings() {
        assert_eq!(boolean(&json!(true)), Some(true));
        assert_eq!(boolean(&json!("False")), Some(false));
        assert_eq!(boolean(&json!("TRUE")), Some(true));
        assert_eq!(boolean(&json!("yes")), None);
        assert_eq!(boolean(&json!(1)), None);
    }

    #[test]
    fn ids_compare_with_case_and_names_without() {
        assert!(case_exact("id", None));
        assert!(case_exact("externalId", None));
        assert!(case_exact("meta", Some("version")));
        assert!(case_exact("members", Some("value")));
        assert!(!case_exact("userName", None));
        assert!(!case_exact("emails", Some("value")));
        assert!(!case_exact("meta", Some("created")));
    }
}
