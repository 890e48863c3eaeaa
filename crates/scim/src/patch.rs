//! `PATCH` (RFC 7644 §3.5.2): the operations are applied, in order, to the resource's JSON
//! (its attributes without `id` and `meta`), and the result is read back with
//! [`parse_user`] or [`parse_group`]: one set of rules for a created, replaced or patched
//! resource.
//!
//! Supported: `add`, `remove` and `replace` (in any case: Entra ID sends `Replace`); path-less
//! operations whose value is an object of attributes (dotted keys such as `name.givenName`, as
//! Entra ID sends, are paths); simple paths (`active`, `name.givenName`, `emails`, `members`,
//! fully qualified or not, without case); value-filtered paths (`emails[type eq "work"].value`,
//! `members[value eq "<id>"]`), whose filter kanidm's grammar parses.
//!
//! - `add` on a multi-valued attribute appends (a value already there is not added twice);
//!   `replace` replaces the whole list; `remove` removes it, or only the values given
//!   (`{"op": "remove", "path": "members", "value": [{"value": "<id>"}]}`, as Entra ID sends).
//! - `add` or `replace` on a single complex attribute (`name`) sets the sub-attributes given and
//!   keeps the others (RFC 7644 §3.5.2.1 and §3.5.2.3).
//! - A filtered path that matches no value: for `add` and `replace` whose filter is equalities
//!   only (`emails[type eq "work"].value`), a value is made with them (Entra ID adds a work
//!   address so); otherwise `noTarget`, as for `remove`.
//! - An address made primary makes the others not primary (RFC 7644 §3.5.2).
//! - `active` cannot be removed (nor replaced with `null`): `invalidValue`. Unassigned, it
//!   would read as `true` and let a deactivated user back in; a directory deactivates with
//!   `false`.
//! - **Lenient**: a path into an attribute Gatehouse does not keep (`title`, `phoneNumbers`, the
//!   enterprise extension's `urn:...:enterprise:2.0:User:department`), or a read-only one
//!   (`id`, `meta`, `schemas`, `groups`), is ignored, not refused: Entra ID and Okta send them
//!   whatever the schema says.
//!
//! [`parse_user`]: crate::parse_user
//! [`parse_group`]: crate::parse_group

use gatehouse_domain::model::{GroupAttributes, UserAttributes};
use scim_proto::filter::ScimComplexFilter;
use serde_json::{Map, Value};

use crate::attr::{self, Kept, Kind, Qualified, Shape};
use crate::filter::{matches_value, parse_value_filter};
use crate::resource::{group_document, user_document};
use crate::{parse_group, parse_user, ScimError, PATCH_SCHEMA};

/// A parsed `PATCH` request: its operations, in order.
#[derive(Clone, Debug)]
pub struct Patch {
    operations: Vec<Operation>,
}

#[derive(Clone, Debug)]
struct Operation {
    op: Op,
    /// `None`: the resource itself.
    target: Option<Target>,
    value: Option<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Remove,
    Replace,
}

/// Where an operation's path points.
#[derive(Clone, Debug)]
enum Target {
    /// An attribute of another schema (an extension): nothing Gatehouse keeps.
    Foreign,
    /// An attribute of a core schema.
    Attribute(AttributePath),
}

/// `attribute[filter].sub`, the attribute and sub-attribute as written.
#[derive(Clone, Debug)]
struct AttributePath {
    /// The core schema it was qualified with, if it was.
    schema: Option<&'static str>,
    attribute: String,
    filter: Option<ScimComplexFilter>,
    sub: Option<String>,
}

impl Patch {
    /// Reads a `PATCH` body: `schemas` must hold the `PatchOp` URN; `Operations` is a
    /// non-empty array of `{"op", "path"?, "value"?}`, `op` being `add`, `remove` or `replace` in
    /// any case; `add` and `replace` need a `value`.
    ///
    /// # Errors
    /// `invalidSyntax` for a body that is not such a message (an unknown `op`, a missing
    /// `value`, ...); `invalidPath` for a malformed path (or a filter in it that does not
    /// parse).
    pub fn parse(body: &Value) -> Result<Self, ScimError> {
        let Value::Object(body) = body else {
            return Err(ScimError::invalid_syntax("a PATCH body is a JSON object"));
        };
        let is_patch = attr::get(body, "schemas")
            .and_then(Value::as_array)
            .is_some_and(|schemas| {
                schemas
                    .iter()
                    .filter_map(Value::as_str)
                    .any(|schema| schema.eq_ignore_ascii_case(PATCH_SCHEMA))
            });
        if !is_patch {
            return Err(ScimError::invalid_syntax(format!(
                "schemas must hold {PATCH_SCHEMA}"
            )));
        }
        let operations = match attr::get(body, "Operations") {
            Some(Value::Array(operations)) if !operations.is_empty() => operations,
            _ => {
                return Err(ScimError::invalid_syntax(
                    "Operations must be a non-empty array",
                ))
            }
        };
        let operations = operations
            .iter()
            .enumerate()
            .map(|(index, operation)| Operation::parse(index, operation))
            .collect::<Result<_, _>>()?;
        Ok(Self { operations })
    }

    /// The user once the operations are applied to it.
    ///
    /// # Errors
    /// As [`Patch::parse`] for paths, `noTarget` for a filtered path that selects nothing,
    /// and any error of [`parse_user`] for the result (removing `userName` is `invalidValue`).
    pub fn apply_to_user(&self, current: &UserAttributes) -> Result<UserAttributes, ScimError> {
        let mut document = user_document(current);
        self.apply(&mut document, Kind::User)?;
        parse_user(&Value::Object(document))
    }

    /// The group once the operations are applied to it.
    ///
    /// # Errors
    /// As [`Patch::parse`] for paths, `noTarget` for a filtered path that selects nothing,
    /// and any error of [`parse_group`] for the result.
    pub fn apply_to_group(&self, current: &GroupAttributes) -> Result<GroupAttributes, ScimError> {
        let mut document = group_document(current, None);
        self.apply(&mut document, Kind::Group)?;
        parse_group(&Value::Object(document))
    }

    fn apply(&self, document: &mut Map<String, Value>, kind: Kind) -> Result<(), ScimError> {
        for operation in &self.operations {
            apply(
                document,
                kind,
                operation.op,
                operation.target.as_ref(),
                operation.value.as_ref(),
            )?;
        }
        Ok(())
    }
}

impl Operation {
    fn parse(index: usize, operation: &Value) -> Result<Self, ScimError> {
        let Value::Object(operation) = operation else {
            return Err(ScimError::invalid_syntax(format!(
                "Operations[{index}] must be an object"
            )));
        };
        let op = match attr::get(operation, "op").and_then(Value::as_str) {
            Some(op) if op.eq_ignore_ascii_case("add") => Op::Add,
            Some(op) if op.eq_ignore_ascii_case("remove") => Op::Remove,
            Some(op) if op.eq_ignore_ascii_case("replace") => Op::Replace,
            _ => {
                return Err(ScimError::invalid_syntax(format!(
                    "Operations[{index}].op must be add, remove or replace"
                )))
            }
        };
        let target = match attr::get(operation, "path") {
            None | Some(Value::Null) => None,
            Some(Value::String(path)) => parse_path(path)?,
            Some(_) => {
                return Err(ScimError::invalid_path(format!(
                    "Operations[{index}].path must be a string"
                )))
            }
        };
        let value = attr::get(operation, "value").cloned();
        if op != Op::Remove && value.is_none() {
            return Err(ScimError::invalid_syntax(format!(
                "Operations[{index}] needs a value"
            )));
        }
        Ok(Self { op, target, value })
    }
}

/// Whether `name` is an attribute name (RFC 7643 §2.1: `ALPHA *(nameChar)`, or `$ref`).
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    name == "$ref"
        || chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Parses a path: `None` for the resource itself (an empty path, or the core schema's URN).
fn parse_path(raw: &str) -> Result<Option<Target>, ScimError> {
    let invalid = || ScimError::invalid_path(format!("invalid path {raw:?}"));
    let (schema, path) = match attr::qualified(raw.trim()) {
        Qualified::Plain(path) => (None, path),
        Qualified::Core(schema, path) => (Some(schema), path),
        Qualified::Foreign => return Ok(Some(Target::Foreign)),
    };
    if path.is_empty() {
        return Ok(None);
    }
    let end = path.find(['[', '.']).unwrap_or(path.len());
    let attribute = path.get(..end).ok_or_else(invalid)?;
    let mut rest = path.get(end..).ok_or_else(invalid)?;
    if !is_name(attribute) {
        return Err(invalid());
    }
    let mut filter = None;
    if let Some(inside) = rest.strip_prefix('[') {
        let close = closing_bracket(inside).ok_or_else(invalid)?;
        let text = inside.get(..close).ok_or_else(invalid)?;
        filter = Some(parse_value_filter(text).map_err(|error| {
            ScimError::invalid_path(format!("invalid filter in path {raw:?}: {error}"))
        })?);
        rest = inside.get(close + 1..).ok_or_else(invalid)?;
    }
    let sub = match rest.strip_prefix('.') {
        Some(sub) if is_name(sub) => Some(sub.to_owned()),
        Some(_) => return Err(invalid()),
        None if rest.is_empty() => None,
        None => return Err(invalid()),
    };
    Ok(Some(Target::Attribute(AttributePath {
        schema,
        attribute: attribute.to_owned(),
        filter,
        sub,
    })))
}

/// The byte offset of the `]` closing a value filter, outside quoted strings.
fn closing_bracket(inside: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (offset, c) in inside.char_indices() {
        if quoted {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                quoted = false;
            }
        } else if c == '"' {
            quoted = true;
        } else if c == ']' {
            return Some(offset);
        }
    }
    None
}

/// Applies one operation to the document.
fn apply(
    document: &mut Map<String, Value>,
    kind: Kind,
    op: Op,
    target: Option<&Target>,
    value: Option<&Value>,
) -> Result<(), ScimError> {
    let path = match target {
        Some(Target::Foreign) => return Ok(()),
        Some(Target::Attribute(path)) => path,
        None => return apply_to_resource(document, kind, op, value),
    };
    if path.schema.is_some_and(|schema| schema != kind.schema()) {
        return Ok(());
    }
    let Some(kept) = kind.kept(&path.attribute) else {
        return Ok(());
    };
    let sub = match &path.sub {
        None => None,
        Some(sub) => match kept.sub(sub) {
            Some(sub) => Some(sub),
            None if kept.shape == Shape::Simple => {
                return Err(ScimError::invalid_path(format!(
                    "{} has no sub-attributes",
                    kept.name
                )))
            }
            None => return Ok(()),
        },
    };
    let value = value.filter(|value| !value.is_null());
    match kept.shape {
        Shape::Simple | Shape::Complex if path.filter.is_some() => Err(ScimError::invalid_path(
            format!("{} is not multi-valued: it takes no filter", kept.name),
        )),
        Shape::Simple => {
            match (op, value) {
                (Op::Remove, _) | (_, None) if kept.name == "active" => {
                    return Err(ScimError::invalid_value(
                        "active cannot be removed: replace it with false to deactivate the user",
                    ))
                }
                (Op::Remove, _) | (_, None) => {
                    attr::remove(document, kept.name);
                }
                (_, Some(value)) => attr::set(document, kept.name, value.clone()),
            }
            Ok(())
        }
        Shape::Complex => {
            apply_complex(document, kept, op, sub, value);
            Ok(())
        }
        Shape::Multi => {
            let before = attr::get(document, kept.name)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut values = before.clone();
            apply_multi(&mut values, kept, op, path.filter.as_ref(), sub, value)?;
            if kind == Kind::User {
                settle_primary(&before, &mut values);
            }
            if values.is_empty() {
                attr::remove(document, kept.name);
            } else {
                attr::set(document, kept.name, Value::Array(values));
            }
            Ok(())
        }
    }
}

/// A path-less `add` or `replace`: each member of the value is an attribute (or, dotted or
/// qualified, a path) to add or replace.
fn apply_to_resource(
    document: &mut Map<String, Value>,
    kind: Kind,
    op: Op,
    value: Option<&Value>,
) -> Result<(), ScimError> {
    if op == Op::Remove {
        return Err(ScimError::no_target("a remove operation needs a path"));
    }
    let Some(Value::Object(attributes)) = value else {
        return Err(ScimError::invalid_value(
            "an operation without a path takes an object of attributes as its value",
        ));
    };
    for (name, value) in attributes {
        let target = parse_path(name)?;
        apply(document, kind, op, target.as_ref(), Some(value))?;
    }
    Ok(())
}

/// `add` and `replace` set the sub-attributes given (the others stay); `remove` removes.
fn apply_complex(
    document: &mut Map<String, Value>,
    kept: &Kept,
    op: Op,
    sub: Option<&str>,
    value: Option<&Value>,
) {
    let (sub, value) = match (op, sub, value) {
        (Op::Remove, None, _) | (_, None, None) => {
            attr::remove(document, kept.name);
            return;
        }
        (_, Some(sub), value) => (sub, value.filter(|_| op != Op::Remove)),
        (_, None, Some(value)) => {
            let mut current = complex(document, kept.name);
            match value {
                Value::Object(given) => {
                    for (name, value) in given {
                        if let Some(sub) = kept.sub(name) {
                            attr::set(&mut current, sub, value.clone());
                        }
                    }
                }
                // Not an object: left for the parser to refuse.
                other => {
                    attr::set(document, kept.name, other.clone());
                    return;
                }
            }
            attr::set(document, kept.name, Value::Object(current));
            return;
        }
    };
    let mut current = complex(document, kept.name);
    match value {
        Some(value) if !value.is_null() => attr::set(&mut current, sub, value.clone()),
        _ => {
            attr::remove(&mut current, sub);
        }
    }
    if current.is_empty() {
        attr::remove(document, kept.name);
    } else {
        attr::set(document, kept.name, Value::Object(current));
    }
}

/// The complex attribute's value as an object (empty when it has none).
fn complex(document: &Map<String, Value>, name: &str) -> Map<String, Value> {
    attr::get(document, name)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// A value given for a multi-valued attribute: its elements (one object stands for itself).
fn elements(value: Option<&Value>) -> Vec<Value> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(values)) => values.clone(),
        Some(other) => vec![other.clone()],
    }
}

/// Whether two values of a multi-valued attribute are the same value: members with the same
/// `value` (without case: ids are UUIDs), addresses equal but for the case of their texts.
fn same(a: &Value, b: &Value) -> bool {
    fn fold(value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(text.to_lowercase()),
            Value::Object(object) => Value::Object(
                object
                    .iter()
                    .map(|(key, value)| (key.to_ascii_lowercase(), fold(value)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    fold(a) == fold(b)
}

fn value_of(element: &Value) -> Option<String> {
    element
        .as_object()
        .and_then(|object| attr::get(object, "value"))
        .and_then(Value::as_str)
        .map(|value| value.trim().to_lowercase())
}

fn apply_multi(
    values: &mut Vec<Value>,
    kept: &Kept,
    op: Op,
    filter: Option<&ScimComplexFilter>,
    sub: Option<&str>,
    value: Option<&Value>,
) -> Result<(), ScimError> {
    let Some(filter) = filter else {
        match (op, sub) {
            (Op::Add, None) => {
                for element in elements(value) {
                    let duplicate = match kept.name {
                        "members" => value_of(&element).is_some_and(|id| {
                            values.iter().any(|v| value_of(v) == Some(id.clone()))
                        }),
                        _ => values.iter().any(|v| same(v, &element)),
                    };
                    if !duplicate {
                        values.push(element);
                    }
                }
            }
            (Op::Replace, None) => *values = elements(value),
            (Op::Remove, None) => match value {
                None => values.clear(),
                Some(given) => {
                    let given = elements(Some(given));
                    values.retain(|element| {
                        !given.iter().any(|removed| match value_of(removed) {
                            Some(id) => value_of(element) == Some(id),
                            None => same(element, removed),
                        })
                    });
                }
            },
            (_, Some(sub)) => {
                if values.is_empty() && op != Op::Remove {
                    if let Some(value) = value {
                        values.push(Value::Object(Map::from_iter([(
                            sub.to_owned(),
                            value.clone(),
                        )])));
                    }
                    return Ok(());
                }
                for element in values.iter_mut() {
                    set_sub(element, sub, value.filter(|_| op != Op::Remove));
                }
            }
        }
        return Ok(());
    };
    let matched: Vec<usize> = values
        .iter()
        .enumerate()
        .filter(|(_, element)| matches_value(filter, kept.name, element))
        .map(|(index, _)| index)
        .collect();
    if matched.is_empty() {
        let made = match (op, implied(filter)) {
            (Op::Add | Op::Replace, Some(mut made)) => {
                match (sub, value) {
                    (Some(sub), Some(value)) => attr::set(&mut made, sub, value.clone()),
                    (None, Some(Value::Object(given))) => {
                        for (name, value) in given {
                            attr::set(&mut made, name, value.clone());
                        }
                    }
                    _ => return Err(no_match(kept)),
                }
                made
            }
            _ => return Err(no_match(kept)),
        };
        values.push(Value::Object(made));
        return Ok(());
    }
    match (op, sub) {
        (Op::Remove, None) => {
            let mut index = 0;
            values.retain(|_| {
                let keep = !matched.contains(&index);
                index += 1;
                keep
            });
        }
        (Op::Remove, Some(sub)) => {
            for &index in &matched {
                if let Some(element) = values.get_mut(index) {
                    set_sub(element, sub, None);
                }
            }
        }
        (Op::Add | Op::Replace, Some(sub)) => {
            for &index in &matched {
                if let Some(element) = values.get_mut(index) {
                    set_sub(element, sub, value);
                }
            }
        }
        (Op::Add | Op::Replace, None) => {
            for &index in &matched {
                let Some(element) = values.get_mut(index) else {
                    continue;
                };
                match (op, value, element.as_object_mut()) {
                    (Op::Add, Some(Value::Object(given)), Some(object)) => {
                        for (name, value) in given {
                            attr::set(object, name, value.clone());
                        }
                    }
                    (_, Some(value), _) => *element = value.clone(),
                    (_, None, _) => {}
                }
            }
        }
    }
    Ok(())
}

fn no_match(kept: &Kept) -> ScimError {
    ScimError::no_target(format!(
        "the path's filter matches no value of {}",
        kept.name
    ))
}

/// Sets (or, without a value, removes) a sub-attribute of one value of a multi-valued
/// attribute.
fn set_sub(element: &mut Value, sub: &str, value: Option<&Value>) {
    let Some(object) = element.as_object_mut() else {
        return;
    };
    match value {
        Some(value) if !value.is_null() => attr::set(object, sub, value.clone()),
        _ => {
            attr::remove(object, sub);
        }
    }
}

/// The value a filter of equalities describes (`type eq "work" and primary eq true`): what
/// `add` makes when the filter matches nothing. `None` for any other filter.
fn implied(filter: &ScimComplexFilter) -> Option<Map<String, Value>> {
    match filter {
        ScimComplexFilter::Equal(name, value) => {
            Some(Map::from_iter([(name.clone(), value.clone())]))
        }
        ScimComplexFilter::And(a, b) => {
            let mut made = implied(a)?;
            for (name, value) in implied(b)? {
                attr::set(&mut made, &name, value);
            }
            Some(made)
        }
        _ => None,
    }
}

/// At most one address is primary: when an operation leaves several, those it made primary
/// win (the last of them), the others are no longer primary.
fn settle_primary(before: &[Value], after: &mut [Value]) {
    let is_primary = |value: &Value| {
        value
            .as_object()
            .and_then(|object| attr::get(object, "primary"))
            .and_then(attr::boolean)
            .unwrap_or(false)
    };
    let primaries: Vec<usize> = after
        .iter()
        .enumerate()
        .filter(|(_, value)| is_primary(value))
        .map(|(index, _)| index)
        .collect();
    if primaries.len() < 2 {
        return;
    }
    let fresh = primaries.iter().copied().rfind(|&index| {
        after
            .get(index)
            .is_some_and(|value| !before.iter().any(|old| old == value && is_primary(old)))
    });
    let keep = fresh.or(primaries.last().copied());
    for index in primaries {
        if Some(index) != keep {
            if let Some(object) = after.get_mut(index).and_then(Value::as_object_mut) {
                attr::set(object, "primary", Value::Bool(false));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::tests::{ada, t, user_id};
    use crate::ScimType;
    use gatehouse_domain::model::{DirectoryEmail, DirectoryName, MAX_GROUP_MEMBERS};
    use serde_json::json;

    fn patch(operations: Value) -> Patch {
        Patch::parse(&json!({"schemas": [PATCH_SCHEMA], "Operations": operations})).unwrap()
    }

    fn patch_user(operations: Value) -> Result<UserAttributes, ScimError> {
        patch(operations).apply_to_user(&ada())
    }

    fn error_of(body: Value) -> ScimError {
        Patch::parse(&body).unwrap_err()
    }

    fn engineering() -> GroupAttributes {
        GroupAttributes {
            display_name: t("Engineering"),
            external_id: None,
            members: vec![user_id(1), user_id(2)],
        }
    }

    fn id(n: u128) -> String {
        user_id(n).to_string()
    }

    #[test]
    fn a_patch_body_needs_the_schema_and_operations() {
        let cases = [
            json!([]),
            json!({"Operations": [{"op": "add", "path": "active", "value": true}]}),
            json!({"schemas": [PATCH_SCHEMA]}),
            json!({"schemas": [PATCH_SCHEMA], "Operations": []}),
            json!({"schemas": [PATCH_SCHEMA], "Operations": {"op": "add"}}),
            json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "move", "path": "active"}]}),
            json!({"schemas": [PATCH_SCHEMA], "Operations": [{"path": "active", "value": true}]}),
            json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "add", "path": "active"}]}),
            json!({"schemas": [PATCH_SCHEMA], "Operations": ["add"]}),
        ];
        for body in cases {
            assert_eq!(
                error_of(body.clone()).scim_type,
                Some(ScimType::InvalidSyntax),
                "{body}"
            );
        }
        // The names of the message's members, like attributes', are matched without case.
        let lower = json!({"SCHEMAS": [PATCH_SCHEMA.to_lowercase()], "operations": [{"OP": "REMOVE", "PATH": "displayName"}]});
        assert_eq!(
            Patch::parse(&lower)
                .unwrap()
                .apply_to_user(&ada())
                .unwrap()
                .display_name,
            None
        );
    }

    #[test]
    fn malformed_paths_are_invalid_paths() {
        for path in [
            "1name",
            "name..givenName",
            "name.given.Name",
            "emails[type eq \"work\"",
            "emails[type eq]",
            "emails[type eq \"work\"]value",
            "emails[type eq \"work\"].",
            "user name",
        ] {
            let body = json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "path": path, "value": "x"}]});
            assert_eq!(
                error_of(body).scim_type,
                Some(ScimType::InvalidPath),
                "{path}"
            );
        }
        let body = json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "path": 7, "value": "x"}]});
        assert_eq!(error_of(body).scim_type, Some(ScimType::InvalidPath));
        for (path, value) in [
            ("userName.first", json!("x")),
            ("active[value eq true]", json!(false)),
            ("name[givenName eq \"Ada\"]", json!({})),
        ] {
            let error =
                patch_user(json!([{"op": "replace", "path": path, "value": value}])).unwrap_err();
            assert_eq!(error.scim_type, Some(ScimType::InvalidPath), "{path}");
        }
    }

    /// Okta deactivates a user with a path-less replace.
    #[test]
    fn okta_deactivates_a_user() {
        let body = json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "replace", "value": {"active": false}}]
        });
        let user = Patch::parse(&body).unwrap().apply_to_user(&ada()).unwrap();
        assert_eq!(
            user,
            UserAttributes {
                active: false,
                ..ada()
            }
        );
    }

    /// Entra ID disables a user, with `Replace` and the string `"False"`.
    #[test]
    fn entra_disables_a_user() {
        let body = json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "Replace", "path": "active", "value": "False"}]
        });
        let user = Patch::parse(&body).unwrap().apply_to_user(&ada()).unwrap();
        assert!(!user.active);
        let user = patch(json!([{"op": "Replace", "path": "active", "value": "True"}]))
            .apply_to_user(&user)
            .unwrap();
        assert!(user.active);
    }

    /// Entra ID's "Update User [Multi-valued properties]" and "[Single-valued properties]".
    #[test]
    fn entra_updates_a_user() {
        let mut without_work = ada();
        without_work.emails.retain(|email| {
            email
                .kind
                .as_ref()
                .is_some_and(|kind| kind.as_str() != "work")
        });
        let body = json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [
                {"op": "Add", "path": "emails[type eq \"work\"].value", "value": "x@y.test"},
                {"op": "Replace", "path": "name.givenName", "value": "Ada"},
                {"op": "Replace", "path": "name.familyName", "value": "Byron"},
                {"op": "Add", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department", "value": "Maths"},
                {"op": "Add", "path": "title", "value": "Countess"},
                {"op": "Replace", "path": "phoneNumbers[type eq \"work\"].value", "value": "+1 555"}
            ]
        });
        let user = Patch::parse(&body)
            .unwrap()
            .apply_to_user(&without_work)
            .unwrap();
        assert_eq!(
            user.emails,
            vec![
                DirectoryEmail {
                    value: t("ada@home.test"),
                    kind: Some(t("home")),
                    primary: false
                },
                DirectoryEmail {
                    value: t("x@y.test"),
                    kind: Some(t("work")),
                    primary: false
                },
            ]
        );
        assert_eq!(user.name.given_name, Some(t("Ada")));
        assert_eq!(user.name.family_name, Some(t("Byron")));
        assert_eq!(user.name.formatted, Some(t("Ada King")));

        // With a work address there, the same operation replaces its value.
        let user = patch(
            json!([{"op": "Add", "path": "emails[type eq \"work\"].value", "value": "x@y.test"}]),
        )
        .apply_to_user(&ada())
        .unwrap();
        assert_eq!(user.emails[0].value, t("x@y.test"));
        assert!(user.emails[0].primary);
        assert_eq!(user.emails[1], ada().emails[1]);
    }

    /// Entra ID sends a path-less add whose value has dotted keys.
    #[test]
    fn dotted_keys_in_a_path_less_value_are_paths() {
        let user = patch_user(json!([{
            "op": "add",
            "value": {
                "displayName": "Countess",
                "name.givenName": "Augusta",
                "urn:ietf:params:scim:schemas:core:2.0:User:name.familyName": "King",
                "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber": "1",
                "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"department": "Maths"},
                "emails[type eq \"work\"].value": "augusta@acme.test",
                "id": "ignored",
                "meta": {"version": "ignored"}
            }
        }]))
        .unwrap();
        assert_eq!(user.display_name, Some(t("Countess")));
        assert_eq!(user.name.given_name, Some(t("Augusta")));
        assert_eq!(user.name.family_name, Some(t("King")));
        assert_eq!(user.emails[0].value, t("augusta@acme.test"));
        assert_eq!(user.user_name, ada().user_name);
    }

    #[test]
    fn simple_paths_without_case_and_fully_qualified() {
        let user = patch_user(json!([
            {"op": "replace", "path": "USERNAME", "value": "augusta@acme.test"},
            {"op": "replace", "path": "urn:ietf:params:scim:schemas:core:2.0:User:externalId", "value": "00u-2"},
            {"op": "remove", "path": "displayName"},
            {"op": "replace", "path": "name.Formatted", "value": "Augusta Ada King"},
            {"op": "remove", "path": "name.familyName"},
        ]))
        .unwrap();
        assert_eq!(user.user_name, t("augusta@acme.test"));
        assert_eq!(user.external_id, Some(t("00u-2")));
        assert_eq!(user.display_name, None);
        assert_eq!(
            user.name,
            DirectoryName {
                formatted: Some(t("Augusta Ada King")),
                given_name: Some(t("Ada")),
                family_name: None
            }
        );
        let user = patch_user(json!([{"op": "remove", "path": "name"}])).unwrap();
        assert!(user.name.is_empty());
        let user = patch_user(json!([{"op": "replace", "path": "name", "value": {"givenName": "Augusta", "middleName": "x"}}])).unwrap();
        assert_eq!(user.name.given_name, Some(t("Augusta")));
        assert_eq!(user.name.family_name, Some(t("Lovelace")));
        // A path naming the schema itself is the resource.
        let user = patch_user(json!([{"op": "replace", "path": "urn:ietf:params:scim:schemas:core:2.0:User", "value": {"active": false}}])).unwrap();
        assert!(!user.active);
    }

    #[test]
    fn the_result_must_still_be_a_valid_user() {
        for operations in [
            json!([{"op": "remove", "path": "userName"}]),
            json!([{"op": "remove", "path": "active"}]),
            json!([{"op": "replace", "path": "active", "value": null}]),
            json!([{"op": "replace", "value": {"active": null}}]),
            json!([{"op": "replace", "path": "userName", "value": ""}]),
            json!([{"op": "replace", "path": "active", "value": "maybe"}]),
            json!([{"op": "replace", "path": "name", "value": "Ada"}]),
            json!([{"op": "replace", "path": "displayName", "value": "a\u{0}b"}]),
        ] {
            let error = patch_user(operations.clone()).unwrap_err();
            assert_eq!(
                error.scim_type,
                Some(ScimType::InvalidValue),
                "{operations}"
            );
        }
    }

    #[test]
    fn read_only_and_unknown_attributes_are_ignored() {
        let user = patch_user(json!([
            {"op": "replace", "path": "id", "value": "other"},
            {"op": "replace", "path": "meta.version", "value": "x"},
            {"op": "add", "path": "groups", "value": [{"value": "g"}]},
            {"op": "remove", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager"},
            {"op": "replace", "path": "name.middleName", "value": "x"},
            {"op": "replace", "path": "emails[type eq \"work\"].display", "value": "x"},
            {"op": "replace", "path": "urn:ietf:params:scim:schemas:core:2.0:Group:displayName", "value": "x"},
        ]))
        .unwrap();
        assert_eq!(user, ada());
    }

    #[test]
    fn a_path_less_remove_has_no_target_and_a_path_less_value_is_an_object() {
        let error = patch_user(json!([{"op": "remove"}])).unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::NoTarget));
        let error = patch_user(json!([{"op": "replace", "value": false}])).unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidValue));
    }

    #[test]
    fn emails_add_append_and_replace_replaces() {
        let user = patch_user(json!([{"op": "add", "path": "emails", "value": [{"value": "a@x.test", "type": "other"}]}])).unwrap();
        assert_eq!(user.emails.len(), 3);
        assert_eq!(user.emails[2].value, t("a@x.test"));
        // Adding a value already there changes nothing.
        let again = json!([{"op": "add", "path": "emails", "value": [{"value": "ADA@acme.test", "type": "work", "primary": true}]}]);
        assert_eq!(patch_user(again).unwrap().emails, ada().emails);

        let user = patch_user(json!([{"op": "replace", "path": "emails", "value": [{"value": "a@x.test", "primary": true}]}])).unwrap();
        assert_eq!(
            user.emails,
            vec![DirectoryEmail {
                value: t("a@x.test"),
                kind: None,
                primary: true
            }]
        );
        let user = patch_user(json!([{"op": "remove", "path": "emails"}])).unwrap();
        assert!(user.emails.is_empty());
        let user =
            patch_user(json!([{"op": "remove", "path": "emails[type eq \"home\"]"}])).unwrap();
        assert_eq!(user.emails, ada().emails[..1]);
        let user = patch_user(
            json!([{"op": "remove", "path": "emails", "value": [{"value": "ada@home.test"}]}]),
        )
        .unwrap();
        assert_eq!(user.emails, ada().emails[..1]);
    }

    #[test]
    fn a_new_primary_address_makes_the_others_not_primary() {
        let user = patch_user(json!([{"op": "add", "path": "emails", "value": [{"value": "a@x.test", "primary": true}]}])).unwrap();
        let primaries: Vec<_> = user
            .emails
            .iter()
            .filter(|email| email.primary)
            .map(|email| email.value.as_str())
            .collect();
        assert_eq!(primaries, ["a@x.test"]);
        let user = patch_user(
            json!([{"op": "replace", "path": "emails[type eq \"home\"].primary", "value": true}]),
        )
        .unwrap();
        let primaries: Vec<_> = user
            .emails
            .iter()
            .filter(|email| email.primary)
            .map(|email| email.value.as_str())
            .collect();
        assert_eq!(primaries, ["ada@home.test"]);
        let user = patch_user(
            json!([{"op": "add", "path": "emails[primary eq true].value", "value": "p@x.test"}]),
        )
        .unwrap();
        assert_eq!(user.emails[0].value, t("p@x.test"));
    }

    #[test]
    fn a_filter_matching_nothing_is_no_target_unless_a_value_can_be_made() {
        for operation in [
            json!({"op": "remove", "path": "emails[type eq \"other\"]"}),
            json!({"op": "remove", "path": "emails[type eq \"other\"].value"}),
            json!({"op": "replace", "path": "emails[value co \"nowhere\"].value", "value": "x@y.test"}),
            json!({"op": "add", "path": "emails[type eq \"other\" or type eq \"x\"].value", "value": "x@y.test"}),
        ] {
            let error = patch_user(json!([operation])).unwrap_err();
            assert_eq!(error.scim_type, Some(ScimType::NoTarget), "{operation}");
        }
        let user = patch_user(json!([{"op": "replace", "path": "emails[type eq \"other\"]", "value": {"value": "o@x.test"}}])).unwrap();
        assert_eq!(
            user.emails[2],
            DirectoryEmail {
                value: t("o@x.test"),
                kind: Some(t("other")),
                primary: false
            }
        );
    }

    #[test]
    fn filtered_values_are_replaced_merged_or_stripped() {
        let user = patch_user(json!([{"op": "replace", "path": "emails[type eq \"home\"]", "value": {"value": "new@home.test"}}])).unwrap();
        assert_eq!(
            user.emails[1],
            DirectoryEmail {
                value: t("new@home.test"),
                kind: None,
                primary: false
            }
        );
        let user = patch_user(json!([{"op": "add", "path": "emails[type eq \"home\"]", "value": {"value": "new@home.test"}}])).unwrap();
        assert_eq!(
            user.emails[1],
            DirectoryEmail {
                value: t("new@home.test"),
                kind: Some(t("home")),
                primary: false
            }
        );
        let user =
            patch_user(json!([{"op": "remove", "path": "emails[type eq \"home\"].type"}])).unwrap();
        assert_eq!(user.emails[1].kind, None);
        // Removing an address's value leaves no address.
        let user = patch_user(json!([{"op": "remove", "path": "emails[type eq \"home\"].value"}]))
            .unwrap();
        assert_eq!(user.emails, ada().emails[..1]);
        let user = patch_user(json!([{"op": "replace", "path": "emails.type", "value": "other"}]))
            .unwrap();
        assert!(user
            .emails
            .iter()
            .all(|email| email.kind == Some(t("other"))));
    }

    /// Okta's group operations: add members, remove one by a filtered path, rename.
    #[test]
    fn okta_patches_a_group() {
        let add = json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{
                "op": "add",
                "path": "members",
                "value": [{"value": id(3), "display": "test.user@okta.local"}, {"value": id(1), "display": "dup"}]
            }]
        });
        let group = Patch::parse(&add)
            .unwrap()
            .apply_to_group(&engineering())
            .unwrap();
        assert_eq!(group.members, vec![user_id(1), user_id(2), user_id(3)]);

        let remove = json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "remove", "path": format!("members[value eq \"{}\"]", id(2))}]
        });
        let group = Patch::parse(&remove)
            .unwrap()
            .apply_to_group(&group)
            .unwrap();
        assert_eq!(group.members, vec![user_id(1), user_id(3)]);
        let error = Patch::parse(&remove)
            .unwrap()
            .apply_to_group(&group)
            .unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::NoTarget));

        let rename = json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "replace", "value": {"id": "abf4dd94-a4c0-4f67-89c9-76b03340cb9b", "displayName": "Test SCIMv2"}}]
        });
        let group = Patch::parse(&rename)
            .unwrap()
            .apply_to_group(&group)
            .unwrap();
        assert_eq!(group.display_name, t("Test SCIMv2"));
        assert_eq!(group.members, vec![user_id(1), user_id(3)]);
    }

    /// Entra ID's "Update Group [Add Members]" and "[Remove Members]".
    #[test]
    fn entra_patches_a_group() {
        let add = json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "Add", "path": "members", "value": [{"$ref": null, "value": id(3)}]}]
        });
        let group = Patch::parse(&add)
            .unwrap()
            .apply_to_group(&engineering())
            .unwrap();
        assert_eq!(group.members, vec![user_id(1), user_id(2), user_id(3)]);

        let remove = json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "Remove", "path": "members", "value": [{"$ref": null, "value": id(1)}]}]
        });
        let group = Patch::parse(&remove)
            .unwrap()
            .apply_to_group(&group)
            .unwrap();
        assert_eq!(group.members, vec![user_id(2), user_id(3)]);
        // Removing someone who is not a member changes nothing.
        let group = Patch::parse(&remove)
            .unwrap()
            .apply_to_group(&group)
            .unwrap();
        assert_eq!(group.members, vec![user_id(2), user_id(3)]);

        let rename = json!([{"op": "Replace", "path": "displayName", "value": "1879db59-3bdf-4490-ad68-ab880a269474updatedDisplayName"}]);
        let group = patch(rename).apply_to_group(&group).unwrap();
        assert_eq!(
            group.display_name.as_str(),
            "1879db59-3bdf-4490-ad68-ab880a269474updatedDisplayName"
        );
    }

    #[test]
    fn members_are_replaced_removed_all_or_refused_when_not_users() {
        let group =
            patch(json!([{"op": "replace", "path": "members", "value": [{"value": id(9)}]}]))
                .apply_to_group(&engineering())
                .unwrap();
        assert_eq!(group.members, vec![user_id(9)]);
        let group = patch(json!([{"op": "remove", "path": "members"}]))
            .apply_to_group(&engineering())
            .unwrap();
        assert!(group.members.is_empty());
        let group = patch(json!([{"op": "replace", "value": {"members": []}}]))
            .apply_to_group(&engineering())
            .unwrap();
        assert!(group.members.is_empty());
        let error =
            patch(json!([{"op": "add", "path": "members", "value": [{"value": "not-a-uuid"}]}]))
                .apply_to_group(&engineering())
                .unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidValue));
        let error = patch(json!([{"op": "remove", "path": "displayName"}]))
            .apply_to_group(&engineering())
            .unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidValue));
        // Filters on members compare their ids as written; UUIDs are lowercase.
        let group = patch(json!([{"op": "remove", "path": format!("members[value eq \"{}\" or value eq \"{}\"]", id(1), id(2))}])).apply_to_group(&engineering()).unwrap();
        assert!(group.members.is_empty());
        // User attributes are not a group's.
        let group = patch(json!([{"op": "replace", "path": "active", "value": false}]))
            .apply_to_group(&engineering())
            .unwrap();
        assert_eq!(group, engineering());
    }

    #[test]
    fn a_group_stays_within_its_limit() {
        let members: Vec<Value> = (1..=MAX_GROUP_MEMBERS as u128)
            .map(|n| json!({"value": id(n)}))
            .collect();
        let full = patch(json!([{"op": "replace", "path": "members", "value": members}]))
            .apply_to_group(&engineering())
            .unwrap();
        assert_eq!(full.members.len(), MAX_GROUP_MEMBERS);
        let error =
            patch(json!([{"op": "add", "path": "members", "value": [{"value": id(0xfffff)}]}]))
                .apply_to_group(&full)
                .unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidValue));
    }

    #[test]
    fn operations_apply_in_order() {
        let user = patch_user(json!([
            {"op": "replace", "path": "displayName", "value": "One"},
            {"op": "replace", "path": "displayName", "value": "Two"},
            {"op": "remove", "path": "externalId"},
            {"op": "add", "path": "externalId", "value": "Three"},
        ]))
        .unwrap();
        assert_eq!(user.display_name, Some(t("Two")));
        assert_eq!(user.external_id, Some(t("Three")));
    }

    #[test]
    fn a_closing_bracket_inside_quotes_is_text() {
        assert_eq!(closing_bracket(r#"value eq "a]b"] .x"#), Some(14));
        assert_eq!(closing_bracket(r#"value eq "a\"]b"]"#), Some(16));
        assert_eq!(closing_bracket(r#"value eq "a]"#), None);
    }
}
