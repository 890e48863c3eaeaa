//! A product's decisions on Gatehouse's organization-scoped tokens (issue 31, part 1: `POST
//! /auth/login {email, password, organization_id}`), against the real `gatehouse` binary on
//! both databases: the example product service lets a member create projects and a viewer only
//! list them, a token scoped to another organization reaches none of them, and Gatehouse issues
//! no token for an organization its user is not in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/served.rs"]
mod served;

#[path = "support/product.rs"]
#[macro_use]
mod product;

use actix_web::{test, App};
use gatehouse_example_product::configure;
use product::{bearer, Gatehouse};

on_both_databases!(roles_in_the_token_decide_what_the_example_allows);

async fn roles_in_the_token_decide_what_the_example_allows(backend: &str) {
    let gatehouse = Gatehouse::start(backend).await;
    let state = gatehouse.example("whsec_unused");
    let app = test::init_service(App::new().configure(|app| configure(app, state))).await;

    gatehouse.register("owner@example.com").await;
    let owner = gatehouse.access_token("owner@example.com", None).await;
    let acme = gatehouse.create_team(&owner, "Acme").await;
    let projects = format!("/organizations/{acme}/projects");
    let members_own = gatehouse
        .join(&owner, &acme, "member@example.com", "member")
        .await;
    gatehouse
        .join(&owner, &acme, "viewer@example.com", "viewer")
        .await;

    // A member lists and creates projects in Acme.
    let member = gatehouse
        .access_token("member@example.com", Some(&acme))
        .await;
    let (status, body) = call!(&app, bearer(false, &projects, &member));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["organization_id"], acme.as_str());
    assert_eq!(body["role"], "member");
    let (status, body) = call!(&app, bearer(true, &projects, &member));
    assert_eq!(status, 201, "{body}");

    // A viewer lists them (organization.members.read) but lacks api_keys.create.
    let viewer = gatehouse
        .access_token("viewer@example.com", Some(&acme))
        .await;
    let (status, body) = call!(&app, bearer(false, &projects, &viewer));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["role"], "viewer");
    let (status, body) = call!(&app, bearer(true, &projects, &viewer));
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["detail"], "this needs the permission api_keys.create");

    // The member's token for their personal organization does not reach Acme's projects.
    let personal = gatehouse
        .access_token("member@example.com", Some(&members_own))
        .await;
    for post in [false, true] {
        let (status, body) = call!(&app, bearer(post, &projects, &personal));
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["detail"], "organization not found");
    }

    // A token for another organization than the caller's is not issued.
    let (_, globex) = gatehouse.register("outsider@example.com").await;
    for (email, organization) in [
        ("outsider@example.com", acme.as_str()),
        ("member@example.com", globex.as_str()),
    ] {
        let (status, body) = gatehouse.login(email, Some(organization)).await;
        assert!(matches!(status, 403 | 404), "{status} {body}");
    }

    // The owner acts in Acme with a token scoped to it too.
    let (status, body) = gatehouse.login("owner@example.com", Some(&acme)).await;
    assert_eq!(status, 200, "{body}");
    let owner_in_acme = body["access_token"].as_str().unwrap();
    let (status, body) = call!(&app, bearer(true, &projects, owner_in_acme));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["organization_id"], acme.as_str());
}
