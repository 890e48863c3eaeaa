//! Applications (OAuth clients) as an organization's admins and members meet them.

use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::helpers::{detail_of, json_of, loc, locs_of, on_both_backends, TestApp};

fn apps_path(org: &str) -> String {
    format!("/api/v1/organizations/{org}/applications")
}

async fn send(
    app: &TestApp,
    method: Method,
    token: &str,
    path: &str,
    body: Option<Value>,
) -> Response {
    app.send_as(method, token, path, body).await
}

/// A team owned by a fresh user: (owner's token, organization id).
async fn team(app: &TestApp, owner: &str) -> (String, String) {
    let owner = app.logged_in(owner).await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    (owner.access_token, team["id"].as_str().unwrap().to_owned())
}

async fn register_app(app: &TestApp, token: &str, org: &str, name: &str) -> Value {
    let body = json!({ "name": name, "redirect_uris": ["https://billing.example.com/cb", "http://127.0.0.1:8765/cb"] });
    json_of(
        send(app, Method::POST, token, &apps_path(org), Some(body)).await,
        201,
    )
    .await
}

#[on_both_backends]
async fn an_admin_registers_an_application_and_sees_its_secret_once(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    let response = send(
        &app,
        Method::POST,
        &owner,
        &apps_path(&org),
        Some(json!({
            "name": "  Billing portal ",
            "redirect_uris": ["https://billing.example.com/cb", "http://127.0.0.1:8765/cb"],
        })),
    )
    .await;
    assert_eq!(response.headers()["cache-control"], "no-store");
    let created = json_of(response, 201).await;
    assert_eq!(created["name"], "Billing portal");
    assert_eq!(created["organization_id"], org.as_str());
    assert_eq!(
        created["redirect_uris"],
        json!(["https://billing.example.com/cb", "http://127.0.0.1:8765/cb"])
    );
    assert_eq!(created["is_active"], true);
    assert!(created["client_id"].as_str().unwrap().starts_with("ghc_"));
    let secret = created["client_secret"].as_str().unwrap();
    assert!(secret.starts_with("ghcs_") && secret.len() > 40, "{secret}");

    let id = created["id"].as_str().unwrap();
    let fetched = json_of(
        app.get_as(&owner, &format!("{}/{id}", apps_path(&org)))
            .await,
        200,
    )
    .await;
    assert_eq!(fetched["client_id"], created["client_id"]);
    assert!(fetched.get("client_secret").is_none(), "never shown again");
    let listed = json_of(app.get_as(&owner, &apps_path(&org)).await, 200).await;
    assert_eq!(listed["total"], 1);
    assert!(listed["items"][0].get("client_secret").is_none());
    assert!(!listed.to_string().contains(secret));

    let detail = json_of(
        app.get_as(&owner, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;
    assert_eq!(detail["application_count"], 1);
}

#[on_both_backends]
async fn every_bad_field_is_named_at_its_path(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    let response = send(
        &app,
        Method::POST,
        &owner,
        &apps_path(&org),
        Some(json!({
            "name": "   ",
            "redirect_uris": [
                "https://ok.example.com/cb",
                "http://app.example.com/cb",
                "/relative",
                "https://app.example.com/cb#frag",
                "https://app.example.com/cb\u{0}",
            ],
        })),
    )
    .await;
    assert_eq!(
        locs_of(response).await,
        [
            loc(&["body", "name"]),
            loc(&["body", "redirect_uris", "1"]),
            loc(&["body", "redirect_uris", "2"]),
            loc(&["body", "redirect_uris", "3"]),
            loc(&["body", "redirect_uris", "4"]),
        ]
    );
    let eleven: Vec<String> = (0..11)
        .map(|n| format!("https://a.example.com/{n}"))
        .collect();
    let cases = [
        json!({ "name": "x", "redirect_uris": eleven }),
        json!({ "name": "x", "redirect_uris": ["https://a.example.com/cb", "https://a.example.com/cb"] }),
        json!({ "name": "x", "redirect_uris": [] }),
    ];
    for body in cases {
        let response = send(
            &app,
            Method::POST,
            &owner,
            &apps_path(&org),
            Some(body.clone()),
        )
        .await;
        assert_eq!(
            locs_of(response).await,
            [loc(&["body", "redirect_uris"])],
            "{body}"
        );
    }
    let missing = send(
        &app,
        Method::POST,
        &owner,
        &apps_path(&org),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        locs_of(missing).await,
        [loc(&["body", "name"]), loc(&["body", "redirect_uris"])]
    );
    let detail = json_of(
        app.get_as(&owner, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;
    assert_eq!(detail["application_count"], 0, "nothing was written");
}

#[on_both_backends]
async fn members_and_viewers_read_applications_but_only_admins_change_them(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    let created = register_app(&app, &owner, &org, "Billing").await;
    let path = format!("{}/{}", apps_path(&org), created["id"].as_str().unwrap());
    for (email, role) in [("mia@example.com", "member"), ("vic@example.com", "viewer")] {
        let user = app.member_of(&owner, &org, email, role).await;
        let token = user.access_token;
        json_of(app.get_as(&token, &apps_path(&org)).await, 200).await;
        json_of(app.get_as(&token, &path).await, 200).await;
        let writes = [
            send(
                &app,
                Method::POST,
                &token,
                &apps_path(&org),
                Some(json!({ "name": "x", "redirect_uris": ["https://x.example.com"] })),
            )
            .await,
            send(
                &app,
                Method::PATCH,
                &token,
                &path,
                Some(json!({ "name": "y" })),
            )
            .await,
            send(&app, Method::POST, &token, &format!("{path}/secret"), None).await,
            send(&app, Method::DELETE, &token, &path, None).await,
        ];
        for response in writes {
            assert!(
                detail_of(response, 403)
                    .await
                    .contains("applications.manage"),
                "{role}"
            );
        }
    }
    let admin = app
        .member_of(&owner, &org, "ann@example.com", "admin")
        .await;
    let renamed = send(
        &app,
        Method::PATCH,
        &admin.access_token,
        &path,
        Some(json!({ "name": "Invoices" })),
    )
    .await;
    assert_eq!(json_of(renamed, 200).await["name"], "Invoices");
}

#[on_both_backends]
async fn another_organizations_application_is_not_found(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    let created = register_app(&app, &owner, &org, "Billing").await;
    let (stranger, theirs) = team(&app, "sam@example.com").await;
    let id = created["id"].as_str().unwrap();
    // Not a member of Acme: Acme is not found for them.
    detail_of(
        app.get_as(&stranger, &format!("{}/{id}", apps_path(&org)))
            .await,
        404,
    )
    .await;
    // Their own organization has no such application.
    let path = format!("{}/{id}", apps_path(&theirs));
    detail_of(app.get_as(&stranger, &path).await, 404).await;
    detail_of(
        send(&app, Method::DELETE, &stranger, &path, None).await,
        404,
    )
    .await;
    detail_of(
        app.get_as(&owner, &format!("{}/not-a-uuid", apps_path(&org)))
            .await,
        404,
    )
    .await;
}

#[on_both_backends]
async fn an_application_is_changed_rotated_and_deleted(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    let created = register_app(&app, &owner, &org, "Billing").await;
    let path = format!("{}/{}", apps_path(&org), created["id"].as_str().unwrap());

    let patch = json!({ "redirect_uris": ["https://new.example.com/cb"], "is_active": false });
    let updated = json_of(
        send(&app, Method::PATCH, &owner, &path, Some(patch)).await,
        200,
    )
    .await;
    assert_eq!(
        updated["redirect_uris"],
        json!(["https://new.example.com/cb"])
    );
    assert_eq!(updated["is_active"], false);
    assert_eq!(updated["name"], "Billing", "absent fields stay");
    assert_eq!(updated["client_id"], created["client_id"]);
    let bad = send(
        &app,
        Method::PATCH,
        &owner,
        &path,
        Some(json!({ "redirect_uris": ["http://evil.example.com"] })),
    )
    .await;
    assert_eq!(locs_of(bad).await, [loc(&["body", "redirect_uris", "0"])]);

    let rotated = send(&app, Method::POST, &owner, &format!("{path}/secret"), None).await;
    assert_eq!(rotated.headers()["cache-control"], "no-store");
    let rotated = json_of(rotated, 200).await;
    assert_ne!(rotated["client_secret"], created["client_secret"]);
    assert_eq!(rotated["client_id"], created["client_id"]);

    assert_eq!(
        send(&app, Method::DELETE, &owner, &path, None)
            .await
            .status(),
        204
    );
    detail_of(app.get_as(&owner, &path).await, 404).await;
    detail_of(send(&app, Method::DELETE, &owner, &path, None).await, 404).await;
    let detail = json_of(
        app.get_as(&owner, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;
    assert_eq!(detail["application_count"], 0);
}

#[on_both_backends]
async fn the_list_pages(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    for n in 0..3 {
        register_app(&app, &owner, &org, &format!("App {n}")).await;
    }
    let page = json_of(
        app.get_as(&owner, &format!("{}?page=2&page_size=2", apps_path(&org)))
            .await,
        200,
    )
    .await;
    assert_eq!(page["total"], 3);
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["name"], "App 0", "newest first");
    assert_eq!(page["has_prev"], true);
    assert_eq!(page["has_next"], false);
    let bad = app
        .get_as(&owner, &format!("{}?page_size=101", apps_path(&org)))
        .await;
    assert_eq!(locs_of(bad).await, [loc(&["query", "page_size"])]);
}

#[on_both_backends]
async fn deleting_the_organization_deactivates_its_applications(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    register_app(&app, &owner, &org, "Billing").await;
    let response = send(
        &app,
        Method::DELETE,
        &owner,
        &format!("/api/v1/organizations/{org}"),
        None,
    )
    .await;
    assert!(response.status().is_success(), "{}", response.status());
    // The organization is gone for its members, and with it its applications.
    detail_of(app.get_as(&owner, &apps_path(&org)).await, 404).await;
}
