//! Filters (RFC 7644 §3.4.2.2), parsed by kanidm's grammar ([`scim_proto::filter`]) and
//! evaluated here over a rendered resource's JSON.
//!
//! What the grammar does not do, and is done here before it parses: keywords and operators in
//! any case (`userName EQ "x" OR ...`: the grammar takes them in lowercase only), fully
//! qualified attribute names (`urn:...:User:userName`: the grammar's names have no `:`), `not(`
//! without a space, and white space just inside parentheses and brackets. See [`normalize`].

use std::cmp::Ordering;
use std::str::FromStr;

use gatehouse_domain::model::{DirectoryAttribute, DirectoryFilter, TextMatch};
use scim_proto::filter::{AttrPath, ScimComplexFilter, ScimFilter};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::attr::{self, Kind};
use crate::ScimError;

/// The longest filter accepted, in characters.
pub(crate) const MAX_FILTER_CHARS: usize = 4096;

/// The deepest nesting of parentheses and brackets accepted. The grammar checks its own limit
/// (128) only once it has parsed the nested filter, recursing all the way down first: a filter
/// of thousands of `(` would exhaust the stack before that.
pub(crate) const MAX_NESTING: usize = 32;

/// A parsed filter, such as `userName eq "ada@acme.test"` or
/// `emails[type eq "work" and value co "@acme.test"]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Filter(ScimFilter);

impl Filter {
    /// Parses a filter: operators and `and`, `or`, `not` in any case; attribute names without
    /// case, possibly fully qualified.
    ///
    /// # Errors
    /// `invalidFilter` when it does not parse, is longer than 4096 characters, or nests
    /// parentheses and brackets more than 32 deep.
    pub fn parse(filter: &str) -> Result<Self, ScimError> {
        let normalized = normalize_bounded(filter).map_err(ScimError::invalid_filter)?;
        ScimFilter::from_str(&normalized)
            .map(Self)
            .map_err(|error| ScimError::invalid_filter(format!("invalid filter: {error}")))
    }

    /// Whether the resource (as rendered) matches. Attribute names compare without case; string
    /// values too, but for `id`, `externalId`, `meta.version` and a member's `value` (their
    /// `caseExact` is true). A multi-valued attribute matches when one of its values does, and
    /// `emails` alone means `emails.value`. `gt`, `ge`, `lt` and `le` compare RFC 3339
    /// timestamps as instants, other strings in order of their characters, numbers as numbers.
    pub fn matches(&self, resource: &Value) -> bool {
        matches(&self.0, resource)
    }

    /// The attribute and string of a filter that is one equality (`userName eq "ada"`), as
    /// written (attribute without its URN): what a store may look up first. The resources it
    /// finds must still be checked with [`matches`](Self::matches) (case rules).
    pub fn equality(&self) -> Option<(String, &str)> {
        match &self.0 {
            ScimFilter::Equal(path, Value::String(value)) => Some((path.to_string(), value)),
            _ => None,
        }
    }

    /// The parsed filter, as kanidm's grammar has it.
    pub fn as_scim_filter(&self) -> &ScimFilter {
        &self.0
    }

    /// The filter as the store answers it over users, with the same answers as
    /// [`matches`](Self::matches): `userName`, `externalId`, `displayName`, `emails` (or
    /// `emails.value`) and `id` compared with a string by `eq`, `sw`, `co` (`id`: `eq` only) or
    /// `pr`, combined with `and` and `or`. `None` for any other filter (`not`, `ne`, `ew`, the
    /// orderings, other attributes, `emails[...]`): it is matched resource by resource.
    pub fn for_users(&self) -> Option<DirectoryFilter> {
        indexed(&self.0, Kind::User)
    }

    /// The filter as the store answers it over groups, as [`for_users`](Self::for_users):
    /// `displayName`, `externalId` and `id` (a user's `userName` and `emails` are no group's:
    /// none match).
    pub fn for_groups(&self) -> Option<DirectoryFilter> {
        indexed(&self.0, Kind::Group)
    }

    /// Whether the filter reads a group's `members`.
    pub(crate) fn reads_members(&self) -> bool {
        names_members(&self.0)
    }
}

/// What a filter's path names, for the store.
enum Target {
    /// The resource's `id`.
    Id,
    /// A text attribute the store keeps a key of.
    Text(DirectoryAttribute),
    /// An attribute the resource type does not have: nothing has a value.
    Absent,
}

/// The store's name for the path, if it keeps one.
fn target(path: &AttrPath, kind: Kind) -> Option<Target> {
    let (attribute, sub) = split(path);
    let attribute = attribute.to_ascii_lowercase();
    let sub = sub.map(|sub| sub.to_ascii_lowercase());
    let email = matches!(sub.as_deref(), None | Some("value"));
    Some(match (kind, attribute.as_str(), sub.is_none()) {
        (_, "id", true) => Target::Id,
        (_, "externalid", true) => Target::Text(DirectoryAttribute::ExternalId),
        (_, "displayname", true) => Target::Text(DirectoryAttribute::DisplayName),
        (Kind::User, "username", true) => Target::Text(DirectoryAttribute::UserName),
        (Kind::User, "emails", _) if email => Target::Text(DirectoryAttribute::Email),
        (Kind::Group, "username", true) => Target::Absent,
        (Kind::Group, "emails", _) if email => Target::Absent,
        _ => return None,
    })
}

/// The store's filter for `filter` over resources of `kind`, when every part of it is one.
fn indexed(filter: &ScimFilter, kind: Kind) -> Option<DirectoryFilter> {
    let compare = |path: &AttrPath, how: TextMatch, operand: &Value| {
        let target = target(path, kind)?;
        // Every attribute here holds strings: no other operand equals, starts or holds one.
        let Value::String(text) = operand else {
            return Some(DirectoryFilter::Nothing);
        };
        match target {
            Target::Absent => Some(DirectoryFilter::Nothing),
            Target::Id if how == TextMatch::Equals => Some(DirectoryFilter::id(text)),
            Target::Id => None,
            Target::Text(attribute) => Some(DirectoryFilter::compare(attribute, how, text)),
        }
    };
    match filter {
        ScimFilter::And(a, b) => Some(indexed(a, kind)?.and(indexed(b, kind)?)),
        ScimFilter::Or(a, b) => Some(indexed(a, kind)?.or(indexed(b, kind)?)),
        ScimFilter::Present(path) => Some(match target(path, kind)? {
            Target::Id => DirectoryFilter::All,
            Target::Text(attribute) => DirectoryFilter::Present(attribute),
            Target::Absent => DirectoryFilter::Nothing,
        }),
        ScimFilter::Equal(path, operand) => compare(path, TextMatch::Equals, operand),
        ScimFilter::StartsWith(path, operand) => compare(path, TextMatch::StartsWith, operand),
        ScimFilter::Contains(path, operand) => compare(path, TextMatch::Contains, operand),
        _ => None,
    }
}

/// Whether a path of the filter names `members`.
fn names_members(filter: &ScimFilter) -> bool {
    let members = |path: &AttrPath| split(path).0.eq_ignore_ascii_case("members");
    match filter {
        ScimFilter::Or(a, b) | ScimFilter::And(a, b) => names_members(a) || names_members(b),
        ScimFilter::Not(a) => names_members(a),
        ScimFilter::Present(path)
        | ScimFilter::Equal(path, _)
        | ScimFilter::NotEqual(path, _)
        | ScimFilter::Contains(path, _)
        | ScimFilter::StartsWith(path, _)
        | ScimFilter::EndsWith(path, _)
        | ScimFilter::Greater(path, _)
        | ScimFilter::GreaterOrEqual(path, _)
        | ScimFilter::Less(path, _)
        | ScimFilter::LessOrEqual(path, _) => members(path),
        ScimFilter::Complex(attribute, _) => attribute.eq_ignore_ascii_case("members"),
    }
}

const KEYWORDS: [&str; 16] = [
    "and", "or", "not", "eq", "ne", "co", "sw", "ew", "gt", "lt", "ge", "le", "pr", "true",
    "false", "null",
];

/// The filter as kanidm's grammar takes it: outside quoted strings, keywords in lowercase,
/// schema URNs taken off attribute names, `not(` spaced, runs of white space made one space,
/// none just inside `(`, `)`, `[`, `]` nor before `[`. Quoted strings are copied as they are.
pub(crate) fn normalize(filter: &str) -> String {
    let mut out = String::with_capacity(filter.len());
    let mut word = String::new();
    let mut space = false;
    let mut chars = filter.trim().chars();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            flush(&mut out, &mut word, &mut space);
            space = true;
            continue;
        }
        if matches!(c, '(' | ')' | '[' | ']') {
            flush(&mut out, &mut word, &mut space);
            let after_opener = out.ends_with('(') || out.ends_with('[');
            let after_not = out == "not" || out.ends_with(" not") || out.ends_with("(not");
            if (space && c == '(' && !after_opener) || (c == '(' && after_not) {
                out.push(' ');
            }
            space = false;
            out.push(c);
            continue;
        }
        if c == '"' {
            flush(&mut out, &mut word, &mut space);
            emit_space(&mut out, &mut space);
            out.push('"');
            let mut escaped = false;
            for c in chars.by_ref() {
                out.push(c);
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    break;
                }
            }
            continue;
        }
        word.push(c);
    }
    flush(&mut out, &mut word, &mut space);
    out
}

/// Writes the pending word: a keyword in lowercase, an attribute without its schema URN.
fn flush(out: &mut String, word: &mut String, space: &mut bool) {
    if word.is_empty() {
        return;
    }
    emit_space(out, space);
    let lower = word.to_ascii_lowercase();
    if KEYWORDS.contains(&lower.as_str()) {
        out.push_str(&lower);
    } else if attr::starts_with_ignore_case(word, "urn:") {
        out.push_str(word.rsplit(':').next().unwrap_or_default());
    } else {
        out.push_str(word);
    }
    word.clear();
}

/// Writes one pending space, unless just after an opening parenthesis or bracket.
fn emit_space(out: &mut String, space: &mut bool) {
    if *space && !out.is_empty() && !out.ends_with('(') && !out.ends_with('[') {
        out.push(' ');
    }
    *space = false;
}

/// [`normalize`], after checking the filter's length and nesting: why not, otherwise.
fn normalize_bounded(filter: &str) -> Result<String, String> {
    if filter.chars().count() > MAX_FILTER_CHARS {
        return Err(format!(
            "a filter has at most {MAX_FILTER_CHARS} characters"
        ));
    }
    let (mut depth, mut deepest, mut quoted, mut escaped) = (0usize, 0usize, false, false);
    for c in filter.chars() {
        if quoted {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                quoted = false;
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '(' | '[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_NESTING {
        return Err(format!(
            "a filter nests parentheses at most {MAX_NESTING} deep"
        ));
    }
    Ok(normalize(filter))
}

/// Parses what is inside a `PATCH` path's brackets (`type eq "work"`), bounded and normalized
/// likewise.
pub(crate) fn parse_value_filter(filter: &str) -> Result<ScimComplexFilter, String> {
    let normalized = normalize_bounded(filter)?;
    ScimComplexFilter::from_str(&normalized).map_err(|error| error.to_string())
}

/// The attribute and sub-attribute of a filter's path (`emails.value`).
fn split(path: &AttrPath) -> (String, Option<String>) {
    let path = path.to_string();
    match path.split_once('.') {
        Some((attribute, sub)) => (attribute.to_owned(), Some(sub.to_owned())),
        None => (path, None),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Co,
    Sw,
    Ew,
    Gt,
    Ge,
    Lt,
    Le,
}

fn matches(filter: &ScimFilter, resource: &Value) -> bool {
    let compare = |path: &AttrPath, op: Op, operand: &Value| {
        let (attribute, sub) = split(path);
        let values = values(resource, &attribute, sub.as_deref());
        compare_any(
            &values,
            op,
            operand,
            attr::case_exact(&attribute, sub.as_deref()),
        )
    };
    match filter {
        ScimFilter::Or(a, b) => matches(a, resource) || matches(b, resource),
        ScimFilter::And(a, b) => matches(a, resource) && matches(b, resource),
        ScimFilter::Not(a) => !matches(a, resource),
        ScimFilter::Present(path) => {
            let (attribute, sub) = split(path);
            match sub {
                None => resource
                    .as_object()
                    .and_then(|object| attr::get(object, &attribute))
                    .is_some_and(present),
                Some(sub) => values(resource, &attribute, Some(&sub))
                    .into_iter()
                    .any(present),
            }
        }
        ScimFilter::Equal(path, operand) => compare(path, Op::Eq, operand),
        ScimFilter::NotEqual(path, operand) => compare(path, Op::Ne, operand),
        ScimFilter::Contains(path, operand) => compare(path, Op::Co, operand),
        ScimFilter::StartsWith(path, operand) => compare(path, Op::Sw, operand),
        ScimFilter::EndsWith(path, operand) => compare(path, Op::Ew, operand),
        ScimFilter::Greater(path, operand) => compare(path, Op::Gt, operand),
        ScimFilter::GreaterOrEqual(path, operand) => compare(path, Op::Ge, operand),
        ScimFilter::Less(path, operand) => compare(path, Op::Lt, operand),
        ScimFilter::LessOrEqual(path, operand) => compare(path, Op::Le, operand),
        ScimFilter::Complex(attribute, filter) => resource
            .as_object()
            .and_then(|object| attr::get(object, attribute))
            .is_some_and(|value| {
                elements(value).any(|element| matches_value(filter, attribute, element))
            }),
    }
}

/// Whether one value of the multi-valued (or complex) `attribute` matches a value filter
/// (`type eq "work"`, the inside of `emails[...]`).
pub(crate) fn matches_value(filter: &ScimComplexFilter, attribute: &str, element: &Value) -> bool {
    let compare = |sub: &str, op: Op, operand: &Value| {
        let values = element
            .as_object()
            .and_then(|object| attr::get(object, sub))
            .map(|value| elements(value).collect::<Vec<_>>())
            .unwrap_or_default();
        compare_any(&values, op, operand, attr::case_exact(attribute, Some(sub)))
    };
    match filter {
        ScimComplexFilter::Or(a, b) => {
            matches_value(a, attribute, element) || matches_value(b, attribute, element)
        }
        ScimComplexFilter::And(a, b) => {
            matches_value(a, attribute, element) && matches_value(b, attribute, element)
        }
        ScimComplexFilter::Not(a) => !matches_value(a, attribute, element),
        ScimComplexFilter::Present(sub) => element
            .as_object()
            .and_then(|object| attr::get(object, sub))
            .is_some_and(present),
        ScimComplexFilter::Equal(sub, operand) => compare(sub, Op::Eq, operand),
        ScimComplexFilter::NotEqual(sub, operand) => compare(sub, Op::Ne, operand),
        ScimComplexFilter::Contains(sub, operand) => compare(sub, Op::Co, operand),
        ScimComplexFilter::StartsWith(sub, operand) => compare(sub, Op::Sw, operand),
        ScimComplexFilter::EndsWith(sub, operand) => compare(sub, Op::Ew, operand),
        ScimComplexFilter::Greater(sub, operand) => compare(sub, Op::Gt, operand),
        ScimComplexFilter::GreaterOrEqual(sub, operand) => compare(sub, Op::Ge, operand),
        ScimComplexFilter::Less(sub, operand) => compare(sub, Op::Lt, operand),
        ScimComplexFilter::LessOrEqual(sub, operand) => compare(sub, Op::Le, operand),
    }
}

/// A value's elements: each of an array's, or the value itself.
fn elements(value: &Value) -> impl Iterator<Item = &Value> {
    let (many, one) = match value {
        Value::Array(values) => (values.as_slice(), None),
        other => (&[][..], Some(other)),
    };
    many.iter().chain(one)
}

/// The values a filter's path selects in the resource: `emails.value` is each address's value;
/// `emails` alone is the same (a multi-valued attribute's `value`); `meta.created` the one.
fn values<'a>(resource: &'a Value, attribute: &str, sub: Option<&str>) -> Vec<&'a Value> {
    let Some(value) = resource
        .as_object()
        .and_then(|object| attr::get(object, attribute))
    else {
        return Vec::new();
    };
    match (value, sub) {
        (Value::Array(entries), sub) => entries
            .iter()
            .flat_map(|entry| match entry {
                Value::Object(object) => attr::get(object, sub.unwrap_or("value"))
                    .map(|value| elements(value).collect())
                    .unwrap_or_default(),
                other if sub.is_none() => vec![other],
                _ => Vec::new(),
            })
            .collect(),
        (Value::Object(object), Some(sub)) => attr::get(object, sub)
            .map(|value| elements(value).collect())
            .unwrap_or_default(),
        (Value::Object(_), None) => Vec::new(),
        (other, None) => vec![other],
        (_, Some(_)) => Vec::new(),
    }
}

/// Whether a value is there: not `null`, nor an empty string, array or object.
fn present(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(text) => !text.is_empty(),
        Value::Array(values) => values.iter().any(present),
        Value::Object(object) => !object.is_empty(),
        Value::Bool(_) | Value::Number(_) => true,
    }
}

/// Whether one of the values compares so with the operand; `ne` is "none is equal" (so an
/// attribute without a value is `ne` anything).
fn compare_any(values: &[&Value], op: Op, operand: &Value, case_exact: bool) -> bool {
    if op == Op::Ne {
        return !values
            .iter()
            .any(|value| compare(value, Op::Eq, operand, case_exact));
    }
    values
        .iter()
        .any(|value| compare(value, op, operand, case_exact))
}

fn compare(value: &Value, op: Op, operand: &Value, case_exact: bool) -> bool {
    match (value, operand) {
        (Value::String(value), Value::String(operand)) => {
            let fold = |text: &str| {
                if case_exact {
                    text.to_owned()
                } else {
                    text.to_lowercase()
                }
            };
            let (value_folded, operand_folded) = (fold(value), fold(operand));
            match op {
                Op::Eq | Op::Ne => value_folded == operand_folded,
                Op::Co => value_folded.contains(&operand_folded),
                Op::Sw => value_folded.starts_with(&operand_folded),
                Op::Ew => value_folded.ends_with(&operand_folded),
                Op::Gt | Op::Ge | Op::Lt | Op::Le => {
                    let instants = OffsetDateTime::parse(value, &Rfc3339)
                        .and_then(|a| OffsetDateTime::parse(operand, &Rfc3339).map(|b| (a, b)));
                    let ordering = match instants {
                        Ok((a, b)) => a.cmp(&b),
                        Err(_) => value_folded.cmp(&operand_folded),
                    };
                    ordered(ordering, op)
                }
            }
        }
        (Value::Bool(value), Value::Bool(operand)) => {
            matches!(op, Op::Eq | Op::Ne) && value == operand
        }
        (Value::Number(value), Value::Number(operand)) => {
            match (value.as_f64(), operand.as_f64()) {
                (Some(a), Some(b)) => match op {
                    Op::Eq | Op::Ne => a == b,
                    Op::Gt | Op::Ge | Op::Lt | Op::Le => a
                        .partial_cmp(&b)
                        .is_some_and(|ordering| ordered(ordering, op)),
                    Op::Co | Op::Sw | Op::Ew => false,
                },
                _ => false,
            }
        }
        _ => false,
    }
}

fn ordered(ordering: Ordering, op: Op) -> bool {
    match op {
        Op::Gt => ordering == Ordering::Greater,
        Op::Ge => ordering != Ordering::Less,
        Op::Lt => ordering == Ordering::Less,
        Op::Le => ordering != Ordering::Greater,
        Op::Eq | Op::Ne | Op::Co | Op::Sw | Op::Ew => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::tests::{ada, directory_user, BASE};
    use crate::{Resources, ScimType};
    use serde_json::json;

    fn user() -> Value {
        let mut attributes = ada();
        attributes.user_name =
            gatehouse_domain::model::DirectoryText::parse("Ada@Acme.test").unwrap();
        attributes.external_id =
            Some(gatehouse_domain::model::DirectoryText::parse("X-1").unwrap());
        Resources::new(BASE).user(&directory_user(attributes))
    }

    fn matches(filter: &str) -> bool {
        Filter::parse(filter).unwrap().matches(&user())
    }

    #[test]
    fn normalize_lowercases_keywords_outside_quotes_only() {
        assert_eq!(
            normalize(r#"userName EQ "A AND B""#),
            r#"userName eq "A AND B""#
        );
        assert_eq!(
            normalize(r#"  title PR  AND  (userType Eq "Employee"  OR Active eq TRUE) "#),
            r#"title pr and (userType eq "Employee" or Active eq true)"#
        );
        assert_eq!(normalize(r#"NOT(x eq "y")"#), r#"not (x eq "y")"#);
        assert_eq!(normalize(r#"not( x eq "y" )"#), r#"not (x eq "y")"#);
        assert_eq!(
            normalize(r#"emails [ type eq "work" ]"#),
            r#"emails[type eq "work"]"#
        );
        assert_eq!(
            normalize(r#"urn:ietf:params:scim:schemas:core:2.0:User:name.givenName Sw "a\"OR""#),
            r#"name.givenName sw "a\"OR""#
        );
        assert_eq!(
            normalize(r#"a eq "unterminated OR"#),
            r#"a eq "unterminated OR"#
        );
        assert_eq!(normalize("x eq 1 and (y lt 2)"), "x eq 1 and (y lt 2)");
        assert_eq!(normalize(""), "");
    }

    #[test]
    fn equality_ignores_case_but_for_case_exact_attributes() {
        assert!(matches(r#"userName eq "ada@acme.test""#));
        assert!(matches(r#"USERNAME eq "ADA@ACME.TEST""#));
        assert!(matches(r#"externalId eq "X-1""#));
        assert!(!matches(r#"externalId eq "x-1""#));
        assert!(matches(r#"id eq "00000000-0000-0000-0000-000000000ada""#));
        assert!(!matches(r#"id eq "00000000-0000-0000-0000-000000000ADA""#));
        assert!(matches(r#"meta.version eq "W/\"1795692600500000000\"""#));
        assert!(matches(
            r#"urn:ietf:params:scim:schemas:core:2.0:User:userName eq "ada@acme.test""#
        ));
    }

    #[test]
    fn operators_and_keywords_work_in_any_case() {
        assert!(matches(r#"userName EQ "x" OR userName eq "ada@acme.test""#));
        assert!(!matches(r#"userName eq "x" Or userName Eq "y""#));
        assert!(matches(r#"displayName sw "a" and active eq true"#));
        assert!(matches(r#"displayName SW "A" AND active EQ TRUE"#));
        assert!(!matches(r#"displayName sw "a" and active eq false"#));
        assert!(matches(r#"NOT (active eq false)"#));
        assert!(matches(r#"not(userName eq "x")"#));
        assert!(matches(
            r#"(userName eq "x" or displayName ew "lace") and active pr"#
        ));
    }

    #[test]
    fn multi_valued_attributes_match_when_one_value_does() {
        assert!(matches(r#"emails.value co "acme""#));
        assert!(matches(r#"emails co "home.test""#));
        assert!(matches(r#"emails eq "ADA@HOME.TEST""#));
        assert!(!matches(r#"emails.value co "example""#));
        assert!(matches(r#"emails[type eq "work"]"#));
        assert!(matches(r#"emails[type eq "work" and value co "@acme"]"#));
        assert!(!matches(r#"emails[type eq "home" and value co "@acme"]"#));
        assert!(matches(r#"emails[primary eq true and type eq "WORK"]"#));
        assert!(matches(r#"emails[not (type eq "work")]"#));
        assert!(matches(r#"emails.type eq "home""#));
        assert!(matches(
            r#"name.givenName eq "ada" and name.familyName sw "Love""#
        ));
    }

    #[test]
    fn presence_and_not_equal() {
        assert!(matches("emails pr"));
        assert!(matches("name pr"));
        assert!(matches("name.formatted pr"));
        assert!(!matches("nickName pr"));
        assert!(!matches("name.middleName pr"));
        assert!(matches(r#"nickName ne "x""#));
        assert!(matches(r#"userName ne "x""#));
        assert!(!matches(r#"userName ne "ADA@acme.test""#));
        assert!(matches(r#"emails[value pr]"#));
    }

    #[test]
    fn timestamps_compare_as_instants() {
        assert!(matches(r#"meta.lastModified gt "2026-11-26T11:30:00Z""#));
        assert!(matches(r#"meta.lastModified lt "2026-11-26T11:30:01Z""#));
        assert!(matches(r#"meta.created ge "2026-11-25T10:00:00Z""#));
        assert!(matches(r#"meta.created le "2026-11-25T11:00:00+01:00""#));
        assert!(!matches(r#"meta.created gt "2026-11-25T10:00:00Z""#));
        assert!(matches(r#"userName gt "ADA""#));
        assert!(!matches(r#"active gt false"#));
    }

    #[test]
    fn numbers_compare_as_numbers() {
        let resource = json!({"count": 10});
        let check = |filter: &str| Filter::parse(filter).unwrap().matches(&resource);
        assert!(check("count gt 9"));
        assert!(check("count eq 10.0"));
        assert!(!check("count lt 10"));
        assert!(!check(r#"count eq "10""#));
    }

    #[test]
    fn a_bad_filter_is_an_invalid_filter() {
        for bad in [
            "",
            "userName",
            r#"userName eq"#,
            r#"userName eq "x" and"#,
            r#"userName is "x""#,
            r#"userName eq x"#,
            r#"emails[type eq "work""#,
            r#"(userName eq "x""#,
        ] {
            let error = Filter::parse(bad).unwrap_err();
            assert_eq!(error.scim_type, Some(ScimType::InvalidFilter), "{bad}");
            assert_eq!(error.status, 400);
        }
        let long = format!(r#"userName eq "{}""#, "x".repeat(MAX_FILTER_CHARS));
        assert_eq!(
            Filter::parse(&long).unwrap_err().scim_type,
            Some(ScimType::InvalidFilter)
        );
    }

    #[test]
    fn a_long_chain_of_ors_parses_and_evaluates() {
        let chain = vec![r#"userName eq "x""#; 200].join(" or ");
        let filter = Filter::parse(&format!(r#"{chain} or userName eq "ada@acme.test""#)).unwrap();
        assert!(filter.matches(&user()));
        // The longest filter accepted, a chain of ~500 operators, on a test thread's stack.
        let longest = format!(
            "{}active pr",
            "nickName pr or ".repeat((MAX_FILTER_CHARS - 9) / 15)
        );
        assert!(longest.len() <= MAX_FILTER_CHARS);
        assert!(Filter::parse(&longest).unwrap().matches(&user()));
        let nested = |depth: usize| {
            format!(
                "{}userName eq \"x\"{}",
                "(".repeat(depth),
                ")".repeat(depth)
            )
        };
        assert!(Filter::parse(&nested(MAX_NESTING)).is_ok());
        for depth in [MAX_NESTING + 1, 2000] {
            let error = Filter::parse(&nested(depth)).unwrap_err();
            assert_eq!(error.scim_type, Some(ScimType::InvalidFilter));
        }
        // Parentheses inside a quoted string are text.
        let quoted = format!("userName eq \"{}\"", "(".repeat(100));
        assert!(Filter::parse(&quoted).is_ok());
    }

    #[test]
    fn a_single_equality_is_exposed_for_lookups() {
        let filter = Filter::parse(r#"UserName Eq "Ada""#).unwrap();
        assert_eq!(filter.equality(), Some(("UserName".to_owned(), "Ada")));
        let filter =
            Filter::parse(r#"urn:ietf:params:scim:schemas:core:2.0:User:externalId eq "1""#)
                .unwrap();
        assert_eq!(filter.equality(), Some(("externalId".to_owned(), "1")));
        assert_eq!(
            Filter::parse(r#"a eq "1" or b eq "2""#).unwrap().equality(),
            None
        );
        assert_eq!(Filter::parse("active eq true").unwrap().equality(), None);
    }

    mod store_filters {
        use gatehouse_domain::model::{
            DirectoryAttribute::{self, DisplayName, Email, ExternalId, UserName},
            DirectoryFilter, DirectoryGroup, DirectoryUser, GroupAttributes, TextMatch,
            UserAttributes,
        };

        use super::super::Filter;
        use crate::resource::tests::{ada, directory_group, directory_user, t, user_id, BASE};
        use crate::Resources;

        fn users(filter: &str) -> Option<DirectoryFilter> {
            Filter::parse(filter).unwrap().for_users()
        }

        fn groups(filter: &str) -> Option<DirectoryFilter> {
            Filter::parse(filter).unwrap().for_groups()
        }

        fn cmp(attribute: DirectoryAttribute, how: TextMatch, text: &str) -> DirectoryFilter {
            DirectoryFilter::compare(attribute, how, text)
        }

        #[test]
        fn the_indexed_attributes_and_operators_become_the_stores_filter() {
            use TextMatch::{Contains, Equals, StartsWith};
            assert_eq!(
                users(r#"userName eq "Ada@Acme.test""#),
                Some(cmp(UserName, Equals, "ada@acme.test"))
            );
            assert_eq!(
                users(r#"urn:ietf:params:scim:schemas:core:2.0:User:USERNAME EQ "a""#),
                Some(cmp(UserName, Equals, "a"))
            );
            assert_eq!(
                users(r#"externalId sw "00U""#),
                Some(cmp(ExternalId, StartsWith, "00U"))
            );
            assert_eq!(
                users(r#"emails co "@Acme""#),
                Some(cmp(Email, Contains, "@acme"))
            );
            assert_eq!(
                users(r#"emails.VALUE eq "a@b""#),
                Some(cmp(Email, Equals, "a@b"))
            );
            assert_eq!(users("emails pr"), Some(DirectoryFilter::Present(Email)));
            assert_eq!(
                users("displayName pr"),
                Some(DirectoryFilter::Present(DisplayName))
            );
            assert_eq!(users("id pr"), Some(DirectoryFilter::All));
            let id = user_id(0xada).to_string();
            assert_eq!(
                users(&format!(r#"id eq "{id}""#)),
                Some(DirectoryFilter::id(&id))
            );
            assert_eq!(
                users(&format!(r#"id eq "{}""#, id.to_uppercase())),
                Some(DirectoryFilter::Nothing)
            );
            assert_eq!(
                users(r#"externalId eq "X" and (userName sw "A" or displayName co "B")"#),
                Some(
                    cmp(ExternalId, Equals, "X").and(cmp(UserName, StartsWith, "a").or(cmp(
                        DisplayName,
                        Contains,
                        "b"
                    )))
                )
            );
            // No string is equal to a number, true or null.
            assert_eq!(users("userName eq true"), Some(DirectoryFilter::Nothing));
            assert_eq!(users("displayName eq null"), Some(DirectoryFilter::Nothing));
            // Groups: their own attributes; a user's are nobody's.
            assert_eq!(
                groups(r#"displayName eq "Engineering""#),
                Some(cmp(DisplayName, Equals, "engineering"))
            );
            assert_eq!(groups(r#"userName eq "a""#), Some(DirectoryFilter::Nothing));
            assert_eq!(
                groups(r#"emails co "a" or externalId pr"#),
                Some(DirectoryFilter::Present(ExternalId))
            );
        }

        #[test]
        fn any_other_filter_is_matched_resource_by_resource() {
            for filter in [
                r#"not (userName eq "a")"#,
                r#"userName ne "a""#,
                r#"userName ew "a""#,
                r#"meta.created gt "2026-01-01T00:00:00Z""#,
                r#"emails[type eq "work"]"#,
                r#"emails.type eq "work""#,
                r#"name.givenName eq "Ada""#,
                "active eq true",
                r#"id sw "0""#,
                r#"userName eq "a" and active eq true"#,
                r#"title eq "a""#,
            ] {
                assert_eq!(users(filter), None, "{filter}");
            }
            assert_eq!(groups(r#"members.value eq "a""#), None);
            assert_eq!(groups(r#"members[value eq "a"]"#), None);
            assert!(Filter::parse(r#"members[value eq "a"]"#)
                .unwrap()
                .reads_members());
            assert!(Filter::parse(r#"displayName eq "a" or not (members pr)"#)
                .unwrap()
                .reads_members());
            assert!(!Filter::parse(r#"displayName ew "a""#)
                .unwrap()
                .reads_members());
        }

        /// What the store answers for a filter, as its SQL does, over one user.
        fn selects(filter: &DirectoryFilter, user: &DirectoryUser) -> bool {
            let a = &user.attributes;
            let values = |attribute: DirectoryAttribute| -> Vec<String> {
                let texts: Vec<&str> = match attribute {
                    UserName => vec![a.user_name.as_str()],
                    ExternalId => a.external_id.iter().map(|x| x.as_str()).collect(),
                    DisplayName => a.display_name.iter().map(|x| x.as_str()).collect(),
                    Email => a.emails.iter().map(|e| e.value.as_str()).collect(),
                };
                texts.into_iter().map(|text| attribute.key(text)).collect()
            };
            match filter {
                DirectoryFilter::All => true,
                DirectoryFilter::Nothing => false,
                DirectoryFilter::Id(id) => *id == user.id.as_uuid(),
                DirectoryFilter::Present(attribute) => !values(*attribute).is_empty(),
                DirectoryFilter::Compare(c) => {
                    values(c.attribute()).iter().any(|v| match c.how() {
                        TextMatch::Equals => v == c.operand(),
                        TextMatch::StartsWith => v.starts_with(c.operand()),
                        TextMatch::Contains => v.contains(c.operand()),
                    })
                }
                DirectoryFilter::And(x, y) => selects(x, user) && selects(y, user),
                DirectoryFilter::Or(x, y) => selects(x, user) || selects(y, user),
            }
        }

        fn people() -> Vec<DirectoryUser> {
            let mut bare = UserAttributes {
                user_name: t("ÅSA@Acme.test"),
                external_id: None,
                display_name: None,
                emails: Vec::new(),
                ..ada()
            };
            bare.name = Default::default();
            let mut kelvin = ada();
            kelvin.user_name = t("\u{212A}elvin@acme.test");
            kelvin.display_name = Some(t("Lord \u{212A}elvin"));
            kelvin.external_id = Some(t("00U-kelvin"));
            [ada(), bare, kelvin]
                .into_iter()
                .enumerate()
                .map(|(i, attributes)| DirectoryUser {
                    id: user_id(0xa0 + i as u128),
                    ..directory_user(attributes)
                })
                .collect()
        }

        #[test]
        fn the_store_filter_selects_what_the_filter_matches() {
            let render = Resources::new(BASE);
            let id = user_id(0xa0).to_string();
            let filters = [
                r#"userName eq "ADA@acme.test""#.to_owned(),
                r#"userName eq "åsa@acme.TEST""#.to_owned(),
                r#"userName eq "kelvin@acme.test""#.to_owned(),
                r#"userName sw "K""#.to_owned(),
                r#"userName co "ACME""#.to_owned(),
                r#"userName co """#.to_owned(),
                r#"userName eq """#.to_owned(),
                r#"externalId eq "00u-Ada""#.to_owned(),
                r#"externalId eq "00U-ADA""#.to_owned(),
                r#"externalId sw "00u""#.to_owned(),
                r#"externalId co "Ada""#.to_owned(),
                r#"externalId co "ada""#.to_owned(),
                "externalId pr".to_owned(),
                r#"displayName co "KELVIN""#.to_owned(),
                r#"displayName sw "ada""#.to_owned(),
                "displayName pr".to_owned(),
                r#"emails co "@HOME""#.to_owned(),
                r#"emails.value eq "ada@acme.test""#.to_owned(),
                "emails pr".to_owned(),
                "emails.value pr".to_owned(),
                "userName pr".to_owned(),
                format!(r#"id eq "{id}""#),
                format!(r#"id eq "{}""#, id.to_uppercase()),
                r#"userName eq 3"#.to_owned(),
                r#"(userName sw "a" or userName sw "å") and not_there pr"#.to_owned(),
                r#"(userName sw "a" or displayName co "elvin") and emails pr"#.to_owned(),
            ];
            for filter in &filters {
                let parsed = Filter::parse(filter).unwrap();
                let Some(indexed) = parsed.for_users() else {
                    continue;
                };
                for user in people() {
                    assert_eq!(
                        selects(&indexed, &user),
                        parsed.matches(&render.user(&user)),
                        "{filter} over {}",
                        user.attributes.user_name.as_str()
                    );
                }
            }
            // Every one of them but the unknown attribute is the store's.
            let answered = filters
                .iter()
                .filter(|filter| Filter::parse(filter).unwrap().for_users().is_some())
                .count();
            assert_eq!(answered, filters.len() - 1);
        }

        #[test]
        fn a_groups_store_filter_selects_what_the_filter_matches() {
            let render = Resources::new(BASE);
            let group: DirectoryGroup = directory_group(GroupAttributes {
                display_name: t("Engineering Ω"),
                external_id: Some(t("G-1")),
                members: vec![user_id(1)],
            });
            for filter in [
                r#"displayName eq "engineering ω""#,
                r#"displayName sw "ENG""#,
                r#"displayName co "x""#,
                r#"externalId eq "g-1""#,
                r#"externalId co "-1""#,
                "externalId pr",
                "displayName pr",
                r#"userName eq "Engineering Ω""#,
                "emails pr",
            ] {
                let parsed = Filter::parse(filter).unwrap();
                let indexed = parsed.for_groups().unwrap();
                let selected = match &indexed {
                    DirectoryFilter::All | DirectoryFilter::Present(DisplayName) => true,
                    DirectoryFilter::Nothing => false,
                    DirectoryFilter::Present(ExternalId) => true,
                    DirectoryFilter::Compare(c) => {
                        let value = c.attribute().key(match c.attribute() {
                            DisplayName => "Engineering Ω",
                            _ => "G-1",
                        });
                        match c.how() {
                            TextMatch::Equals => value == c.operand(),
                            TextMatch::StartsWith => value.starts_with(c.operand()),
                            TextMatch::Contains => value.contains(c.operand()),
                        }
                    }
                    other => panic!("{filter}: {other:?}"),
                };
                assert_eq!(selected, parsed.matches(&render.group(&group)), "{filter}");
            }
        }
    }
}
