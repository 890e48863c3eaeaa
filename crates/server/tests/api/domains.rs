//! Verified domains over HTTP: an organization claims a domain and proves it with a TXT record
//! on a real DNS server (the tests' own, on loopback), on both backends.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{detail_of, dns, json_of, loc, locs_of, on_both_backends, TestApp};

fn domains_path(org: &str) -> String {
    format!("/api/v1/organizations/{org}/domains")
}

/// A domain no other test uses: the tests share one DNS server.
fn unique(name: &str) -> String {
    format!(
        "{name}-{}.example",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// A team owned by a fresh user: (owner's token, organization id).
async fn team(app: &TestApp, owner: &str) -> (String, String) {
    let owner = app.logged_in(owner).await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    (owner.access_token, team["id"].as_str().unwrap().to_owned())
}

async fn add(app: &TestApp, token: &str, org: &str, domain: &str) -> reqwest::Response {
    app.send_as(
        Method::POST,
        token,
        &domains_path(org),
        Some(json!({ "domain": domain })),
    )
    .await
}

async fn verify(app: &TestApp, token: &str, org: &str, domain: &Value) -> reqwest::Response {
    let path = format!(
        "{}/{}/verify",
        domains_path(org),
        domain["id"].as_str().unwrap()
    );
    app.send_as(Method::POST, token, &path, None).await
}

#[on_both_backends]
async fn a_domain_is_pending_until_its_txt_record_holds_the_value(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    let domain = unique("pending-proof");
    let challenge = format!("_gatehouse-challenge.{domain}");
    let added = json_of(
        add(&app, &owner, &org, &format!(" {} ", domain.to_uppercase())).await,
        201,
    )
    .await;
    assert_eq!(added["domain"], domain.as_str());
    assert_eq!(added["status"], "pending");
    assert_eq!(added["verification"]["type"], "dns_txt");
    assert_eq!(added["verification"]["name"], challenge.as_str());
    let value = added["verification"]["value"].as_str().unwrap().to_owned();
    assert!(value.starts_with("ghdv_") && value.len() > 40, "{value}");

    // No record yet: 409, saying so.
    let detail = detail_of(verify(&app, &owner, &org, &added).await, 409).await;
    assert_eq!(detail, format!("no TXT record found at {challenge}"));
    // A record holding something else: 409 naming what was found.
    dns().add_txt(&challenge, "ghdv_someone-elses");
    let detail = detail_of(verify(&app, &owner, &org, &added).await, 409).await;
    assert!(detail.contains("found: \"ghdv_someone-elses\""), "{detail}");
    let listed = json_of(app.get_as(&owner, &domains_path(&org)).await, 200).await;
    assert_eq!(listed["items"][0]["status"], "pending");

    // The value published: verified, with its event and audit record.
    dns().add_txt(&challenge, &value);
    let verified = json_of(verify(&app, &owner, &org, &added).await, 200).await;
    assert_eq!(verified["status"], "verified");
    assert!(verified["verified_at"].is_string());
    let listed = json_of(app.get_as(&owner, &domains_path(&org)).await, 200).await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(
        (listed["total"].clone(), listed["has_next"].clone()),
        (json!(1), json!(false))
    );
    assert_eq!(listed["items"][0]["status"], "verified");
    // Asking again changes nothing.
    json_of(verify(&app, &owner, &org, &added).await, 200).await;

    let events = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/events?organization_id={org}&type=organization.domain_verified"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(events["total"], 1);
    assert_eq!(events["items"][0]["data"]["domain"], domain.as_str());
    let audited: Vec<String> = app
        .audit_records(&format!("?organization_id={org}"))
        .await
        .iter()
        .map(|record| record["action"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        audited.contains(&"organization.domain_added".to_owned()),
        "{audited:?}"
    );
    assert!(
        audited.contains(&"organization.domain_verified".to_owned()),
        "{audited:?}"
    );
}

#[on_both_backends]
async fn a_domain_is_verified_by_one_organization_at_most(app: TestApp) {
    let (first, acme) = team(&app, "first@example.com").await;
    let (second, rival) = team(&app, "second@example.com").await;
    // Both claim it; the rival publishes its value too.
    let theirs = json_of(add(&app, &second, &rival, "contested.example").await, 201).await;
    dns().add_txt(
        theirs["verification"]["name"].as_str().unwrap(),
        theirs["verification"]["value"].as_str().unwrap(),
    );
    app.verified_domain(&first, &acme, "contested.example")
        .await;

    // The second organization cannot verify it, nor claim it again.
    let detail = detail_of(verify(&app, &second, &rival, &theirs).await, 409).await;
    assert_eq!(
        detail,
        "contested.example is verified by another organization"
    );
    let (third, other) = team(&app, "third@example.com").await;
    detail_of(add(&app, &third, &other, "contested.example").await, 409).await;
    // Nor the first claim it twice.
    detail_of(add(&app, &first, &acme, "contested.example").await, 409).await;
}

#[on_both_backends]
async fn public_suffixes_and_free_mail_domains_cannot_be_claimed(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    for domain in [
        "co.uk",
        "github.io",
        "gmail.com",
        "outlook.com",
        "not a domain",
    ] {
        let response = add(&app, &owner, &org, domain).await;
        assert_eq!(response.status(), 422, "{domain}");
        assert_eq!(
            locs_of(response).await,
            vec![loc(&["body", "domain"])],
            "{domain}"
        );
    }
}

#[on_both_backends]
async fn only_owners_and_admins_manage_domains(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    let added = json_of(add(&app, &owner, &org, "members-cannot.example").await, 201).await;
    for role in ["member", "viewer"] {
        let email = format!("{role}@example.com");
        let member = app.member_of(&owner, &org, &email, role).await;
        detail_of(
            add(&app, &member.access_token, &org, "mine.example").await,
            403,
        )
        .await;
        detail_of(
            app.get_as(&member.access_token, &domains_path(&org)).await,
            403,
        )
        .await;
        detail_of(verify(&app, &member.access_token, &org, &added).await, 403).await;
    }
    let admin = app
        .member_of(&owner, &org, "admin@example.com", "admin")
        .await;
    json_of(
        app.get_as(&admin.access_token, &domains_path(&org)).await,
        200,
    )
    .await;
    // An outsider does not see the organization at all.
    let outsider = app.logged_in("outsider@example.com").await;
    detail_of(
        app.get_as(&outsider.access_token, &domains_path(&org))
            .await,
        404,
    )
    .await;
}

#[on_both_backends]
async fn a_removed_domain_is_gone_with_its_event(app: TestApp) {
    let (owner, org) = team(&app, "owen@example.com").await;
    let verified = app.verified_domain(&owner, &org, "removed.example").await;
    let path = format!(
        "{}/{}",
        domains_path(&org),
        verified["id"].as_str().unwrap()
    );
    let response = app.send_as(Method::DELETE, &owner, &path, None).await;
    assert_eq!(response.status(), 204);
    let listed = json_of(app.get_as(&owner, &domains_path(&org)).await, 200).await;
    assert_eq!(listed["items"], json!([]));
    detail_of(app.send_as(Method::DELETE, &owner, &path, None).await, 404).await;
    let events = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/events?organization_id={org}&type=organization.domain_removed"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(events["total"], 1);
    // Another organization may verify it now.
    let (other_owner, other) = team(&app, "other@example.com").await;
    app.verified_domain(&other_owner, &other, "removed.example")
        .await;
}
