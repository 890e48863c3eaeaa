//! One list shape: every list answers the spec's envelope `{items, total, page, page_size,
//! has_next, has_prev}`, takes `page` and `page_size` (default 20, at most 100) and refuses
//! either out of range with the list-shaped `422` on `query`. The later lists (domains, service
//! accounts, roles, API keys, SCIM tokens, invitations, consents, the permission catalogue)
//! alike; only the event catalogue stays the spec's bare array (and SCIM its `ListResponse`).

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{json_of, loc, locs_of, on_both_backends, TestApp};

/// The envelope's keys, exactly.
const ENVELOPE: [&str; 6] = [
    "has_next",
    "has_prev",
    "items",
    "page",
    "page_size",
    "total",
];

/// `path` (which may hold a query already) with `page` and `page_size`.
fn paged(path: &str, page: u32, size: u32) -> String {
    let join = if path.contains('?') { '&' } else { '?' };
    format!("{path}{join}page={page}&page_size={size}")
}

/// Reads `path` as `token`, asserts the envelope (exactly its keys, the page and size asked
/// for, at most `size` items, flags that agree with `total`), and returns it.
async fn page_of(app: &TestApp, token: &str, path: &str, page: u32, size: u32) -> Value {
    let body = json_of(app.get_as(token, &paged(path, page, size)).await, 200).await;
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap_or_else(|| panic!("{path}: not an object: {body}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ENVELOPE, "{path}: {body}");
    assert_eq!(
        (body["page"].as_u64(), body["page_size"].as_u64()),
        (Some(page.into()), Some(size.into())),
        "{path}"
    );
    let total = body["total"].as_u64().unwrap();
    let items = body["items"].as_array().unwrap().len() as u64;
    let before = u64::from(page - 1) * u64::from(size);
    assert_eq!(
        items,
        total.saturating_sub(before).min(u64::from(size)),
        "{path}: {body}"
    );
    assert_eq!(
        body["has_next"],
        json!(before + items < total),
        "{path}: {body}"
    );
    assert_eq!(body["has_prev"], json!(page > 1), "{path}: {body}");
    body
}

/// Asserts the list pages through `expected` items, two at a time, and refuses a page or
/// a page size out of range as every spec list does.
async fn pages_through(app: &TestApp, token: &str, path: &str, expected: u64) {
    let first = page_of(app, token, path, 1, 2).await;
    assert_eq!(first["total"], expected, "{path}: {first}");
    let last = expected.div_ceil(2).max(1);
    page_of(app, token, path, u32::try_from(last).unwrap(), 2).await;
    // Past the end: no items, the right total.
    let past = page_of(app, token, path, 50, 2).await;
    assert_eq!(
        (past["items"].clone(), past["total"].clone()),
        (json!([]), json!(expected)),
        "{path}"
    );
    // The default page size is 20.
    let default = json_of(app.get_as(token, path).await, 200).await;
    assert_eq!(
        (default["page"].clone(), default["page_size"].clone()),
        (json!(1), json!(20)),
        "{path}"
    );
    for (query, name) in [
        ("page_size=101", "page_size"),
        ("page_size=0", "page_size"),
        ("page=0", "page"),
        ("page=x", "page"),
    ] {
        let join = if path.contains('?') { '&' } else { '?' };
        let refused = app.get_as(token, &format!("{path}{join}{query}")).await;
        assert_eq!(
            locs_of(refused).await,
            vec![loc(&["query", name])],
            "{path}?{query}"
        );
    }
}

#[on_both_backends]
async fn every_list_answers_the_spec_envelope(app: TestApp) {
    let owner = app.logged_in("lists-owner@example.com").await;
    let token = owner.access_token.as_str();
    let team = app.create_team(token, "Lists Team").await;
    let org = team["id"].as_str().unwrap();
    app.set_plan(org, "business").await;
    let org_path = format!("/api/v1/organizations/{org}");

    for name in ["one", "two", "three"] {
        json_of(app.create_api_key(token, name, org).await, 201).await;
        json_of(
            app.send_as(
                Method::POST,
                token,
                &format!("{org_path}/service-accounts"),
                Some(json!({ "name": name, "role": "viewer" })),
            )
            .await,
            201,
        )
        .await;
        json_of(
            app.send_as(
                Method::POST,
                token,
                &format!("{org_path}/scim-tokens"),
                Some(json!({ "name": name })),
            )
            .await,
            201,
        )
        .await;
        json_of(
            app.send_as(
                Method::POST,
                token,
                &format!("{org_path}/domains"),
                Some(json!({ "domain": format!("{name}-lists.example") })),
            )
            .await,
            201,
        )
        .await;
    }
    pages_through(&app, token, "/api/v1/api-keys", 3).await;
    pages_through(&app, token, &format!("{org_path}/service-accounts"), 3).await;
    pages_through(&app, token, &format!("{org_path}/scim-tokens"), 3).await;
    pages_through(&app, token, &format!("{org_path}/domains"), 3).await;
    pages_through(&app, token, "/api/v1/iam/permissions", 22).await;
    pages_through(&app, token, &format!("{org_path}/roles"), 4).await;
    pages_through(&app, token, "/api/v1/users/me/consents", 0).await;

    // Invitations from two organizations, read by the invitee.
    let other = app.create_team(token, "Second Lists Team").await;
    let other = other["id"].as_str().unwrap();
    for organization in [org, other] {
        json_of(
            app.invite(token, organization, "lists-invitee@example.com", "member")
                .await,
            201,
        )
        .await;
    }
    let invitee = app.logged_in("lists-invitee@example.com").await;
    pages_through(&app, &invitee.access_token, "/api/v1/invitations", 2).await;

    // The spec's own lists, for the same checks.
    pages_through(&app, token, "/api/v1/organizations", 3).await;
    pages_through(&app, token, &format!("{org_path}/members"), 2).await;

    // The event catalogue stays the spec's bare array.
    let catalogue = json_of(
        app.in_org(Method::GET, token, org, "/api/v1/webhooks/events", None)
            .await,
        200,
    )
    .await;
    assert!(catalogue.is_array(), "{catalogue}");
}

#[on_both_backends]
async fn the_roles_page_through_built_in_then_custom(app: TestApp) {
    let owner = app.logged_in("lists-roles@example.com").await;
    let token = owner.access_token.as_str();
    let team = app.create_team(token, "Roles Lists").await;
    let org = team["id"].as_str().unwrap();
    app.set_plan(org, "business").await;
    let path = format!("/api/v1/organizations/{org}/roles");
    for key in ["c-role", "a-role", "b-role"] {
        json_of(app.send_as(Method::POST, token, &path,
                Some(json!({ "key": key, "name": key, "description": "", "permissions": ["organization.read"] }))).await, 201).await;
    }
    let keys = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap().to_owned())
            .collect()
    };
    // Pages of three: the four built-in roles first, then the custom ones by key; a page
    // across the boundary takes from both, read a page at a time from the store.
    let mut seen = Vec::new();
    for page in 1..=3 {
        let body = page_of(&app, token, &path, page, 3).await;
        assert_eq!(body["total"], 7, "{body}");
        seen.extend(keys(&body));
    }
    assert_eq!(
        seen,
        ["owner", "admin", "member", "viewer", "a-role", "b-role", "c-role"]
    );
    let second = page_of(&app, token, &path, 2, 3).await;
    assert_eq!(second["items"][0]["built_in"], true, "{second}");
    assert_eq!(second["items"][1]["built_in"], false, "{second}");
    pages_through(&app, token, &path, 7).await;
}
