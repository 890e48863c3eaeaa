//! The mailed invitation link, `{public_url}/invitations/{token}`, as the invitee meets it: a
//! page in the organization's branding that registers or signs in the invited address and
//! accepts; links that expired, were revoked or were used say so.

use reqwest::{header, Method};
use serde_json::{json, Value};

use crate::helpers::{
    artifacts, detail_of, hidden, in_browser, json_of, on_both_backends, Browser, TestApp, PASSWORD,
};

/// A business team "Acme" with its branding, owned by Olga; returns (owner token, org id).
async fn acme(app: &TestApp) -> (String, String) {
    let owner = app.logged_in("olga@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "business").await;
    let branding = json!({ "primary_color": "#0F766E", "accent_color": "#F59E0B",
        "custom_login": { "title": "Acme sign-in", "subtitle": "Use your Acme account" } });
    json_of(
        app.send_as(
            Method::PUT,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/branding"),
            Some(branding),
        )
        .await,
        200,
    )
    .await;
    (owner.access_token, org)
}

/// The page of the link mailed to `email`, opened in `browser`.
async fn open(app: &TestApp, browser: &mut Browser, email: &str) -> (String, u16, String) {
    let token = app.invitation_token_for(email).await;
    let response = browser
        .get(&app.url(&format!("/invitations/{token}")))
        .await;
    let status = response.status().as_u16();
    (token, status, response.text().await.unwrap())
}

fn has_session(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|c| {
            c.to_str().unwrap().starts_with("gatehouse_session=")
                && !c.to_str().unwrap().starts_with("gatehouse_session=;")
        })
}

#[on_both_backends]
async fn a_new_colleague_registers_from_the_mailed_link_and_lands_in_the_organization(
    app: TestApp,
) {
    let (owner, org) = acme(&app).await;
    json_of(
        app.invite(&owner, &org, "newbie@example.com", "member")
            .await,
        201,
    )
    .await;
    let mail = app
        .mails()
        .await
        .into_iter()
        .rev()
        .find(|m| m.contains("newbie@example.com"))
        .unwrap();
    assert!(mail
        .replace("=\r\n", "")
        .replace("=\n", "")
        .contains(&format!("{}/invitations/", app.public_url)));

    let mut browser = Browser::new();
    let (token, status, page) = open(&app, &mut browser, "newbie@example.com").await;
    assert_eq!(status, 200);
    // Organization, inviter and role, in the organization's branding.
    assert!(page.contains("<h1>Join Acme</h1>"), "{page}");
    assert!(
        page.contains("invited newbie@example.com to join Acme as member."),
        "{page}"
    );
    assert!(page.contains("--primary: #0F766E;"));
    assert!(
        page.contains("<html lang=\"en\">")
            && page.contains("<label for=\"full_name\">Full name</label>")
    );
    assert!(page.contains("value=\"newbie@example.com\" readonly"));
    assert!(page.contains("autocomplete=\"new-password\""));
    // Opening it changed nothing: still pending.
    let members = json_of(
        app.get_as(
            &owner,
            &format!("/api/v1/organizations/{org}/members?search=newbie"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(members["items"][0]["status"], "pending");

    // A weak password is refused before anything is written: the form again, announced.
    let url = app.url(&format!("/invitations/{token}"));
    let weak = browser
        .post_form(
            &url,
            &[
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("full_name", "Nina Newbie"),
                ("password", "short"),
            ],
        )
        .await;
    assert_eq!(weak.status(), 422);
    let page = weak.text().await.unwrap();
    assert!(
        page.contains("role=\"alert\"") && page.contains("value=\"Nina Newbie\""),
        "{page}"
    );

    let joined = browser
        .post_form(
            &url,
            &[
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("full_name", "Nina Newbie"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(joined.status(), 200);
    assert!(has_session(&joined), "joined and signed in");
    let page = joined.text().await.unwrap();
    assert!(
        page.contains("Welcome to Acme") && page.contains("You joined Acme as member"),
        "{page}"
    );

    // The account exists and is an active member of the organization.
    let login = json_of(app.login("newbie@example.com", PASSWORD).await, 200).await;
    let token_of_nina = login["access_token"].as_str().unwrap();
    json_of(
        app.get_as(token_of_nina, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;
    let members = json_of(
        app.get_as(
            &owner,
            &format!("/api/v1/organizations/{org}/members?search=newbie"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(members["items"][0]["status"], "active");
    assert_eq!(members["items"][0]["full_name"], "Nina Newbie");

    // The link is spent: it says so.
    let again = browser.get(&url).await;
    assert_eq!(again.status(), 410);
    assert!(again
        .text()
        .await
        .unwrap()
        .contains("This invitation was already used"));
}

#[on_both_backends]
async fn an_invitee_with_an_account_signs_in_on_the_page_and_accepts(app: TestApp) {
    let (owner, org) = acme(&app).await;
    let bob = app.logged_in("bob@example.com").await;
    json_of(
        app.invite(&owner, &org, "bob@example.com", "viewer").await,
        201,
    )
    .await;

    let mut browser = Browser::new();
    let (token, status, page) = open(&app, &mut browser, "bob@example.com").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("as viewer.") && page.contains("<label for=\"password\">Password</label>"),
        "{page}"
    );
    assert!(page.contains("autocomplete=\"current-password\"") && !page.contains("full_name"));

    let url = app.url(&format!("/invitations/{token}"));
    let wrong = browser
        .post_form(
            &url,
            &[
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("password", "not the password"),
            ],
        )
        .await;
    assert_eq!(wrong.status(), 401);
    let page = wrong.text().await.unwrap();
    assert!(
        page.contains("role=\"alert\">The password is wrong.</p>"),
        "{page}"
    );

    let joined = browser
        .post_form(
            &url,
            &[
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(joined.status(), 200);
    assert!(has_session(&joined));
    assert!(joined
        .text()
        .await
        .unwrap()
        .contains("You joined Acme as viewer"));
    json_of(
        app.get_as(&bob.access_token, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;

    // Signed in on the hosted pages now: the next invitation is one click.
    let second = app.create_team(&owner, "Acme Labs").await;
    let second = second["id"].as_str().unwrap();
    json_of(
        app.invite(&owner, second, "bob@example.com", "member")
            .await,
        201,
    )
    .await;
    let (token, status, page) = open(&app, &mut browser, "bob@example.com").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("Accept the invitation") && !page.contains("type=\"password\""),
        "{page}"
    );
    let joined = browser
        .post_form(
            &app.url(&format!("/invitations/{token}")),
            &[("csrf_token", &hidden(&page, "csrf_token"))],
        )
        .await;
    assert_eq!(joined.status(), 200);
    json_of(
        app.get_as(
            &bob.access_token,
            &format!("/api/v1/organizations/{second}"),
        )
        .await,
        200,
    )
    .await;

    // Another account signed in in this browser does not accept for the invitee.
    json_of(
        app.invite(&owner, second, "carol@example.com", "member")
            .await,
        201,
    )
    .await;
    app.logged_in("carol@example.com").await;
    let (_, _, page) = open(&app, &mut browser, "carol@example.com").await;
    assert!(
        page.contains("signed in with another account") && page.contains("type=\"password\""),
        "{page}"
    );
}

#[on_both_backends]
async fn revoked_expired_and_unknown_links_say_so_and_forms_need_their_page(app: TestApp) {
    let (owner, org) = acme(&app).await;
    let invited = json_of(
        app.invite(&owner, &org, "withdrawn@example.com", "member")
            .await,
        201,
    )
    .await;
    let id = invited["invitation_id"].as_str().unwrap();
    let response = app
        .send_as(
            Method::DELETE,
            &owner,
            &format!("/api/v1/organizations/{org}/invitations/{id}"),
            None,
        )
        .await;
    assert!(response.status().is_success(), "{}", response.status());
    let mut browser = Browser::new();
    let (_, status, page) = open(&app, &mut browser, "withdrawn@example.com").await;
    assert_eq!(status, 410);
    assert!(
        page.contains("This invitation was withdrawn") && page.contains("--primary: #0F766E;"),
        "{page}"
    );

    json_of(
        app.invite(&owner, &org, "late@example.com", "member").await,
        201,
    )
    .await;
    // A form from the page, posted without the page's cookie, is refused and spends nothing.
    let (token, _, page) = open(&app, &mut browser, "late@example.com").await;
    let csrf = hidden(&page, "csrf_token");
    let forged = Browser::new()
        .post_form(
            &app.url(&format!("/invitations/{token}")),
            &[
                ("csrf_token", &csrf),
                ("full_name", "Late"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(forged.status(), 403);
    detail_of(app.login("late@example.com", PASSWORD).await, 401).await;

    app.rewind("invitations", "expires_at", time::Duration::days(8))
        .await;
    let (_, status, page) = open(&app, &mut browser, "late@example.com").await;
    assert_eq!(status, 410);
    assert!(
        page.contains("This invitation has expired") && page.contains("Ask Test User"),
        "{page}"
    );
    // Posted from the page opened before it expired: refused all the same, nothing written.
    let posted = browser
        .post_form(
            &app.url(&format!("/invitations/{token}")),
            &[
                ("csrf_token", &csrf),
                ("full_name", "Late"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(posted.status(), 410);
    detail_of(app.login("late@example.com", PASSWORD).await, 401).await;

    let unknown = browser
        .get(&app.url("/invitations/ghi_not-a-real-token"))
        .await;
    assert_eq!(unknown.status(), 404);
    assert!(unknown
        .text()
        .await
        .unwrap()
        .contains("This invitation link does not work"));
}

/// The invitee's browser run: from the mail in the mail directory to the page's answer.
async fn in_chromium(app: &TestApp, email: &str, mode: &str, full_name: &str) -> Value {
    // The worker sends the invitation's mail once it commits.
    app.mail_drained().await;
    let screenshot = artifacts().join(format!(
        "invitation-page-{mode}-{}.png",
        uuid::Uuid::now_v7()
    ));
    in_browser(
        "invitation_flow.mjs",
        [
            app.mail_dir.path().as_os_str(),
            email.as_ref(),
            mode.as_ref(),
            full_name.as_ref(),
            PASSWORD.as_ref(),
        ],
        &screenshot,
    )
    .await
}

#[on_both_backends]
async fn in_headless_chromium_a_colleague_follows_the_mailed_link_registers_and_joins(
    app: TestApp,
) {
    let (owner, org) = acme(&app).await;
    json_of(
        app.invite(&owner, &org, "colleague@example.com", "member")
            .await,
        201,
    )
    .await;

    let seen = in_chromium(&app, "colleague@example.com", "register", "Cora Colleague").await;
    assert!(seen["link"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{}/invitations/", app.public_url)));
    assert_eq!(seen["openedStatus"], 200);
    assert_eq!(seen["heading"], "Join Acme");
    assert_eq!(
        seen["summary"],
        "Test User invited colleague@example.com to join Acme as member."
    );
    assert_eq!(seen["lang"], "en");
    assert_eq!(seen["unlabelled"], json!([]), "every field has a label");
    assert_eq!(
        seen["labels"],
        json!(["Email", "Full name", "Choose a password"])
    );
    assert_eq!(seen["shownEmail"], "colleague@example.com");
    assert_eq!(seen["buttonText"], "Create the account and accept");
    assert_eq!(
        seen["buttonColor"], "rgb(15, 118, 110)",
        "the organization's primary color"
    );
    assert_eq!(seen["landedStatus"], 200);
    assert_eq!(seen["landedHeading"], "Welcome to Acme");
    assert_eq!(seen["session"], true, "signed in");
    assert_eq!(seen["againStatus"], 410);
    assert_eq!(seen["againHeading"], "This invitation was already used");

    // She lands in the organization: an active member, signed in with what she chose.
    let tokens = json_of(app.login("colleague@example.com", PASSWORD).await, 200).await;
    let orgs = json_of(
        app.get_as(
            tokens["access_token"].as_str().unwrap(),
            "/api/v1/organizations?type=team",
        )
        .await,
        200,
    )
    .await;
    assert_eq!(orgs["items"][0]["id"], org.as_str());
    let members = json_of(
        app.get_as(
            &owner,
            &format!("/api/v1/organizations/{org}/members?search=colleague"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(members["items"][0]["status"], "active");
    assert_eq!(members["items"][0]["role"], "member");
}

#[on_both_backends]
async fn in_headless_chromium_an_invitee_with_an_account_signs_in_from_the_mailed_link(
    app: TestApp,
) {
    let (owner, org) = acme(&app).await;
    let dan = app.logged_in("dan@example.com").await;
    json_of(
        app.invite(&owner, &org, "dan@example.com", "admin").await,
        201,
    )
    .await;

    let seen = in_chromium(&app, "dan@example.com", "sign-in", "").await;
    assert_eq!(seen["heading"], "Join Acme");
    assert_eq!(seen["labels"], json!(["Email", "Password"]));
    assert_eq!(seen["unlabelled"], json!([]));
    assert_eq!(seen["buttonText"], "Sign in and accept");
    assert_eq!(seen["landedHeading"], "Welcome to Acme");
    assert_eq!(seen["session"], true);
    assert_eq!(seen["againStatus"], 410);
    let me = json_of(
        app.get_as(&dan.access_token, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;
    assert_eq!(me["id"], org.as_str());
}
