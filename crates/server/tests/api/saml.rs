//! SAML single sign-on over HTTP, against a real identity provider written by others: pysaml2
//! (`gatehouse_testkit::saml_idp`), signing with its own key through Debian's xmlsec1. The whole
//! service-provider-initiated flow, then every refusal, each its own test, on both backends.

use std::time::Duration;

use gatehouse_delivery::test_receiver::TestReceiver;
use gatehouse_testkit::saml_idp::TestIdp;
use reqwest::{header, Method, Response};
use serde_json::{json, Value};

use crate::helpers::{
    artifacts, browser_script, detail_of, hidden, in_browser, json_of, on_both_backends, Backend,
    Browser, LoggedIn, Options, TestApp, PASSWORD,
};

/// An organization on `plan` whose SAML configuration trusts `idp` for `example.com`, a domain
/// it verified (its TXT record on the tests' DNS server).
struct Sso {
    owner: LoggedIn,
    org: String,
    idp: TestIdp,
}

async fn configured(app: &TestApp, plan: &str, auto_provision: bool) -> Sso {
    let sso = unconfigured(app, plan).await;
    sso.turn_on(app, auto_provision).await;
    sso
}

/// The organization of [`configured`], before its owner saves the SAML configuration.
async fn unconfigured(app: &TestApp, plan: &str) -> Sso {
    let idp = TestIdp::start();
    let owner = app.logged_in("owner@acme.test").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, plan).await;
    app.verified_domain(&owner.access_token, &org, "example.com")
        .await;
    Sso { owner, org, idp }
}

impl Sso {
    /// The owner saves the configuration that trusts the IdP for `example.com`.
    async fn turn_on(&self, app: &TestApp, auto_provision: bool) {
        let (owner, org, idp) = (&self.owner, &self.org, &self.idp);
        let configuration = json!({
        "organization_id": org,
        "provider": "saml",
        "idp_entity_id": idp.entity_id(),
        "idp_sso_url": idp.sso_url(),
        "idp_certificate": idp.certificate(),
        "domain_whitelist": ["example.com"],
        "auto_provision": auto_provision,
        "default_role": "member",
        });
        json_of(
            app.send_as(
                Method::POST,
                &owner.access_token,
                "/api/v1/sso/configurations",
                Some(configuration),
            )
            .await,
            201,
        )
        .await;
    }
}

/// Where the browser tests' application sends its users back: nothing listens there.
const BROWSER_CALLBACK: &str = "http://127.0.0.1:8765/callback";

impl Sso {
    /// An application of the organization (back to [`BROWSER_CALLBACK`]) and the URL of an
    /// authorization request of it, with `state`.
    async fn authorization_url(&self, app: &TestApp, state: &str) -> String {
        let created = json_of(
            app.send_as(
                Method::POST,
                &self.owner.access_token,
                &format!("/api/v1/organizations/{}/applications", self.org),
                Some(json!({ "name": "Billing", "redirect_uris": [BROWSER_CALLBACK] })),
            )
            .await,
            201,
        )
        .await;
        format!(
            "{}?response_type=code&client_id={}&redirect_uri={}&state={state}&code_challenge={CHALLENGE}&code_challenge_method=S256",
            app.url("/oauth/authorize"),
            created["client_id"].as_str().unwrap(),
            url::form_urlencoded::byte_serialize(BROWSER_CALLBACK.as_bytes()).collect::<String>(),
        )
    }
}

fn location(response: &Response) -> String {
    response.headers()[header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned()
}

fn sets_cookie(response: &Response) -> bool {
    response.headers().get(header::SET_COOKIE).is_some()
}

impl Sso {
    fn acs(&self, app: &TestApp) -> String {
        app.url(&format!("/sso/saml/{}/acs", self.org))
    }

    /// Starts a sign-in in `browser`: Gatehouse's redirect to the IdP, and what the IdP read from
    /// the AuthnRequest with its signed answer for `email` (`request_id`, `acs_url`, `audience`,
    /// `relay_state`, `saml_response`).
    async fn start(
        &self,
        app: &TestApp,
        browser: &mut Browser,
        return_to: &str,
        email: &str,
    ) -> Value {
        let encoded: String = url::form_urlencoded::byte_serialize(return_to.as_bytes()).collect();
        let response = browser
            .get(&app.url(&format!("/sso/saml/{}/login?return_to={encoded}", self.org)))
            .await;
        assert_eq!(response.status(), 302);
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
        let to_idp = location(&response);
        assert!(
            to_idp.starts_with(&format!("{}?SAMLRequest=", self.idp.sso_url())),
            "{to_idp}"
        );
        self.idp.answer(&to_idp, email).await
    }

    /// Posts a response to the assertion consumer, as the IdP's page does.
    async fn post(&self, app: &TestApp, browser: &mut Browser, saml_response: &str) -> Response {
        browser
            .post_form(
                &self.acs(app),
                &[("SAMLResponse", saml_response), ("RelayState", "/ignored")],
            )
            .await
    }

    /// A response crafted by the IdP for the request `answered` started, with `changes` to the
    /// defaults (see `idp.py`).
    async fn crafted(&self, answered: &Value, email: &str, changes: Value) -> String {
        let mut spec = json!({
            "acs_url": answered["acs_url"],
            "audience": answered["audience"],
            "email": email,
            "in_response_to": answered["request_id"],
        });
        for (name, value) in changes.as_object().unwrap() {
            spec[name] = value.clone();
        }
        self.idp.respond(spec).await["saml_response"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Starts a sign-in, crafts its answer with `changes`, posts it: the ACS's answer must be
    /// the refusal page, with no cookie.
    async fn refused(&self, app: &TestApp, email: &str, changes: Value) {
        let mut browser = Browser::new();
        let answered = self.start(app, &mut browser, "/login/done", email).await;
        let response = self.crafted(&answered, email, changes.clone()).await;
        let refusals = format!(
            "/control/audit?action=auth.login_failed&organization_id={}",
            self.org
        );
        let before = json_of(app.as_operator(Method::GET, &refusals, None).await, 200).await;
        let answer = self.post(app, &mut browser, &response).await;
        assert_refused(answer, &changes).await;
        // Each refusal is audited in the organization, naming no one.
        let after = json_of(app.as_operator(Method::GET, &refusals, None).await, 200).await;
        assert_eq!(
            after["total"].as_u64(),
            before["total"].as_u64().map(|n| n + 1),
            "{changes}"
        );
        assert_eq!(
            after["items"][0]["actor"],
            json!({ "type": "user", "id": null })
        );
    }
}

async fn assert_refused(answer: Response, what: &Value) {
    assert_eq!(answer.status(), 403, "{what}");
    assert!(!sets_cookie(&answer), "a refusal sets no cookie: {what}");
    assert_eq!(
        answer.headers()[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    let page = answer.text().await.unwrap();
    assert!(page.contains("Single sign-on was refused"), "{page}");
}

/// The signed-in user of the browser's session: the cookie's session opens `/login/done`.
async fn signed_in_page(app: &TestApp, browser: &mut Browser) -> u16 {
    browser.get(&app.url("/login/done")).await.status().as_u16()
}

const CALLBACK: &str = "https://billing.example.com/cb";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

#[on_both_backends]
async fn a_new_user_signs_in_through_the_idp_is_provisioned_and_the_application_gets_a_code(
    app: TestApp,
) {
    let sso = configured(&app, "enterprise", true).await;
    let created = json_of(
        app.send_as(
            Method::POST,
            &sso.owner.access_token,
            &format!("/api/v1/organizations/{}/applications", sso.org),
            Some(json!({ "name": "Billing", "redirect_uris": [CALLBACK] })),
        )
        .await,
        201,
    )
    .await;
    let client_id = created["client_id"].as_str().unwrap().to_owned();
    let client_secret = created["client_secret"].as_str().unwrap().to_owned();

    // The application sends the browser to the authorization endpoint; nobody is signed in.
    let mut browser = Browser::new();
    let authorize = format!(
            "{}?response_type=code&client_id={client_id}&redirect_uri={}&state=s1&code_challenge={CHALLENGE}&code_challenge_method=S256",
            app.url("/oauth/authorize"),
            url::form_urlencoded::byte_serialize(CALLBACK.as_bytes()).collect::<String>(),
        );
    let login = location(&browser.get(&authorize).await);
    let page = browser.get(&app.url(&login)).await.text().await.unwrap();
    assert!(page.contains("Continue with SSO"));

    // "Continue with SSO" with her work email: to the organization's sign-in, keeping the
    // pending authorization.
    let return_to = hidden(&page, "return_to");
    let response = browser
        .post_form(
            &app.url("/login/sso"),
            &[
                ("email", "Grace@Example.com"),
                ("password", ""),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", &return_to),
            ],
        )
        .await;
    assert_eq!(response.status(), 303);
    let start = location(&response);
    assert!(
        start.starts_with(&format!(
            "{}/sso/saml/{}/login?return_to=",
            app.base, sso.org
        )),
        "{start}"
    );

    // Gatehouse sends the browser to the IdP with an AuthnRequest pysaml2 accepts.
    let response = browser.get(&start).await;
    assert_eq!(response.status(), 302);
    let answered = sso
        .idp
        .answer(&location(&response), "grace@example.com")
        .await;
    assert_eq!(answered["acs_url"], sso.acs(&app));
    assert_eq!(
        answered["audience"],
        app.url(&format!("/sso/saml/{}/metadata", sso.org))
    );
    assert_eq!(
        answered["relay_state"], answered["request_id"],
        "RelayState: the request's id, return_to stays here"
    );

    // The IdP's signed answer, posted to the assertion consumer: a session cookie, and back
    // to the authorization.
    let response = sso
        .post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap(),
        )
        .await;
    assert_eq!(response.status(), 303);
    assert_eq!(location(&response), return_to);
    let cookie = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("gatehouse_session="))
        .expect("the session cookie");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );

    // The authorization now issues a code, and the application exchanges it.
    let response = browser.get(&app.url(&return_to)).await;
    assert_eq!(response.status(), 302);
    let redirect = url::Url::parse(&location(&response)).unwrap();
    assert!(redirect.as_str().starts_with(CALLBACK));
    let code = redirect
        .query_pairs()
        .find(|(n, _)| n == "code")
        .unwrap()
        .1
        .into_owned();
    let tokens: Value = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(&client_id, Some(&client_secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", CALLBACK),
            ("code_verifier", VERIFIER),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let access = tokens["access_token"].as_str().expect("tokens");

    // Grace exists now, without a password, as a member of the organization; the
    // application's token (no API scope) reads nothing of her account.
    assert_eq!(app.get_as(access, "/api/v1/users/me").await.status(), 403);
    use base64::Engine as _;
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(access.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["amr"], json!(["ext"]), "signed in by the IdP");
    assert_eq!(claims["client_id"], client_id.as_str());
    let members = json_of(
        app.get_as(
            &sso.owner.access_token,
            &format!("/api/v1/organizations/{}/members", sso.org),
        )
        .await,
        200,
    )
    .await;
    let grace = members["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["email"] == "grace@example.com")
        .expect("a member");
    assert_eq!(
        (grace["role"].as_str(), grace["status"].as_str()),
        (Some("member"), Some("active"))
    );
    // Her domain signs in with single sign-on: no password is even looked at.
    let refused = json_of(
        app.login("grace@example.com", "any password at all").await,
        403,
    )
    .await;
    assert_eq!(
        refused["sso_url"],
        app.url(&format!("/sso/saml/{}/login", sso.org))
    );

    // The SSO sign-in is in the organization's audit log, as Grace's.
    let log = json_of(
        app.get_as(
            &sso.owner.access_token,
            &format!(
                "/api/v1/organizations/{}/audit-log?action=auth.login",
                sso.org
            ),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(log["total"], 1, "{log}");
    assert_eq!(
        log["items"][0]["actor"],
        json!({ "type": "user", "id": claims["sub"] })
    );
}

#[on_both_backends]
async fn a_sign_in_lands_on_the_done_page_and_the_session_refreshes_as_ext(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    let mut browser = Browser::new();
    let answered = sso
        .start(&app, &mut browser, "/login/done", "ada@example.com")
        .await;
    let response = sso
        .post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap(),
        )
        .await;
    assert_eq!(response.status(), 303);
    assert_eq!(location(&response), "/login/done");
    assert_eq!(signed_in_page(&app, &mut browser).await, 200);
    assert_eq!(
        signed_in_page(&app, &mut Browser::new()).await,
        303,
        "no session, no page"
    );
}

#[on_both_backends]
async fn a_response_is_taken_once(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    let mut browser = Browser::new();
    let answered = sso
        .start(&app, &mut browser, "/login/done", "ada@example.com")
        .await;
    let response = answered["saml_response"].as_str().unwrap();
    assert_eq!(sso.post(&app, &mut browser, response).await.status(), 303);
    // Posted again (the same request, the same assertion): refused.
    assert_refused(
        sso.post(&app, &mut Browser::new(), response).await,
        &json!("replayed"),
    )
    .await;
}

#[on_both_backends]
async fn a_replayed_assertion_is_refused_even_for_a_fresh_request(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    let mut browser = Browser::new();
    let first = sso
        .start(&app, &mut browser, "/login/done", "ada@example.com")
        .await;
    let second = sso
        .start(&app, &mut Browser::new(), "/login/done", "ada@example.com")
        .await;
    let signed = sso
        .crafted(
            &first,
            "ada@example.com",
            json!({ "assertion_id": "_replayed-assertion-1" }),
        )
        .await;
    assert_eq!(sso.post(&app, &mut browser, &signed).await.status(), 303);
    let again = sso
        .crafted(
            &second,
            "ada@example.com",
            json!({ "assertion_id": "_replayed-assertion-1" }),
        )
        .await;
    assert_refused(
        sso.post(&app, &mut Browser::new(), &again).await,
        &json!("the same assertion id"),
    )
    .await;
}

#[on_both_backends]
async fn an_unsigned_response_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(&app, "ada@example.com", json!({ "sign": "none" }))
        .await;
}

#[on_both_backends]
async fn a_response_signed_by_another_key_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(&app, "ada@example.com", json!({ "key": "other" }))
        .await;
    sso.refused(
        &app,
        "ada@example.com",
        json!({ "key": "other", "sign": "both" }),
    )
    .await;
}

#[on_both_backends]
async fn a_sha1_signature_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(&app, "ada@example.com", json!({ "algorithm": "sha1" }))
        .await;
}

#[on_both_backends]
async fn an_expired_assertion_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    // Three minutes past its end: more than the two minutes of skew.
    sso.refused(&app, "ada@example.com", json!({ "issue_instant_offset": -240, "not_before_offset": -240, "not_on_or_after_offset": -180 })).await;
}

#[on_both_backends]
async fn an_assertion_not_yet_valid_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(
        &app,
        "ada@example.com",
        json!({ "not_before_offset": 300, "not_on_or_after_offset": 900 }),
    )
    .await;
}

#[on_both_backends]
async fn an_assertion_for_another_audience_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(
        &app,
        "ada@example.com",
        json!({ "audience": "https://other-sp.example.com/metadata" }),
    )
    .await;
}

#[on_both_backends]
async fn a_response_for_another_destination_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(
        &app,
        "ada@example.com",
        json!({ "sign": "both", "destination": "https://other-sp.example.com/acs" }),
    )
    .await;
}

#[on_both_backends]
async fn an_assertion_for_another_recipient_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(
        &app,
        "ada@example.com",
        json!({ "recipient": "https://other-sp.example.com/acs" }),
    )
    .await;
}

#[on_both_backends]
async fn a_response_from_another_issuer_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(
        &app,
        "ada@example.com",
        json!({ "issuer": "https://impostor.example.com/metadata" }),
    )
    .await;
}

#[on_both_backends]
async fn a_response_to_a_request_never_sent_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(
        &app,
        "ada@example.com",
        json!({ "in_response_to": "_0123456789abcdef0123456789abcdef" }),
    )
    .await;
}

#[on_both_backends]
async fn an_idp_initiated_response_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(&app, "ada@example.com", json!({ "in_response_to": null }))
        .await;
}

#[on_both_backends]
async fn a_request_is_answered_once(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    let mut browser = Browser::new();
    let answered = sso
        .start(&app, &mut browser, "/login/done", "ada@example.com")
        .await;
    assert_eq!(
        sso.post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap()
        )
        .await
        .status(),
        303
    );
    // A second, freshly signed assertion answering the same request.
    let again = sso.crafted(&answered, "ada@example.com", json!({})).await;
    assert_refused(
        sso.post(&app, &mut Browser::new(), &again).await,
        &json!("a reused InResponseTo"),
    )
    .await;
}

#[on_both_backends]
async fn an_email_outside_the_whitelist_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(&app, "mallory@evil.example", json!({})).await;
    sso.refused(&app, "mallory@eu.example.com", json!({})).await;
}

#[on_both_backends]
async fn without_auto_provision_an_unknown_user_is_refused(app: TestApp) {
    // Ada had an account before the organization turned single sign-on on.
    json_of(
        app.register("ada@example.com", PASSWORD, "Ada Lovelace")
            .await,
        201,
    )
    .await;
    let sso = configured(&app, "business", false).await;
    sso.refused(&app, "newcomer@example.com", json!({})).await;
    // Someone with an account who is not a member is not made one either.
    sso.refused(&app, "ada@example.com", json!({})).await;
}

#[on_both_backends]
async fn a_deactivated_configuration_signs_nobody_in(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    let mut browser = Browser::new();
    let answered = sso
        .start(&app, &mut browser, "/login/done", "ada@example.com")
        .await;
    json_of(
        app.send_as(
            Method::PUT,
            &sso.owner.access_token,
            &format!("/api/v1/sso/configurations/{}", sso.org),
            Some(json!({ "is_active": false })),
        )
        .await,
        200,
    )
    .await;
    assert_refused(
        sso.post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap(),
        )
        .await,
        &json!("inactive"),
    )
    .await;
    let response = Browser::new()
        .get(&app.url(&format!("/sso/saml/{}/login", sso.org)))
        .await;
    assert_eq!(response.status(), 404, "no new sign-in starts");
}

#[on_both_backends]
async fn a_plan_without_sso_signs_nobody_in(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    let mut browser = Browser::new();
    let answered = sso
        .start(&app, &mut browser, "/login/done", "ada@example.com")
        .await;
    app.set_plan(&sso.org, "pro").await;
    assert_refused(
        sso.post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap(),
        )
        .await,
        &json!("pro plan"),
    )
    .await;
}

#[on_both_backends]
async fn a_document_with_a_dtd_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    sso.refused(&app, "ada@example.com", json!({ "attack": "doctype" }))
        .await;
}

#[on_both_backends]
async fn an_oversized_or_malformed_response_is_refused(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    let huge = "A".repeat(600 * 1024);
    assert_refused(
        sso.post(&app, &mut Browser::new(), &huge).await,
        &json!("600 KiB"),
    )
    .await;
    assert_refused(
        sso.post(&app, &mut Browser::new(), "not base64 at all!")
            .await,
        &json!("garbage"),
    )
    .await;
    let missing = Browser::new()
        .post_form(&sso.acs(&app), &[("RelayState", "/")])
        .await;
    assert_refused(missing, &json!("no SAMLResponse")).await;
}

#[on_both_backends]
async fn xsw_an_unsigned_assertion_before_the_signed_one_signs_in_no_one_else(app: TestApp) {
    wrapped(&app, "xsw_before").await;
}

#[on_both_backends]
async fn xsw_an_unsigned_assertion_after_the_signed_one_signs_in_no_one_else(app: TestApp) {
    wrapped(&app, "xsw_after").await;
}

#[on_both_backends]
async fn xsw_the_signed_assertion_moved_into_extensions_signs_in_no_one_else(app: TestApp) {
    wrapped(&app, "xsw_extensions").await;
}

#[on_both_backends]
async fn xsw_the_signed_assertion_moved_into_a_signature_object_signs_in_no_one_else(app: TestApp) {
    wrapped(&app, "xsw_object").await;
}

#[on_both_backends]
async fn xsw_an_id_that_appears_twice_signs_in_no_one_else(app: TestApp) {
    wrapped(&app, "duplicate_id").await;
}

#[on_both_backends]
async fn a_name_id_split_by_a_comment_is_never_read_as_its_first_half(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    // Signed as admin@example.com.evil.com; a careless reader sees admin@example.com.
    let mut browser = Browser::new();
    let answered = sso
        .start(&app, &mut browser, "/login/done", "admin@example.com")
        .await;
    let changes = json!({ "attack": "comment_nameid", "evil_email": "admin@example.com.evil.com", "comment_after": "admin@example.com" });
    let response = sso
        .crafted(&answered, "admin@example.com", changes.clone())
        .await;
    // Either refused, or read as the signed value, whose domain is not whitelisted: refused.
    assert_refused(sso.post(&app, &mut browser, &response).await, &changes).await;
    let members = json_of(
        app.get_as(
            &sso.owner.access_token,
            &format!("/api/v1/organizations/{}/members", sso.org),
        )
        .await,
        200,
    )
    .await;
    assert!(
        !members.to_string().contains("admin@example.com"),
        "{members}"
    );
}

#[on_both_backends]
async fn a_bad_start_is_a_page_not_a_redirect(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    for bad in [
        "https://evil.example.com/",
        "//evil.example.com",
        "/\\evil.example.com",
    ] {
        let encoded: String = url::form_urlencoded::byte_serialize(bad.as_bytes()).collect();
        let response = Browser::new()
            .get(&app.url(&format!("/sso/saml/{}/login?return_to={encoded}", sso.org)))
            .await;
        assert_eq!(response.status(), 400, "{bad}");
        assert!(response.headers().get(header::LOCATION).is_none());
    }
    for org in ["not-a-uuid", "0192f0c1-0000-7000-8000-000000000000"] {
        let response = Browser::new()
            .get(&app.url(&format!("/sso/saml/{org}/login")))
            .await;
        assert_eq!(response.status(), 404, "{org}");
    }
}

#[on_both_backends]
async fn an_idp_speaks_only_for_domains_its_organization_verified(app: TestApp) {
    // The victim: an account of another organization, signing in with a password.
    let victim = app.logged_in("ceo@victimcorp.example").await;
    let victims_team = app.create_team(&victim.access_token, "Victim Corp").await;
    // The attacker: admin of a business organization with their own IdP, who whitelists
    // the victim's domain (nothing stops a whitelist naming any domain).
    let sso = configured(&app, "business", true).await;
    let path = format!("/api/v1/sso/configurations/{}", sso.org);
    let shown = json_of(
        app.send_as(
            Method::PUT,
            &sso.owner.access_token,
            &path,
            Some(json!({ "domain_whitelist": ["example.com", "victimcorp.example"] })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        shown["domain_whitelist"],
        json!(["example.com", "victimcorp.example"])
    );
    assert_eq!(
        shown["verified_domains"],
        json!(["example.com"]),
        "kept, shown, and doing nothing"
    );

    // The IdP signs for the victim: refused, no cookie, no session, no membership.
    sso.refused(&app, "ceo@victimcorp.example", json!({})).await;
    let members = json_of(
        app.get_as(
            &sso.owner.access_token,
            &format!("/api/v1/organizations/{}/members", sso.org),
        )
        .await,
        200,
    )
    .await;
    assert!(!members.to_string().contains("victimcorp"), "{members}");
    // Home realm discovery does not send the victim's domain there either.
    detail_of(
        app.post_json(
            "/api/v1/sso/lookup",
            &json!({ "email": "ceo@victimcorp.example" }),
        )
        .await,
        404,
    )
    .await;
    // The attacker cannot verify it: the victim's DNS holds no record of theirs.
    let claimed = json_of(
        app.send_as(
            Method::POST,
            &sso.owner.access_token,
            &format!("/api/v1/organizations/{}/domains", sso.org),
            Some(json!({ "domain": "victimcorp.example" })),
        )
        .await,
        201,
    )
    .await;
    detail_of(
        app.send_as(
            Method::POST,
            &sso.owner.access_token,
            &format!(
                "/api/v1/organizations/{}/domains/{}/verify",
                sso.org,
                claimed["id"].as_str().unwrap()
            ),
            None,
        )
        .await,
        409,
    )
    .await;
    sso.refused(&app, "ceo@victimcorp.example", json!({})).await;
    // The victim still signs in with a password, and their own organization is theirs.
    json_of(app.login("ceo@victimcorp.example", PASSWORD).await, 200).await;
    json_of(
        app.get_as(
            &victim.access_token,
            &format!(
                "/api/v1/organizations/{}",
                victims_team["id"].as_str().unwrap()
            ),
        )
        .await,
        200,
    )
    .await;
}

#[on_both_backends]
async fn a_whitelisted_domain_signs_in_once_it_is_verified(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    let path = format!("/api/v1/sso/configurations/{}", sso.org);
    json_of(
        app.send_as(
            Method::PUT,
            &sso.owner.access_token,
            &path,
            Some(json!({ "domain_whitelist": ["example.com", "subsidiary.example"] })),
        )
        .await,
        200,
    )
    .await;
    sso.refused(&app, "grace@subsidiary.example", json!({}))
        .await;

    // The organization proves it holds the domain through DNS: now its IdP speaks for it.
    app.verified_domain(&sso.owner.access_token, &sso.org, "subsidiary.example")
        .await;
    let shown = json_of(app.get_as(&sso.owner.access_token, &path).await, 200).await;
    assert_eq!(
        shown["verified_domains"],
        json!(["example.com", "subsidiary.example"])
    );
    let found = json_of(
        app.post_json(
            "/api/v1/sso/lookup",
            &json!({ "email": "grace@subsidiary.example" }),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(found["organization_id"], sso.org.as_str());
    let mut browser = Browser::new();
    let answered = sso
        .start(
            &app,
            &mut browser,
            "/login/done",
            "grace@subsidiary.example",
        )
        .await;
    let response = sso
        .post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap(),
        )
        .await;
    assert_eq!(response.status(), 303, "{:?}", response.text().await);
    assert_eq!(signed_in_page(&app, &mut browser).await, 200);
}

#[on_both_backends]
async fn an_idps_ext_satisfies_only_its_own_organizations_mfa_policy(app: TestApp) {
    // Grace has a password account and is a member of Globex, which requires MFA at once.
    let globex_owner = app.logged_in("owner@globex.test").await;
    let globex = app.create_team(&globex_owner.access_token, "Globex").await;
    let globex = globex["id"].as_str().unwrap().to_owned();
    app.set_plan(&globex, "business").await;
    app.member_of(
        &globex_owner.access_token,
        &globex,
        "grace@example.com",
        "member",
    )
    .await;
    let at_once = crate::policies::policies(|p| {
        p["mfa_policy"] =
            json!({ "required": true, "allowed_methods": ["totp"], "grace_period_hours": 0 });
    });
    // Acme, whose IdP signs Grace in, requires MFA at once too.
    let sso = configured(&app, "business", true).await;
    for (owner, org) in [
        (&globex_owner.access_token, &globex),
        (&sso.owner.access_token, &sso.org),
    ] {
        json_of(
            app.send_as(
                Method::PUT,
                owner,
                &format!("/api/v1/organizations/{org}/policies"),
                Some(at_once.clone()),
            )
            .await,
            200,
        )
        .await;
    }

    // Grace signs in through Acme's IdP: a session with amr ext.
    let mut browser = Browser::new();
    let answered = sso
        .start(&app, &mut browser, "/login/done", "grace@example.com")
        .await;
    let response = sso
        .post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap(),
        )
        .await;
    assert_eq!(response.status(), 303);
    let refresh_token = browser
        .cookie("gatehouse_session")
        .expect("the session cookie");
    let tokens = json_of(app.refresh(&refresh_token).await, 200).await;
    let access = tokens["access_token"].as_str().unwrap();

    // Acme trusts its own IdP's sign-in as its second factor...
    json_of(
        app.get_as(access, &format!("/api/v1/organizations/{}", sso.org))
            .await,
        200,
    )
    .await;
    // ... Globex does not: it asks for a second factor of its own.
    let refused = detail_of(
        app.get_as(access, &format!("/api/v1/organizations/{globex}"))
            .await,
        403,
    )
    .await;
    assert_eq!(refused, "organization requires multi-factor authentication");
    // Nor through X-Organization-ID.
    let webhooks = app
        .client
        .get(app.url("/api/v1/webhooks/endpoints"))
        .bearer_auth(access)
        .header("X-Organization-ID", &globex)
        .send()
        .await
        .unwrap();
    assert_eq!(
        detail_of(webhooks, 403).await,
        "organization requires multi-factor authentication"
    );
}

#[on_both_backends]
async fn home_realm_discovery_names_the_organization_of_a_whitelisted_domain(app: TestApp) {
    let sso = configured(&app, "business", true).await;
    let found = json_of(
        app.post_json(
            "/api/v1/sso/lookup",
            &json!({ "email": "Grace@Example.com" }),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(found["organization_id"], sso.org.as_str());
    assert_eq!(
        found["login_url"],
        app.url(&format!("/sso/saml/{}/login", sso.org))
    );
    for email in ["grace@elsewhere.example", "not an email"] {
        detail_of(
            app.post_json("/api/v1/sso/lookup", &json!({ "email": email }))
                .await,
            404,
        )
        .await;
    }
    assert_eq!(
        app.post_json("/api/v1/sso/lookup", &json!({}))
            .await
            .status(),
        422
    );
    // On the login page, an email without SSO gets the page again, saying so.
    let mut browser = Browser::new();
    let page = browser.get(&app.url("/login")).await.text().await.unwrap();
    let response = browser
        .post_form(
            &app.url("/login/sso"),
            &[
                ("email", "grace@elsewhere.example"),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", "/login/done"),
            ],
        )
        .await;
    assert_eq!(response.status(), 404);
    assert!(response
        .text()
        .await
        .unwrap()
        .contains("Single sign-on is not set up for this email."));
    // A forged form goes nowhere.
    let forged = Browser::new()
        .post_form(
            &app.url("/login/sso"),
            &[
                ("email", "grace@example.com"),
                ("csrf_token", "made-up"),
                ("return_to", "/"),
            ],
        )
        .await;
    assert_eq!(forged.status(), 403);
}

#[on_both_backends]
async fn in_headless_chromium_continue_with_sso_signs_in_at_the_idp_and_lands_on_the_callback(
    app: TestApp,
) {
    let script = browser_script("saml_flow.mjs");
    let sso = configured(&app, "enterprise", true).await;
    let branding =
        json!({ "primary_color": "#7C2D12", "custom_login": { "title": "Acme sign-in" } });
    json_of(
        app.send_as(
            Method::PUT,
            &sso.owner.access_token,
            &format!("/api/v1/organizations/{}/branding", sso.org),
            Some(branding),
        )
        .await,
        200,
    )
    .await;
    let callback = BROWSER_CALLBACK;
    let authorize = sso.authorization_url(&app, "saml").await;
    let screenshot = artifacts().join(format!("saml-login-page-{}.png", sso.org));
    let output = tokio::process::Command::new("node")
        .arg(&script)
        .args([
            authorize.as_str(),
            callback,
            "grace@example.com",
            "Acme sign-in",
            sso.idp.sso_url(),
        ])
        .arg(&screenshot)
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!("Node.js is needed for this test (apt-get install nodejs): {e}")
        });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the browser run failed:\n{stderr}");
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["heading"], "Acme sign-in");
    assert!(
        seen["idpPage"].as_str().unwrap().contains("SAMLRequest="),
        "{seen}"
    );
    let landed = url::Url::parse(seen["callback"].as_str().unwrap()).unwrap();
    assert!(landed.as_str().starts_with(callback), "{landed}");
    let param = |name: &str| {
        landed
            .query_pairs()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.into_owned())
    };
    assert_eq!(param("state").as_deref(), Some("saml"));
    assert!(param("code").unwrap().starts_with("ghac_"));
    let size = std::fs::metadata(&screenshot).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 1_000,
        "a screenshot of the branded page at {}",
        screenshot.display()
    );
}

/// A signature-wrapping attack on a response signed for grace@example.com that injects
/// mallory@example.com: refused, or read as the signed subject only (never mallory).
async fn wrapped(app: &TestApp, attack: &str) {
    let sso = configured(app, "business", true).await;
    let mut browser = Browser::new();
    let answered = sso
        .start(app, &mut browser, "/login/done", "grace@example.com")
        .await;
    let changes = json!({ "attack": attack, "evil_email": "mallory@example.com" });
    let response = sso
        .crafted(&answered, "grace@example.com", changes.clone())
        .await;
    let answer = sso.post(app, &mut browser, &response).await;
    let accepted = answer.status() == 303;
    if !accepted {
        assert_refused(answer, &changes).await;
    }
    let members = json_of(
        app.get_as(
            &sso.owner.access_token,
            &format!("/api/v1/organizations/{}/members", sso.org),
        )
        .await,
        200,
    )
    .await;
    let emails: Vec<_> = members["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["email"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !emails.contains(&"mallory@example.com".to_owned()),
        "{attack}: {emails:?}"
    );
    assert_eq!(
        emails.contains(&"grace@example.com".to_owned()),
        accepted,
        "{attack}: the signed subject, if anyone"
    );
    // No account was made for Mallory: with single sign-on off, the address is still free.
    json_of(
        app.send_as(
            Method::PUT,
            &sso.owner.access_token,
            &format!("/api/v1/sso/configurations/{}", sso.org),
            Some(json!({ "is_active": false })),
        )
        .await,
        200,
    )
    .await;
    json_of(
        app.register("mallory@example.com", PASSWORD, "Mallory")
            .await,
        201,
    )
    .await;
}

/// The events a SAML sign-in announces, at a real HTTPS receiver: `member.joined` and `auth.login`
/// with `method: "saml"` to the organization (and `user.created` for the new account).
async fn provisioning_is_announced(backend: Backend) {
    let receiver = TestReceiver::start().await;
    let app = TestApp::spawn_with(
        backend,
        Options {
            webhook_ca_file: Some(receiver.ca_pem_path().to_owned()),
            ..Options::default()
        },
    )
    .await;
    let sso = configured(&app, "business", true).await;
    json_of(
        app.in_org(Method::POST, &sso.owner.access_token, &sso.org, "/api/v1/webhooks/endpoints",
            Some(json!({ "url": receiver.url("/saml"), "events": ["user.created", "member.joined", "auth.login"] }))).await,
        201,
    ).await;
    let mut browser = Browser::new();
    let answered = sso
        .start(&app, &mut browser, "/login/done", "grace@example.com")
        .await;
    assert_eq!(
        sso.post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap()
        )
        .await
        .status(),
        303
    );

    let requests = receiver.wait_for(3, Duration::from_secs(20)).await;
    let bodies: Vec<Value> = requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    let of = |kind: &str| {
        bodies
            .iter()
            .find(|b| b["event"] == kind)
            .unwrap_or_else(|| panic!("{kind} in {bodies:?}"))
            .clone()
    };
    assert_eq!(of("user.created")["data"]["email"], "grace@example.com");
    let joined = of("member.joined");
    assert_eq!(
        (
            joined["data"]["email"].as_str(),
            joined["data"]["role"].as_str()
        ),
        (Some("grace@example.com"), Some("member"))
    );
    assert_eq!(of("auth.login")["data"]["method"], "saml");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_is_announced_sqlite() {
    provisioning_is_announced(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_is_announced_postgres() {
    provisioning_is_announced(Backend::Postgres).await;
}

#[on_both_backends]
async fn an_address_of_a_verified_sso_domain_signs_in_only_through_the_idp(app: TestApp) {
    // Ada (example.com) had a password before her organization turned single sign-on on.
    json_of(
        app.register("ada@example.com", PASSWORD, "Ada Lovelace")
            .await,
        201,
    )
    .await;
    let sso = configured(&app, "business", true).await;
    let sso_url = app.url(&format!("/sso/saml/{}/login", sso.org));

    for (path, body) in [
        (
            "/api/v1/auth/login",
            json!({ "email": "ada@example.com", "password": PASSWORD }),
        ),
        (
            "/api/v1/auth/login",
            json!({ "email": "nobody@example.com", "password": PASSWORD }),
        ),
        (
            "/api/v1/auth/magic-link",
            json!({ "email": "ada@example.com" }),
        ),
        (
            "/api/v1/auth/password/forgot",
            json!({ "email": "ada@example.com" }),
        ),
    ] {
        let refused = json_of(app.post_json(path, &body).await, 403).await;
        assert_eq!(
            refused["detail"], "this account signs in with single sign-on",
            "{path} {body}"
        );
        assert_eq!(refused["sso_url"], sso_url.as_str(), "{path} {body}");
    }
    assert!(app.mails().await.is_empty(), "no link was mailed");

    // The hosted login page sends her to the IdP, and back to where she was going.
    let mut browser = Browser::new();
    let page = browser
        .get(&app.url("/login?return_to=/login/done"))
        .await
        .text()
        .await
        .unwrap();
    let response = browser
        .post_form(
            &app.url("/login"),
            &[
                ("email", "ada@example.com"),
                ("password", PASSWORD),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", "/login/done"),
            ],
        )
        .await;
    assert_eq!(response.status(), 303);
    assert_eq!(
        location(&response),
        format!("{sso_url}?return_to=%2Flogin%2Fdone")
    );
    assert!(
        !sets_cookie(&response)
            || response
                .headers()
                .get_all(header::SET_COOKIE)
                .iter()
                .all(|c| !c.to_str().unwrap().starts_with("gatehouse_session="))
    );
    let response = browser.get(&location(&response)).await;
    assert_eq!(response.status(), 302, "on to the IdP");

    // The owner keeps a password (break-glass), whatever their own domain.
    json_of(app.login("owner@acme.test", PASSWORD).await, 200).await;
    // Once the configuration is off, passwords work again.
    json_of(
        app.send_as(
            Method::PUT,
            &sso.owner.access_token,
            &format!("/api/v1/sso/configurations/{}", sso.org),
            Some(json!({ "is_active": false })),
        )
        .await,
        200,
    )
    .await;
    json_of(app.login("ada@example.com", PASSWORD).await, 200).await;
}

#[on_both_backends]
async fn in_headless_chromium_a_password_sign_in_of_an_sso_domain_goes_to_the_idp(app: TestApp) {
    // Ada (example.com) had a password before Acme turned single sign-on on.
    json_of(
        app.register("ada@example.com", PASSWORD, "Ada Lovelace")
            .await,
        201,
    )
    .await;
    let sso = configured(&app, "enterprise", true).await;
    let callback = BROWSER_CALLBACK;
    let authorize = sso.authorization_url(&app, "sso").await;
    let screenshot = artifacts().join(format!("sso-redirect-{}.png", sso.org));
    let seen = in_browser(
        "sso_redirect_flow.mjs",
        [
            authorize.as_str(),
            callback,
            "ada@example.com",
            PASSWORD,
            sso.idp.sso_url(),
        ],
        &screenshot,
    )
    .await;
    assert!(
        seen["idpPage"].as_str().unwrap().contains("SAMLRequest="),
        "{seen}"
    );
    let landed = seen["callback"].as_str().unwrap();
    assert!(landed.starts_with(callback), "{landed}");
    let landed = url::Url::parse(landed).unwrap();
    let param = |name: &str| {
        landed
            .query_pairs()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.into_owned())
    };
    assert_eq!(param("state").as_deref(), Some("sso"));
    assert!(param("code").unwrap().starts_with("ghac_"));
}

#[on_both_backends]
async fn a_password_registered_in_advance_does_not_survive_the_idps_sign_in(app: TestApp) {
    // Before Acme turns single sign-on on, Mallory registers its new hire's address with a
    // password of her own, keeps the refresh token, and mints a key for her workspace.
    let mallory = app.logged_in("newhire@example.com").await;
    let spare = json_of(
        app.create_api_key(&mallory.access_token, "spare", &mallory.organization_id)
            .await,
        201,
    )
    .await;
    let spare = spare["key"].as_str().unwrap().to_owned();
    let sso = configured(&app, "business", true).await;
    let sso_url = app.url(&format!("/sso/saml/{}/login", sso.org));

    // Now the domain signs in through the IdP: nobody registers a password for it any more.
    let refused = json_of(
        app.register("second-hire@example.com", PASSWORD, "Second Hire")
            .await,
        403,
    )
    .await;
    assert_eq!(
        refused["detail"],
        "this account signs in with single sign-on"
    );
    assert_eq!(refused["sso_url"], sso_url.as_str());

    // The real new hire signs in through the IdP: the account is reclaimed for them.
    let mut browser = Browser::new();
    let answered = sso
        .start(&app, &mut browser, "/login/done", "newhire@example.com")
        .await;
    let response = sso
        .post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap(),
        )
        .await;
    assert_eq!(response.status(), 303);
    assert_eq!(signed_in_page(&app, &mut browser).await, 200);

    // Everything Mallory held ended in that sign-in.
    assert_eq!(
        app.refresh(&mallory.refresh_token).await.status(),
        401,
        "her refresh token"
    );
    assert_eq!(
        app.me(&mallory.access_token).await.status(),
        401,
        "her access token's session"
    );
    assert_eq!(
        app.health_with_key(&spare, &mallory.organization_id)
            .await
            .status(),
        401,
        "her key"
    );
    let password = app.login("newhire@example.com", PASSWORD).await;
    assert_eq!(
        password.status(),
        403,
        "her password: the address signs in with SSO"
    );
    let reclaimed = app
        .audit_records(&format!(
            "?organization_id={}&action=user.reclaimed",
            sso.org
        ))
        .await;
    assert_eq!(reclaimed.len(), 1, "{reclaimed:?}");
    assert_eq!(reclaimed[0]["target"]["id"], mallory.user_id.as_str());

    // A second sign-in links the account as it is now: verified, nothing more to end.
    let answered = sso
        .start(&app, &mut browser, "/login/done", "newhire@example.com")
        .await;
    let response = sso
        .post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap(),
        )
        .await;
    assert_eq!(response.status(), 303);
    assert_eq!(signed_in_page(&app, &mut browser).await, 200);
    let reclaimed = app
        .audit_records(&format!(
            "?organization_id={}&action=user.reclaimed",
            sso.org
        ))
        .await;
    assert_eq!(reclaimed.len(), 1, "reclaimed once");
}

#[on_both_backends]
async fn a_session_from_before_single_sign_on_reaches_the_organization_no_more(app: TestApp) {
    // Ada (example.com, an admin) signed in by password, in the API and on the hosted pages,
    // before Acme turned single sign-on on.
    let sso = unconfigured(&app, "enterprise").await;
    let ada = app
        .member_of(
            &sso.owner.access_token,
            &sso.org,
            "ada@example.com",
            "admin",
        )
        .await;
    let authorize = sso.authorization_url(&app, "before").await;
    let mut browser = Browser::new();
    let page = browser.get(&app.url("/login")).await.text().await.unwrap();
    let form = [
        ("email", "ada@example.com"),
        ("password", PASSWORD),
        ("csrf_token", &hidden(&page, "csrf_token")),
        ("return_to", "/login/done"),
    ];
    assert_eq!(
        browser.post_form(&app.url("/login"), &form).await.status(),
        303
    );
    let members = format!("/api/v1/organizations/{}/members", sso.org);
    assert_eq!(
        app.get_as(&ada.access_token, &members).await.status(),
        200,
        "before"
    );

    sso.turn_on(&app, true).await;
    let sso_url = app.url(&format!("/sso/saml/{}/login", sso.org));
    let sent_to_the_idp = |what: &'static str| {
        let sso_url = sso_url.clone();
        move |refused: Value| {
            assert_eq!(
                refused["detail"], "organization requires single sign-on",
                "{what}"
            );
            assert_eq!(refused["sso_url"], sso_url.as_str(), "{what}");
        }
    };
    // Its routes, with the token she holds and with one refreshed since.
    sent_to_the_idp("a route")(json_of(app.get_as(&ada.access_token, &members).await, 403).await);
    let refreshed = json_of(app.refresh(&ada.refresh_token).await, 200).await;
    let access = refreshed["access_token"].as_str().unwrap();
    sent_to_the_idp("a refreshed token")(json_of(app.get_as(access, &members).await, 403).await);
    // A key for it, and a token naming it.
    sent_to_the_idp("a key")(
        json_of(app.create_api_key(access, "lasting", &sso.org).await, 403).await,
    );
    let scoped = json!({ "refresh_token": ada.refresh_token, "organization_id": sso.org });
    sent_to_the_idp("an organization's token")(
        json_of(app.post_json("/api/v1/auth/refresh", &scoped).await, 403).await,
    );
    // Its applications: the hosted session goes to the IdP, and back to the request.
    let response = browser.get(&authorize).await;
    assert_eq!(response.status(), 302);
    let to = location(&response);
    assert!(
        to.starts_with(&format!("{sso_url}?return_to=%2Foauth%2Fauthorize%3F")),
        "{to}"
    );

    // The owner's break-glass password still reaches it.
    assert_eq!(
        app.get_as(&sso.owner.access_token, &members).await.status(),
        200
    );
    // Through the IdP, Ada is back in, and her application gets its code.
    let answered = sso
        .start(&app, &mut browser, "/login/done", "ada@example.com")
        .await;
    let response = sso
        .post(
            &app,
            &mut browser,
            answered["saml_response"].as_str().unwrap(),
        )
        .await;
    assert_eq!(response.status(), 303);
    let response = browser.get(&authorize).await;
    assert_eq!(response.status(), 302);
    assert!(
        location(&response).starts_with(BROWSER_CALLBACK),
        "{}",
        location(&response)
    );
}
