//! Listing (`GET /Users`, `GET /Groups`, RFC 7644 §3.4.2): the query's parameters, the list
//! response, and the projection of `attributes` and `excludedAttributes` (§3.4.2.5), which a
//! single resource's `GET` uses too.

use std::sync::Arc;

use gatehouse_domain::{
    model::{
        DirectoryFilter, DirectoryGroup, DirectorySelection, DirectoryUser, DirectoryWindow,
        ResourceCheck,
    },
    ports::GroupMembers,
};
use serde_json::{json, Map, Value};

use crate::attr::{self, Qualified};
use crate::{Filter, Resources, ScimError, DEFAULT_COUNT, LIST_SCHEMA, MAX_RESULTS};

/// A list request's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ListQuery {
    /// `filter`, if any.
    pub filter: Option<Filter>,
    /// `startIndex`: the 1-based index of the first result (1 when less than 1).
    pub start_index: usize,
    /// `count`: how many results at most, [`DEFAULT_COUNT`] unless given, capped at
    /// [`MAX_RESULTS`]; `0` asks for `totalResults` alone.
    pub count: usize,
    /// `attributes`: the attributes to return (with `id` and `schemas`), all when empty.
    pub attributes: Vec<String>,
    /// `excludedAttributes`: the attributes to leave out.
    pub excluded_attributes: Vec<String>,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            filter: None,
            start_index: 1,
            count: DEFAULT_COUNT,
            attributes: Vec::new(),
            excluded_attributes: Vec::new(),
        }
    }
}

impl ListQuery {
    /// The query from a request's query parameters (decoded): `filter`, `startIndex`, `count`,
    /// `attributes` and `excludedAttributes` (comma separated), their names without case; the
    /// last of a repeated one counts, and others (`sortBy`: sorting is not supported) are
    /// ignored. An empty `filter` is none; a negative `count` is 0.
    ///
    /// # Errors
    /// `invalidFilter` for a filter that does not parse; `invalidValue` for a `startIndex` or
    /// `count` that is not an integer.
    pub fn parse(params: &[(String, String)]) -> Result<Self, ScimError> {
        let mut query = Self::default();
        for (name, value) in params {
            if name.eq_ignore_ascii_case("filter") {
                query.filter = if value.trim().is_empty() {
                    None
                } else {
                    Some(Filter::parse(value)?)
                };
            } else if name.eq_ignore_ascii_case("startIndex") {
                let start = integer(value, "startIndex")?;
                query.start_index = usize::try_from(start.max(1)).unwrap_or(usize::MAX);
            } else if name.eq_ignore_ascii_case("count") {
                let count = integer(value, "count")?;
                query.count = usize::try_from(count.max(0))
                    .unwrap_or(usize::MAX)
                    .min(MAX_RESULTS);
            } else if name.eq_ignore_ascii_case("attributes") {
                query.attributes = names(value);
            } else if name.eq_ignore_ascii_case("excludedAttributes") {
                query.excluded_attributes = names(value);
            }
        }
        Ok(query)
    }

    /// The slice asked for: from `startIndex`, at most `count` (capped at [`MAX_RESULTS`]).
    pub fn window(&self) -> DirectoryWindow {
        DirectoryWindow {
            offset: u64::try_from(self.start_index.max(1) - 1).unwrap_or(u64::MAX),
            count: u32::try_from(self.count.min(MAX_RESULTS)).unwrap_or(0),
        }
    }

    /// Which users the query lists: the store's filter where [`Filter::for_users`] gives one,
    /// else each user rendered under `resources` and matched by [`Filter::matches`].
    pub fn users(&self, resources: &Resources) -> DirectorySelection<DirectoryUser> {
        self.selection(Filter::for_users, resources)
    }

    /// Which groups the query lists, as [`users`](Self::users) does.
    pub fn groups(&self, resources: &Resources) -> DirectorySelection<DirectoryGroup> {
        self.selection(Filter::for_groups, resources)
    }

    /// The store's filter that `indexed` gives, else the filter matched resource by resource.
    fn selection<T>(
        &self,
        indexed: impl Fn(&Filter) -> Option<DirectoryFilter>,
        resources: &Resources,
    ) -> DirectorySelection<T>
    where
        Matching: ResourceCheck<T> + 'static,
    {
        let Some(filter) = &self.filter else {
            return DirectorySelection::Filter(DirectoryFilter::All);
        };
        match indexed(filter) {
            Some(indexed) => DirectorySelection::Filter(indexed),
            None => DirectorySelection::Check(Arc::new(Matching {
                filter: filter.clone(),
                resources: resources.clone(),
            })),
        }
    }

    /// Whether the page shows groups' members: not when `attributes` leaves `members` out or
    /// `excludedAttributes` names it (then none are read).
    pub fn group_members(&self) -> GroupMembers {
        let named = |names: &[String], whole: bool| {
            names
                .iter()
                .filter_map(|name| requested(name))
                .any(|(attribute, sub)| attribute == "members" && (!whole || sub.is_none()))
        };
        let wanted = self.attributes.is_empty() || named(&self.attributes, false);
        if wanted && !named(&self.excluded_attributes, true) {
            GroupMembers::Read
        } else {
            GroupMembers::Skipped
        }
    }
}

/// A filter the store cannot answer, matched over each resource as rendered.
struct Matching {
    filter: Filter,
    resources: Resources,
}

impl ResourceCheck<DirectoryUser> for Matching {
    fn accepts(&self, user: &DirectoryUser) -> bool {
        self.filter.matches(&self.resources.user(user))
    }
}

impl ResourceCheck<DirectoryGroup> for Matching {
    fn accepts(&self, group: &DirectoryGroup) -> bool {
        self.filter.matches(&self.resources.group(group))
    }

    fn reads_members(&self) -> bool {
        self.filter.reads_members()
    }
}

fn integer(value: &str, what: &str) -> Result<i64, ScimError> {
    value
        .trim()
        .parse::<i64>()
        .map_err(|_| ScimError::invalid_value(format!("{what} must be an integer")))
}

fn names(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The list response to the query over these resources (rendered, in the order to list them):
/// those matching the filter are counted (`totalResults`), the page from `startIndex` of at
/// most `count` of them returned (`Resources`, always there, empty past the end or for
/// `count=0`), each projected with [`project`].
pub fn list_response(resources: Vec<Value>, query: &ListQuery) -> Value {
    let matching: Vec<Value> = resources
        .into_iter()
        .filter(|resource| {
            query
                .filter
                .as_ref()
                .is_none_or(|filter| filter.matches(resource))
        })
        .collect();
    let total = u64::try_from(matching.len()).unwrap_or(u64::MAX);
    let page: Vec<Value> = matching
        .into_iter()
        .skip(query.start_index.max(1) - 1)
        .take(query.count.min(MAX_RESULTS))
        .collect();
    list_page(page, total, query)
}

/// The list response of a page found already (by the store, in the query's
/// [`window`](ListQuery::window)), rendered, and of how many resources match in all: each
/// resource projected with [`project`].
pub fn list_page(page: Vec<Value>, total: u64, query: &ListQuery) -> Value {
    let page: Vec<Value> = page
        .into_iter()
        .map(|resource| project(resource, &query.attributes, &query.excluded_attributes))
        .collect();
    json!({
        "schemas": [LIST_SCHEMA],
        "totalResults": total,
        "startIndex": query.start_index.max(1),
        "itemsPerPage": page.len(),
        "Resources": page,
    })
}

/// An attribute named in `attributes` or `excludedAttributes`: lowercase, without its core
/// schema's URN. `None` for one in another schema (an extension: nothing Gatehouse keeps) or
/// an empty one.
fn requested(name: &str) -> Option<(String, Option<String>)> {
    let path = match attr::qualified(name.trim()) {
        Qualified::Plain(path) | Qualified::Core(_, path) => path,
        Qualified::Foreign => return None,
    };
    if path.is_empty() {
        return None;
    }
    let path = path.to_ascii_lowercase();
    Some(match path.split_once('.') {
        Some((attribute, sub)) => (attribute.to_owned(), Some(sub.to_owned())),
        None => (path, None),
    })
}

/// Whether `name` is returned whatever is asked: `id` (`returned: always`) and `schemas`.
fn always_returned(name: &str) -> bool {
    name.eq_ignore_ascii_case("id") || name.eq_ignore_ascii_case("schemas")
}

/// The resource with only the `attributes` asked for (when any are), then without the
/// `excludedAttributes` (RFC 7644 §3.4.2.5). `id` and `schemas` are always kept; `meta` is
/// `returned: default`, so kept unless `attributes` leaves it out (or it is excluded). Names are
/// matched without case, may be fully qualified (`urn:...:User:userName`) and may name a
/// sub-attribute (`name.givenName`, `emails.value`: of each value); names in another schema are
/// ignored.
pub fn project(resource: Value, attributes: &[String], excluded: &[String]) -> Value {
    let Value::Object(mut object) = resource else {
        return resource;
    };
    let wanted: Vec<_> = attributes
        .iter()
        .filter_map(|name| requested(name))
        .collect();
    if !attributes.is_empty() {
        object = object
            .into_iter()
            .filter_map(|(key, value)| {
                if always_returned(&key) {
                    return Some((key, value));
                }
                let lower = key.to_ascii_lowercase();
                let asked: Vec<Option<&str>> = wanted
                    .iter()
                    .filter(|(attribute, _)| *attribute == lower)
                    .map(|(_, sub)| sub.as_deref())
                    .collect();
                if asked.is_empty() {
                    return None;
                }
                if asked.contains(&None) {
                    return Some((key, value));
                }
                let subs: Vec<&str> = asked.into_iter().flatten().collect();
                keep_subs(value, &subs).map(|value| (key, value))
            })
            .collect();
    }
    for (attribute, sub) in excluded.iter().filter_map(|name| requested(name)) {
        if always_returned(&attribute) {
            continue;
        }
        match sub {
            None => {
                attr::remove(&mut object, &attribute);
            }
            Some(sub) => {
                let Some(key) = object
                    .keys()
                    .find(|key| key.eq_ignore_ascii_case(&attribute))
                    .cloned()
                else {
                    continue;
                };
                if let Some(value) = object.remove(&key) {
                    if let Some(value) = drop_sub(value, &sub) {
                        object.insert(key, value);
                    }
                }
            }
        }
    }
    Value::Object(object)
}

/// A complex value (or each of a multi-valued attribute's) with only these sub-attributes;
/// `None` when nothing is left.
fn keep_subs(value: Value, subs: &[&str]) -> Option<Value> {
    let keep = |object: Map<String, Value>| {
        let kept: Map<String, Value> = object
            .into_iter()
            .filter(|(key, _)| subs.iter().any(|sub| key.eq_ignore_ascii_case(sub)))
            .collect();
        (!kept.is_empty()).then_some(Value::Object(kept))
    };
    match value {
        Value::Object(object) => keep(object),
        Value::Array(values) => {
            let kept: Vec<Value> = values
                .into_iter()
                .filter_map(|value| match value {
                    Value::Object(object) => keep(object),
                    _ => None,
                })
                .collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        _ => None,
    }
}

/// A complex value (or each of a multi-valued attribute's) without this sub-attribute; `None`
/// when nothing is left.
fn drop_sub(value: Value, sub: &str) -> Option<Value> {
    let without = |mut object: Map<String, Value>| {
        attr::remove(&mut object, sub);
        (!object.is_empty()).then_some(Value::Object(object))
    };
    match value {
        Value::Object(object) => without(object),
        Value::Array(values) => {
            let kept: Vec<Value> = values
                .into_iter()
                .filter_map(|value| match value {
                    Value::Object(object) => without(object),
                    other => Some(other),
                })
                .collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        other => Some(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::tests::{ada, directory_user, BASE};
    use crate::{Resources, ScimType, USER_SCHEMA};

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn users(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| json!({"schemas": [USER_SCHEMA], "id": i.to_string(), "userName": format!("user{i}"), "active": i % 2 == 0}))
            .collect()
    }

    #[test]
    fn the_query_has_defaults_and_reads_its_parameters_without_case() {
        let query = ListQuery::parse(&[]).unwrap();
        assert_eq!(query, ListQuery::default());
        assert_eq!((query.start_index, query.count), (1, 100));

        let query = ListQuery::parse(&params(&[
            ("Filter", r#"userName eq "a""#),
            ("STARTINDEX", "0"),
            ("count", "1000"),
            ("attributes", "userName, name.givenName,"),
            ("excludedattributes", "emails"),
            ("sortBy", "userName"),
        ]))
        .unwrap();
        assert!(query.filter.is_some());
        assert_eq!(query.start_index, 1);
        assert_eq!(query.count, MAX_RESULTS);
        assert_eq!(query.attributes, ["userName", "name.givenName"]);
        assert_eq!(query.excluded_attributes, ["emails"]);

        let query = ListQuery::parse(&params(&[
            ("count", "-5"),
            ("startIndex", "-1"),
            ("filter", " "),
        ]))
        .unwrap();
        assert_eq!((query.start_index, query.count, query.filter), (1, 0, None));
    }

    #[test]
    fn bad_parameters_are_refused() {
        let error = ListQuery::parse(&params(&[("filter", "userName eq")])).unwrap_err();
        assert_eq!(error.scim_type, Some(ScimType::InvalidFilter));
        for name in ["startIndex", "count"] {
            let error = ListQuery::parse(&params(&[(name, "ten")])).unwrap_err();
            assert_eq!(error.scim_type, Some(ScimType::InvalidValue));
            assert!(error.detail.contains(name));
        }
    }

    #[test]
    fn the_response_counts_the_matches_and_pages_them() {
        let query = ListQuery::parse(&params(&[
            ("filter", "active eq true"),
            ("startIndex", "2"),
            ("count", "2"),
        ]))
        .unwrap();
        let response = list_response(users(10), &query);
        assert_eq!(
            response,
            json!({
                "schemas": [LIST_SCHEMA],
                "totalResults": 5,
                "startIndex": 2,
                "itemsPerPage": 2,
                "Resources": [
                    {"schemas": [USER_SCHEMA], "id": "2", "userName": "user2", "active": true},
                    {"schemas": [USER_SCHEMA], "id": "4", "userName": "user4", "active": true},
                ],
            })
        );
    }

    #[test]
    fn past_the_end_and_count_zero_return_the_total_alone() {
        let query = ListQuery::parse(&params(&[("startIndex", "11")])).unwrap();
        let response = list_response(users(10), &query);
        assert_eq!(response["totalResults"], 10);
        assert_eq!(response["startIndex"], 11);
        assert_eq!(response["itemsPerPage"], 0);
        assert_eq!(response["Resources"], json!([]));

        let query = ListQuery::parse(&params(&[("count", "0")])).unwrap();
        let response = list_response(users(10), &query);
        assert_eq!(response["totalResults"], 10);
        assert_eq!(response["itemsPerPage"], 0);
        assert_eq!(response["Resources"], json!([]));

        let response = list_response(Vec::new(), &ListQuery::default());
        assert_eq!(response["totalResults"], 0);
        assert_eq!(response["Resources"], json!([]));
    }

    #[test]
    fn the_page_is_never_larger_than_the_maximum() {
        let query = ListQuery {
            count: 10_000,
            start_index: 0,
            ..ListQuery::default()
        };
        let response = list_response(users(MAX_RESULTS + 5), &query);
        assert_eq!(response["itemsPerPage"], MAX_RESULTS);
        assert_eq!(response["startIndex"], 1);
    }

    fn resource() -> Value {
        Resources::new(BASE).user(&directory_user(ada()))
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn attributes_returns_those_with_id_and_schemas() {
        let projected = project(resource(), &strings(&["userName"]), &[]);
        assert_eq!(
            projected,
            json!({
                "schemas": [USER_SCHEMA],
                "id": "00000000-0000-0000-0000-000000000ada",
                "userName": "ada@acme.test",
            })
        );
        let projected = project(
            resource(),
            &strings(&[
                "urn:ietf:params:scim:schemas:core:2.0:User:name.givenName",
                "EMAILS.value",
                "meta.created",
                "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department",
            ]),
            &[],
        );
        assert_eq!(
            projected,
            json!({
                "schemas": [USER_SCHEMA],
                "id": "00000000-0000-0000-0000-000000000ada",
                "name": {"givenName": "Ada"},
                "emails": [{"value": "ada@acme.test"}, {"value": "ada@home.test"}],
                "meta": {"created": "2026-11-25T10:00:00Z"},
            })
        );
        let projected = project(resource(), &strings(&["name", "name.givenName"]), &[]);
        assert_eq!(projected["name"]["familyName"], "Lovelace");
        let projected = project(resource(), &strings(&["nickName"]), &[]);
        assert_eq!(projected.as_object().unwrap().len(), 2);
    }

    #[test]
    fn excluded_attributes_drops_them_but_never_id_or_schemas() {
        let projected = project(
            resource(),
            &[],
            &strings(&["emails", "id", "schemas", "name.givenName", "meta"]),
        );
        let object = projected.as_object().unwrap();
        assert!(!object.contains_key("emails"));
        assert!(!object.contains_key("meta"));
        assert!(object.contains_key("id"));
        assert!(object.contains_key("schemas"));
        assert_eq!(
            projected["name"],
            json!({"formatted": "Ada King", "familyName": "Lovelace"})
        );

        let projected = project(
            resource(),
            &[],
            &strings(&["emails.type", "emails.primary"]),
        );
        assert_eq!(
            projected["emails"],
            json!([{"value": "ada@acme.test"}, {"value": "ada@home.test"}])
        );
        let projected = project(
            resource(),
            &[],
            &strings(&["emails.value", "emails.type", "emails.primary"]),
        );
        assert!(projected.get("emails").is_none());
    }

    #[test]
    fn list_responses_project_each_resource() {
        let query = ListQuery::parse(&params(&[("excludedAttributes", "active")])).unwrap();
        let response = list_response(users(2), &query);
        assert_eq!(
            response["Resources"],
            json!([
                {"schemas": [USER_SCHEMA], "id": "0", "userName": "user0"},
                {"schemas": [USER_SCHEMA], "id": "1", "userName": "user1"},
            ])
        );
    }

    #[test]
    fn the_query_names_its_window_and_whether_groups_show_members() {
        let query = ListQuery::parse(&params(&[("startIndex", "3"), ("count", "500")])).unwrap();
        assert_eq!(
            query.window(),
            DirectoryWindow {
                offset: 2,
                count: MAX_RESULTS as u32
            }
        );
        assert_eq!(ListQuery::default().window().offset, 0);
        assert_eq!(query.group_members(), GroupMembers::Read);
        for (name, value, members) in [
            ("excludedAttributes", "members", GroupMembers::Skipped),
            ("excludedAttributes", "MEMBERS,meta", GroupMembers::Skipped),
            ("excludedAttributes", "members.display", GroupMembers::Read),
            ("attributes", "displayName", GroupMembers::Skipped),
            (
                "attributes",
                "displayName,members.value",
                GroupMembers::Read,
            ),
        ] {
            let query = ListQuery::parse(&params(&[(name, value)])).unwrap();
            assert_eq!(query.group_members(), members, "{name}={value}");
        }
    }

    #[test]
    fn the_store_answers_what_it_indexes_and_checks_the_rest() {
        let render = Resources::new(BASE);
        let selection = |filter: &str| {
            ListQuery::parse(&params(&[("filter", filter)]))
                .unwrap()
                .users(&render)
        };
        assert!(matches!(
            ListQuery::default().users(&render),
            DirectorySelection::Filter(DirectoryFilter::All)
        ));
        assert!(matches!(
            selection(r#"userName eq "ada@acme.test""#),
            DirectorySelection::Filter(DirectoryFilter::Compare(_))
        ));
        let DirectorySelection::Check(check) = selection(r#"name.givenName eq "ADA""#) else {
            panic!("a check");
        };
        assert!(check.accepts(&directory_user(ada())));
        let mut other = ada();
        other.name.given_name = None;
        assert!(!check.accepts(&directory_user(other)));
        let query = ListQuery::parse(&params(&[("filter", r#"members[value eq "x"]"#)])).unwrap();
        let DirectorySelection::Check(check) = query.groups(&render) else {
            panic!("a check");
        };
        assert!(check.reads_members());
    }
}
