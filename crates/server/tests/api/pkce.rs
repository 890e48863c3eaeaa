//! PKCE at the authorization-code flow, over HTTP: a confidential client written from the
//! spec's own fields (authlib, no `code_challenge`) gets tokens with its secret alone; an
//! application may require PKCE (`require_pkce`); a code issued with a challenge always needs
//! its verifier, and a code issued without one takes no verifier.

use reqwest::Method;
use serde_json::{json, Value};

use crate::admission::{authorize_url, sign_in_on_the_page};
use crate::helpers::{
    json_of, oauth_client, on_both_backends, Browser, LoggedIn, TestApp, PASSWORD,
};
use crate::oauth::{
    assert_client_hears, location, oauth_error, query_param, token_form, CALLBACK, CHALLENGE,
    VERIFIER,
};

/// Owen's team on the enterprise plan: (Owen, the organization's id).
async fn enterprise_team(app: &TestApp) -> (LoggedIn, String) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "enterprise").await;
    (owner, org)
}

/// Registers Billing with `extra` fields in the request: the `201`'s body.
async fn register(app: &TestApp, owner: &LoggedIn, org: &str, extra: Value) -> Value {
    let mut body = json!({ "name": "Billing", "redirect_uris": [CALLBACK] });
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/applications"),
            Some(body),
        )
        .await,
        201,
    )
    .await
}

/// The authorization request of the spec's own fields: no `code_challenge`, no method.
fn without_pkce(app: &TestApp, client_id: &str) -> String {
    let url = authorize_url(app, client_id, "read:user");
    let without = url.replace(
        &format!("&code_challenge={CHALLENGE}&code_challenge_method=S256"),
        "",
    );
    assert_ne!(url, without);
    without
}

/// The code the browser is sent back to the client with.
async fn code_from(browser: &mut Browser, authorize: &str) -> String {
    let response = browser.get(authorize).await;
    assert_eq!(response.status(), 302);
    let redirect = location(&response);
    assert!(redirect.starts_with(CALLBACK), "{redirect}");
    query_param(&redirect, "code").unwrap_or_else(|| panic!("a code: {redirect}"))
}

/// A code exchange of `code` by the client (secret in the form), with `verifier` if any.
fn exchange<'a>(
    code: &'a str,
    verifier: Option<&'a str>,
    client: (&'a str, &'a str),
) -> Vec<(&'a str, &'a str)> {
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", CALLBACK),
        ("client_id", client.0),
        ("client_secret", client.1),
    ];
    form.extend(verifier.map(|v| ("code_verifier", v)));
    form
}

#[on_both_backends]
async fn authlib_written_from_the_spec_gets_tokens_without_pkce(app: TestApp) {
    let (owner, org) = enterprise_team(&app).await;
    let created = register(&app, &owner, &org, json!({})).await;
    assert_eq!(
        created["require_pkce"], false,
        "PKCE is optional unless asked for"
    );

    let seen = oauth_client(
        "authlib_spec_client.py",
        &[
            &app.url(""),
            created["client_id"].as_str().unwrap(),
            created["client_secret"].as_str().unwrap(),
            CALLBACK,
            "owen@example.com",
            PASSWORD,
        ],
    )
    .await;

    assert_eq!(seen["client_id"], created["client_id"]);
    assert_eq!(seen["sub"], owner.user_id.as_str());
    assert_eq!(seen["scope"], "read:user");
    assert_eq!(seen["refresh_token"], true);
    assert_eq!(
        seen["verifier_for_a_code_without_challenge"],
        "invalid_grant"
    );
    assert_eq!(seen["wrong_secret"], "invalid_client");
    assert_eq!(seen["exchanged_after_the_refusals"], true);
}

#[on_both_backends]
async fn an_application_that_requires_pkce_refuses_a_request_without_a_challenge(app: TestApp) {
    let (owner, org) = enterprise_team(&app).await;
    let created = register(&app, &owner, &org, json!({ "require_pkce": true })).await;
    assert_eq!(created["require_pkce"], true);
    let client_id = created["client_id"].as_str().unwrap();
    let client = (client_id, created["client_secret"].as_str().unwrap());
    let path = format!(
        "/api/v1/organizations/{org}/applications/{}",
        created["id"].as_str().unwrap()
    );
    let fetched = json_of(app.get_as(&owner.access_token, &path).await, 200).await;
    assert_eq!(fetched["require_pkce"], true);
    let listed = json_of(
        app.get_as(
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/applications"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(listed["items"][0]["require_pkce"], true);

    let mut browser = Browser::new();
    sign_in_on_the_page(&app, &mut browser, "owen@example.com").await;

    // Without a challenge: the client hears invalid_request, with its state, and no code.
    let response = browser.get(&without_pkce(&app, client_id)).await;
    assert_client_hears(&response, "invalid_request", "s1");
    let description = query_param(&location(&response), "error_description").unwrap();
    assert!(
        description.starts_with("code_challenge is required (PKCE with S256)"),
        "{description}"
    );

    // With one, a code; exchanged without its verifier it fails, and is not used up.
    let code = code_from(&mut browser, &authorize_url(&app, client_id, "read:user")).await;
    let (error, description) = oauth_error(
        token_form(&app, &exchange(&code, None, client), None).await,
        400,
    )
    .await;
    assert_eq!(error, "invalid_request");
    assert!(
        description.contains("code_verifier is required"),
        "{description}"
    );
    let wrong = "x".repeat(43);
    let response = token_form(&app, &exchange(&code, Some(&wrong), client), None).await;
    assert_eq!(
        oauth_error(response, 400).await.0,
        "invalid_grant",
        "another verifier"
    );
    let tokens = json_of(
        token_form(&app, &exchange(&code, Some(VERIFIER), client), None).await,
        200,
    )
    .await;
    assert!(tokens["access_token"].is_string());

    // The owner stops requiring it: announced and on record like any change.
    let updated = json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &path,
            Some(json!({ "require_pkce": false })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(updated["require_pkce"], false);
    assert_eq!(updated["name"], "Billing", "absent fields stay");
    let events = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/events?organization_id={org}&type=application.updated"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(events["total"], 1, "{events}");
    assert_eq!(
        events["items"][0]["data"]["changed"],
        json!(["require_pkce"])
    );
    assert_eq!(events["items"][0]["data"]["require_pkce"], false);
    let records = app
        .audit_records(&format!(
            "?organization_id={org}&action=application.updated"
        ))
        .await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["target"]["id"], created["id"]);
    // Sent again, it changes nothing and records nothing.
    json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &path,
            Some(json!({ "require_pkce": false })),
        )
        .await,
        200,
    )
    .await;
    let events = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/events?organization_id={org}&type=application.updated"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(events["total"], 1);

    // Now a request without a challenge gets a code, which takes no verifier.
    let code = code_from(&mut browser, &without_pkce(&app, client_id)).await;
    let response = token_form(&app, &exchange(&code, Some(VERIFIER), client), None).await;
    assert_eq!(
        oauth_error(response, 400).await.0,
        "invalid_grant",
        "a verifier for a code without a challenge"
    );
    let response = token_form(
        &app,
        &exchange(&code, None, (client_id, "ghcs_wrong")),
        None,
    )
    .await;
    assert_eq!(oauth_error(response, 401).await.0, "invalid_client");
    let tokens = json_of(
        token_form(&app, &exchange(&code, None, client), None).await,
        200,
    )
    .await;
    assert_eq!(tokens["scope"], "read:user");

    // A method without a challenge, or plain, is still refused.
    for method in ["S256", "plain"] {
        let response = browser
            .get(&format!(
                "{}&code_challenge_method={method}",
                without_pkce(&app, client_id)
            ))
            .await;
        assert_client_hears(&response, "invalid_request", "s1");
    }
    let plain = authorize_url(&app, client_id, "read:user")
        .replace("code_challenge_method=S256", "code_challenge_method=plain");
    assert_client_hears(&browser.get(&plain).await, "invalid_request", "s1");
}

#[on_both_backends]
async fn require_pkce_is_in_the_openapi_schemas_as_the_responses_have_it(app: TestApp) {
    let (owner, org) = enterprise_team(&app).await;
    let created = register(&app, &owner, &org, json!({})).await;
    let path = format!(
        "/api/v1/organizations/{org}/applications/{}",
        created["id"].as_str().unwrap()
    );
    let answered = json_of(app.get_as(&owner.access_token, &path).await, 200).await;
    let document = app.openapi_document().await;
    let schemas = &document["components"]["schemas"];

    let response = &schemas["ApplicationResponse"];
    let mut documented: Vec<&str> = response["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut keys: Vec<&str> = answered
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    documented.sort_unstable();
    keys.sort_unstable();
    assert_eq!(
        documented, keys,
        "the schema's properties are the response's fields"
    );
    assert_eq!(response["properties"]["require_pkce"]["type"], "boolean");
    assert!(response["required"]
        .as_array()
        .unwrap()
        .contains(&json!("require_pkce")));
    for request in ["CreateApplicationRequest", "UpdateApplicationRequest"] {
        let field = &schemas[request]["properties"]["require_pkce"];
        assert!(field.to_string().contains("boolean"), "{request}: {field}");
        assert!(
            !schemas[request]["required"]
                .as_array()
                .is_some_and(|r| r.contains(&json!("require_pkce"))),
            "{request}: optional"
        );
    }

    // And the discovery document still offers S256 alone.
    let discovery = json_of(
        app.client
            .get(app.url("/.well-known/openid-configuration"))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        discovery["code_challenge_methods_supported"],
        json!(["S256"])
    );
}
