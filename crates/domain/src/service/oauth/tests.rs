//! The authorization endpoint's decision against mocked ports: each test states one rule.

use futures::executor::block_on;
use time::Duration;
use uuid::Uuid;

use super::{
    Authorization, AuthorizeError, AuthorizeRequest, ClientCredentials, IntrospectedKind,
    Introspection, OAuthService, OAuthTokens, TokenEndpointError, TokenGrant,
    MACHINE_TOKEN_SECONDS,
};
use crate::{
    model::{
        at_hash, Amr, ApiScopes, Application, ApplicationId, ApplicationName, AuditAction,
        AuditActor, AuditOutcome, AuditTarget, AuthorizationCode, ClientGrant, ClientId,
        CodeVerifier, NewAuthorizationCode, Nonce, OAuthErrorCode, Plan, RedirectUri, RedirectUris,
        Scope, SecretToken, Session, SessionId, StoredCode, TargetKind, TokenHash, TokenKind,
    },
    ports::{AccessClaims, Audience, BearerClaims, IdTokenClaims, MachineClaims, MockAuditStore},
    service::{
        tests::{
            acme, acme_allows_only, acme_requires_mfa_at_once, ada_granted, ada_in_acme,
            ada_logs_out_now, ada_session, machine_claims, now, origin, ready, recording,
            secret_of, settings, Mocks, Seen, ACME, ADA, ADA_EMAIL, ADA_SESSION, REFRESH_TOKEN,
            SIGNED,
        },
        Agent, BrowserSession,
    },
};

pub(in crate::service) const CALLBACK: &str = "https://billing.example.com/cb";
/// RFC 7636 Appendix B.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

pub(in crate::service) fn billing(uris: &[&str]) -> Application {
    Application {
        id: ApplicationId::from_uuid(Uuid::from_u128(0xa9)),
        organization_id: ACME,
        name: ApplicationName::parse("Billing").unwrap(),
        client_id: ClientId::generate(Uuid::from_u128(0xc1)),
        redirect_uris: RedirectUris::new(
            uris.iter()
                .map(|u| RedirectUri::parse(u).unwrap())
                .collect(),
        )
        .unwrap(),
        is_active: true,
        require_pkce: false,
        created_at: now() - Duration::days(1),
        updated_at: now() - Duration::days(1),
    }
}

/// When Ada signed in on the hosted page.
fn signed_in_at() -> time::OffsetDateTime {
    now() - Duration::minutes(3)
}

fn request() -> AuthorizeRequest {
    AuthorizeRequest {
        client_id: Some(billing(&[CALLBACK]).client_id.as_str().to_owned()),
        redirect_uri: Some(CALLBACK.to_owned()),
        response_type: Some("code".to_owned()),
        scope: Some("read:user read:resources".to_owned()),
        state: Some("xyz 1".to_owned()),
        code_challenge: Some(CHALLENGE.to_owned()),
        code_challenge_method: Some("S256".to_owned()),
        nonce: None,
        prompt: None,
        max_age: None,
        organization_id: None,
    }
}

impl Mocks {
    fn oauth(self) -> OAuthService {
        let (ports, auth) = self.ports_with_auth();
        {
            let authenticator =
                crate::service::Authenticator::new((&ports).into(), crate::service::tests::ISSUER);
            OAuthService::new((&ports).into(), auth, authenticator)
        }
    }

    /// The use case must not issue a code.
    fn no_code_is_saved(&mut self) {
        self.authorization_codes
            .expect_save_authorization_code()
            .never();
    }

    /// The store saves every code it is given.
    fn codes_are_saved(&mut self) {
        self.authorization_codes
            .expect_save_authorization_code()
            .returning(|_, _| ready(Ok(())));
    }

    fn application_is(&mut self, app: Option<Application>) {
        self.applications
            .expect_application_by_client_id()
            .returning(move |_| ready(Ok(app.clone().map(|a| (a, TokenHash::of("s"))))));
    }

    fn acme_is_on(&mut self, plan: Plan) {
        self.organizations
            .expect_organization()
            .returning(move |_| ready(Ok(Some(acme(plan)))));
    }

    fn ada_is_member(&mut self, member: bool) {
        self.memberships
            .expect_membership()
            .withf(|user, org| *user == ADA && *org == ACME)
            .returning(move |_, _| ready(Ok(member.then(ada_in_acme))));
    }
}

/// Ada, signed in on the hosted pages with her password.
fn ada_on_the_pages() -> BrowserSession {
    BrowserSession {
        user_id: ADA,
        session_id: ADA_SESSION,
        amr: Amr::password(),
        authenticated_at: signed_in_at(),
    }
}

fn authorize(
    mocks: Mocks,
    request: AuthorizeRequest,
    signed_in: bool,
) -> Result<Authorization, AuthorizeError> {
    let session = ada_on_the_pages();
    block_on(
        mocks
            .oauth()
            .authorize(request, signed_in.then_some(&session), &origin()),
    )
}

fn not_redirected(result: Result<Authorization, AuthorizeError>) -> String {
    match result {
        Err(AuthorizeError::NotRedirectable(message)) => message,
        other => panic!("expected an error page, got {other:?}"),
    }
}

/// The redirect's code, error and state.
fn redirected(result: Result<Authorization, AuthorizeError>) -> (String, Vec<(String, String)>) {
    let redirect = match result {
        Ok(Authorization::Granted { redirect })
        | Err(AuthorizeError::Redirect { redirect, .. }) => redirect,
        other => panic!("expected a redirect, got {other:?}"),
    };
    let url = url::Url::parse(&redirect).unwrap();
    let base = format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap(),
        url.path()
    );
    (
        base,
        url.query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
    )
}

fn param<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn a_signed_in_member_gets_a_single_use_code_bound_to_client_uri_challenge_and_scope() {
    let mut mocks = Mocks::new();
    mocks.application_is(Some(billing(&[CALLBACK])));
    mocks.acme_is_on(Plan::Enterprise);
    mocks.ada_is_member(true);
    let saved = recording!(
        mocks
            .authorization_codes
            .expect_save_authorization_code()
            .times(1),
        |new, record| (new, record),
        Ok(())
    );

    let mut asked = request();
    asked.nonce = Some("n-0S6_WzA2Mj".to_owned());
    let (base, query) = redirected(authorize(mocks, asked, true));

    assert_eq!(base, CALLBACK);
    let code = param(&query, "code").unwrap();
    assert_eq!(code, secret_of(TokenKind::AuthorizationCode));
    assert_eq!(param(&query, "state"), Some("xyz 1"));
    let (new, record) = saved.only();
    assert_eq!(new.hash, TokenHash::of(code), "kept by its hash only");
    assert_eq!(new.code.application_id, billing(&[CALLBACK]).id);
    assert_eq!(new.code.user_id, ADA);
    assert_eq!(new.code.redirect_uri.as_str(), CALLBACK);
    assert!(new
        .code
        .challenge
        .as_ref()
        .unwrap()
        .is_met_by(&CodeVerifier::parse(VERIFIER).unwrap()));
    assert_eq!(new.code.scope.to_string(), "read:user read:resources");
    assert_eq!(
        new.code.expires_at - new.code.created_at,
        Duration::seconds(60)
    );
    assert_eq!(
        new.code.nonce.as_ref().map(Nonce::as_str),
        Some("n-0S6_WzA2Mj"),
        "for the ID token"
    );
    assert_eq!(
        new.code.authenticated_at,
        signed_in_at(),
        "the ID token's auth_time"
    );
    assert_eq!(record.action, AuditAction::OAuthAuthorized);
    assert_eq!(record.actor, AuditActor::User(ADA));
    assert_eq!(record.organization_id, Some(ACME));
    assert_eq!(
        record.target,
        Some(AuditTarget::new(
            TargetKind::Application,
            billing(&[CALLBACK]).id
        ))
    );
}

#[test]
fn nobody_signed_in_is_sent_to_sign_in_first() {
    let mut mocks = Mocks::new();
    mocks.application_is(Some(billing(&[CALLBACK])));
    mocks.acme_is_on(Plan::Enterprise);
    mocks.no_code_is_saved();

    match authorize(mocks, request(), false) {
        Ok(Authorization::SignIn { application }) => assert_eq!(application.organization_id, ACME),
        other => panic!("{other:?}"),
    }
}

/// Mocks for an authorization that may issue a code: Billing of Acme, enterprise, Ada a member.
fn may_grant() -> Mocks {
    let mut mocks = Mocks::new();
    mocks.application_is(Some(billing(&[CALLBACK])));
    mocks.acme_is_on(Plan::Enterprise);
    mocks.ada_is_member(true);
    mocks.codes_are_saved();
    mocks
}

fn asking(prompt: Option<&str>, max_age: Option<&str>) -> AuthorizeRequest {
    AuthorizeRequest {
        prompt: prompt.map(str::to_owned),
        max_age: max_age.map(str::to_owned),
        ..request()
    }
}

#[test]
fn prompt_login_and_an_old_sign_in_for_max_age_send_the_member_to_sign_in_again() {
    // Ada signed in three minutes ago.
    for (prompt, max_age) in [
        (Some("login"), None),
        (None, Some("120")),
        (None, Some("0")),
        (Some("consent login"), Some("3600")),
    ] {
        match authorize(may_grant(), asking(prompt, max_age), true) {
            Ok(Authorization::SignIn { .. }) => {}
            other => panic!("prompt {prompt:?} max_age {max_age:?}: {other:?}"),
        }
    }
    // A sign-in recent enough, and the values that change nothing, still get a code.
    for (prompt, max_age) in [
        (None, Some("180")),
        (Some("consent"), None),
        (Some("select_account"), Some("3600")),
        (Some("none"), None),
    ] {
        let (base, query) = redirected(authorize(may_grant(), asking(prompt, max_age), true));
        assert_eq!(base, CALLBACK);
        assert!(
            param(&query, "code").is_some(),
            "prompt {prompt:?} max_age {max_age:?}"
        );
    }
}

#[test]
fn prompt_none_without_a_sign_in_that_will_do_is_login_required_at_the_client() {
    for (signed_in, max_age) in [(false, None), (true, Some("60"))] {
        let (base, query) = redirected(authorize(
            may_grant(),
            asking(Some("none"), max_age),
            signed_in,
        ));
        assert_eq!(base, CALLBACK);
        assert_eq!(param(&query, "error"), Some("login_required"));
        assert_eq!(param(&query, "state"), Some("xyz 1"));
        assert_eq!(param(&query, "code"), None);
    }
}

#[test]
fn a_malformed_prompt_or_max_age_is_an_invalid_request_at_the_client() {
    for (prompt, max_age) in [
        (Some("none login"), None),
        (Some("always"), None),
        (None, Some("-1")),
        (None, Some("soon")),
    ] {
        let (base, query) = redirected(authorize(may_grant(), asking(prompt, max_age), true));
        assert_eq!(base, CALLBACK);
        assert_eq!(
            param(&query, "error"),
            Some("invalid_request"),
            "prompt {prompt:?} max_age {max_age:?}"
        );
    }
}

#[test]
fn an_unknown_inactive_or_malformed_client_gets_a_page_and_no_redirect() {
    let mut inactive = billing(&[CALLBACK]);
    inactive.is_active = false;
    for app in [None, Some(inactive)] {
        let mut mocks = Mocks::new();
        mocks.application_is(app);
        assert!(not_redirected(authorize(mocks, request(), true)).contains("client_id"));
    }
    let mut malformed = request();
    malformed.client_id = Some("not-a-client".to_owned());
    let mut mocks = Mocks::new();
    mocks.applications.expect_application_by_client_id().never();
    assert!(not_redirected(authorize(mocks, malformed, true)).contains("client_id"));
}

#[test]
fn a_redirect_uri_that_differs_by_one_character_gets_a_page_and_no_redirect() {
    for uri in [
        "https://billing.example.com/cb/",
        "https://billing.example.com/c",
        "https://billing.example.com/cB",
        "https://evil.example.com/cb",
    ] {
        let mut mocks = Mocks::new();
        mocks.application_is(Some(billing(&[CALLBACK])));
        let mut wrong = request();
        wrong.redirect_uri = Some(uri.to_owned());
        assert!(
            not_redirected(authorize(mocks, wrong, true)).contains("redirect_uri"),
            "{uri}"
        );
    }
}

#[test]
fn without_a_redirect_uri_the_only_registered_one_is_used() {
    let mut none = request();
    none.redirect_uri = None;
    let mut mocks = Mocks::new();
    mocks.application_is(Some(billing(&[CALLBACK])));
    mocks.acme_is_on(Plan::Enterprise);
    assert!(matches!(
        authorize(mocks, none.clone(), false),
        Ok(Authorization::SignIn { .. })
    ));

    let mut mocks = Mocks::new();
    mocks.application_is(Some(billing(&[
        CALLBACK,
        "https://billing.example.com/other",
    ])));
    assert!(not_redirected(authorize(mocks, none, false)).contains("redirect_uri"));
}

/// A change to a good request.
type Edit = fn(&mut AuthorizeRequest);

#[test]
fn request_errors_go_back_to_the_client_with_the_rfc_code_and_the_state() {
    let cases: Vec<(Edit, &str)> = vec![
        (
            |r| r.response_type = Some("token".into()),
            "unsupported_response_type",
        ),
        (|r| r.response_type = None, "invalid_request"),
        (
            |r| r.code_challenge_method = Some("plain".into()),
            "invalid_request",
        ),
        (|r| r.code_challenge_method = None, "invalid_request"),
        (|r| r.code_challenge = None, "invalid_request"),
        (
            |r| r.code_challenge = Some("short".into()),
            "invalid_request",
        ),
        (|r| r.scope = Some("read\"user".into()), "invalid_scope"),
    ];
    for (edit, expected) in cases {
        let mut mocks = Mocks::new();
        mocks.application_is(Some(billing(&[CALLBACK])));
        mocks.no_code_is_saved();
        let mut bad = request();
        edit(&mut bad);
        let (base, query) = redirected(authorize(mocks, bad, true));
        assert_eq!(base, CALLBACK);
        assert_eq!(param(&query, "error"), Some(expected));
        assert!(param(&query, "error_description").is_some());
        assert_eq!(param(&query, "state"), Some("xyz 1"));
        assert_eq!(param(&query, "code"), None);
    }
}

#[test]
fn below_the_enterprise_plan_or_outside_the_organization_access_is_denied() {
    for plan in [Plan::Free, Plan::Pro, Plan::Business] {
        let mut mocks = Mocks::new();
        mocks.application_is(Some(billing(&[CALLBACK])));
        mocks.acme_is_on(plan);
        mocks.no_code_is_saved();
        let (_, query) = redirected(authorize(mocks, request(), true));
        assert_eq!(param(&query, "error"), Some("access_denied"), "{plan:?}");
        assert!(param(&query, "error_description")
            .unwrap()
            .contains("enterprise"));
    }
    let mut mocks = Mocks::new();
    mocks.application_is(Some(billing(&[CALLBACK])));
    mocks.acme_is_on(Plan::Enterprise);
    mocks.ada_is_member(false);
    mocks.no_code_is_saved();
    let (_, query) = redirected(authorize(mocks, request(), true));
    assert_eq!(param(&query, "error"), Some("access_denied"));
    assert_eq!(param(&query, "state"), Some("xyz 1"));
}

#[test]
fn a_redirect_keeps_the_registered_uris_own_query() {
    let with_query = "https://billing.example.com/cb?tenant=7";
    let mut mocks = Mocks::new();
    mocks.application_is(Some(billing(&[with_query])));
    mocks.acme_is_on(Plan::Business);
    let mut req = request();
    req.redirect_uri = Some(with_query.to_owned());
    let error = authorize(mocks, req, true);
    assert!(
        matches!(&error, Err(AuthorizeError::Redirect { error, .. }) if error.code == OAuthErrorCode::AccessDenied)
    );
    let (_, query) = redirected(error);
    assert_eq!(param(&query, "tenant"), Some("7"));
    assert_eq!(param(&query, "error"), Some("access_denied"));
}

// ---------------------------------------------------------------------------------------------
// The token endpoint
// ---------------------------------------------------------------------------------------------

const CLIENT_SECRET: &str = "ghcs_the-secret";
const CODE: &str = "ghac_the-code";

fn credentials(secret: &str) -> ClientCredentials {
    ClientCredentials {
        client_id: billing(&[CALLBACK]).client_id.as_str().to_owned(),
        client_secret: SecretToken::new(secret.to_owned()),
    }
}

fn exchange(verifier: &str, redirect_uri: &str) -> TokenGrant {
    TokenGrant::AuthorizationCode {
        code: CODE.to_owned(),
        redirect_uri: Some(redirect_uri.to_owned()),
        code_verifier: Some(verifier.to_owned()),
    }
}

fn stored(used: Option<SessionId>, expires_in: i64) -> StoredCode {
    StoredCode {
        code: AuthorizationCode {
            application_id: billing(&[CALLBACK]).id,
            user_id: ADA,
            redirect_uri: RedirectUri::parse(CALLBACK).unwrap(),
            challenge: Some(CodeVerifier::parse(VERIFIER).unwrap().challenge()),
            scope: Scope::parse("read:user").unwrap(),
            amr: Amr::password(),
            authenticated_at: signed_in_at(),
            nonce: None,
            created_at: now() - Duration::seconds(10),
            expires_at: now() + Duration::seconds(expires_in),
        },
        used_at: used.map(|_| now() - Duration::seconds(5)),
        session_id: used,
    }
}

impl Mocks {
    fn client_is_billing(&mut self) {
        self.applications
            .expect_application_by_client_id()
            .returning(|_| {
                ready(Ok(Some((
                    billing(&[CALLBACK]),
                    TokenHash::of(CLIENT_SECRET),
                ))))
            });
    }

    fn code_is(&mut self, code: StoredCode) {
        self.authorization_codes
            .expect_authorization_code()
            .withf(|hash| *hash == TokenHash::of(CODE))
            .returning(move |_| ready(Ok(Some(code.clone()))));
    }
}

fn token(
    mocks: Mocks,
    client: ClientCredentials,
    grant: TokenGrant,
) -> Result<OAuthTokens, OAuthErrorCode> {
    match block_on(mocks.oauth().token(client, grant, &origin())) {
        Ok(tokens) => Ok(tokens),
        Err(TokenEndpointError::OAuth(error)) => Err(error.code),
        Err(other) => panic!("{other:?}"),
    }
}

#[test]
fn a_code_is_exchanged_once_with_its_verifier_for_tokens_bound_to_the_client() {
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.code_is(stored(None, 50));
    mocks.ada_is_member(true);
    mocks.ada_is_registered();
    mocks.policies_are(vec![]);
    let opened = recording!(
        mocks
            .authorization_codes
            .expect_redeem_authorization_code()
            .withf(|hash, _, _, _, at, record| {
                *hash == TokenHash::of(CODE)
                    && *at == now()
                    && record.action == AuditAction::OAuthTokenIssued
                    && record.actor == AuditActor::Application(billing(&[CALLBACK]).id)
                    && record.target == Some(AuditTarget::new(TargetKind::User, ADA))
            })
            .times(1),
        |_, session, _, _, _, _| session,
        Ok(true)
    );
    let signed = mocks.signer_signs();

    let tokens = token(
        mocks,
        credentials(CLIENT_SECRET),
        exchange(VERIFIER, CALLBACK),
    )
    .unwrap();

    let session = opened.only();
    let grant = session.grant.unwrap();
    assert_eq!(grant.application_id, billing(&[CALLBACK]).id);
    assert_eq!(grant.scope.to_string(), "read:user");
    let refresh = tokens.refresh_token.unwrap();
    assert_eq!(session.refresh_token_hash, refresh.hash());
    assert_eq!(tokens.scope.to_string(), "read:user");
    let claims = signed.only();
    assert_eq!(claims.sub, ADA);
    assert_eq!(
        claims.client_id.as_deref(),
        Some(billing(&[CALLBACK]).client_id.as_str())
    );
    assert_eq!(claims.scope.as_deref(), Some("read:user"));
}

#[test]
fn a_wrong_unknown_or_inactive_client_is_an_invalid_client() {
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks
        .authorization_codes
        .expect_authorization_code()
        .never();
    // A wrong secret for a real application is on that organization's record.
    mocks.audit = MockAuditStore::new();
    mocks
        .audit
        .expect_record_audit()
        .withf(|record| {
            let app = billing(&[CALLBACK]).id;
            record.action == AuditAction::OAuthTokenRefused
                && record.outcome == AuditOutcome::Failure
                && record.actor == AuditActor::Application(app)
                && record.organization_id == Some(ACME)
                && record.origin == origin()
        })
        .times(1)
        .returning(|_| ready(Ok(())));
    assert_eq!(
        token(
            mocks,
            credentials("ghcs_wrong"),
            exchange(VERIFIER, CALLBACK)
        )
        .err(),
        Some(OAuthErrorCode::InvalidClient)
    );
    let mut inactive = billing(&[CALLBACK]);
    inactive.is_active = false;
    let mut mocks = Mocks::new();
    mocks
        .applications
        .expect_application_by_client_id()
        .returning(move |_| ready(Ok(Some((inactive.clone(), TokenHash::of(CLIENT_SECRET))))));
    assert_eq!(
        token(
            mocks,
            credentials(CLIENT_SECRET),
            exchange(VERIFIER, CALLBACK)
        )
        .err(),
        Some(OAuthErrorCode::InvalidClient)
    );
    let mut mocks = Mocks::new();
    mocks.applications.expect_application_by_client_id().never();
    mocks.audit = MockAuditStore::new();
    mocks.audit.expect_record_audit().never();
    let mut unknown = credentials(CLIENT_SECRET);
    unknown.client_id = "nobody".to_owned();
    assert_eq!(
        token(mocks, unknown, exchange(VERIFIER, CALLBACK)).err(),
        Some(OAuthErrorCode::InvalidClient)
    );
}

#[test]
fn a_wrong_verifier_redirect_uri_or_an_expired_code_is_an_invalid_grant_and_opens_nothing() {
    let other_verifier = "a".repeat(43);
    let cases = [
        (stored(None, 50), exchange(&other_verifier, CALLBACK)),
        (
            stored(None, 50),
            exchange(VERIFIER, "https://billing.example.com/cb/"),
        ),
        (stored(None, 0), exchange(VERIFIER, CALLBACK)),
    ];
    for (code, grant) in cases {
        assert_eq!(
            refused_without_redeeming(code, grant),
            OAuthErrorCode::InvalidGrant
        );
    }
}

#[test]
fn a_code_used_twice_fails_and_ends_what_its_first_use_issued() {
    let first = SessionId::from_uuid(Uuid::from_u128(0x5e55));
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.code_is(stored(Some(first), 50));
    mocks
        .authorization_codes
        .expect_redeem_authorization_code()
        .never();
    let ended = recording!(
        mocks.sessions.expect_end_session().times(1),
        |id, _, _, _| id,
        Ok(true)
    );

    assert_eq!(
        token(
            mocks,
            credentials(CLIENT_SECRET),
            exchange(VERIFIER, CALLBACK)
        )
        .err(),
        Some(OAuthErrorCode::InvalidGrant)
    );
    assert_eq!(ended.only(), first);
}

#[test]
fn another_clients_code_or_an_unknown_code_is_an_invalid_grant() {
    let mut theirs = stored(None, 50);
    theirs.code.application_id = ApplicationId::from_uuid(Uuid::from_u128(0xbad));
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.code_is(theirs);
    assert_eq!(
        token(
            mocks,
            credentials(CLIENT_SECRET),
            exchange(VERIFIER, CALLBACK)
        )
        .err(),
        Some(OAuthErrorCode::InvalidGrant)
    );
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks
        .authorization_codes
        .expect_authorization_code()
        .returning(|_| ready(Ok(None)));
    assert_eq!(
        token(
            mocks,
            credentials(CLIENT_SECRET),
            exchange(VERIFIER, CALLBACK)
        )
        .err(),
        Some(OAuthErrorCode::InvalidGrant)
    );
}

// ---------------------------------------------------------------------------------------------
// OpenID Connect: the ID token, userinfo
// ---------------------------------------------------------------------------------------------

/// The success test's mocks for an exchange of `code`.
fn exchanging(code: StoredCode) -> Mocks {
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.code_is(code);
    mocks.ada_is_member(true);
    mocks.ada_is_registered();
    mocks.policies_are(vec![]);
    mocks
        .authorization_codes
        .expect_redeem_authorization_code()
        .times(1)
        .returning(|_, _, _, _, _, _| ready(Ok(true)));
    mocks
}

#[test]
fn an_openid_exchange_adds_an_id_token_for_the_client_with_the_nonce_sign_in_and_at_hash() {
    let mut code = stored(None, 50);
    code.code.scope = Scope::parse("openid email").unwrap();
    code.code.nonce = Some(Nonce::parse("n-0S6_WzA2Mj").unwrap());
    let mut mocks = exchanging(code);
    mocks.signer_signs();
    let id_tokens = Seen::new();
    mocks
        .signer
        .expect_sign_id_token()
        .times(1)
        .returning(id_tokens.signing("id.token.signature"));

    let tokens = token(
        mocks,
        credentials(CLIENT_SECRET),
        exchange(VERIFIER, CALLBACK),
    )
    .unwrap();

    assert_eq!(tokens.id_token.as_deref(), Some("id.token.signature"));
    let claims = id_tokens.only();
    let client_id = billing(&[CALLBACK]).client_id.as_str().to_owned();
    assert_eq!(
        (claims.aud.as_str(), claims.azp.as_str()),
        (client_id.as_str(), client_id.as_str())
    );
    assert_eq!(claims.iss, settings().issuer);
    assert_eq!(claims.sub, ADA);
    assert_eq!(claims.nonce.as_deref(), Some("n-0S6_WzA2Mj"));
    assert_eq!(
        claims.at_hash,
        at_hash(SIGNED),
        "of the access token issued with it"
    );
    assert_eq!(claims.auth_time, signed_in_at().unix_timestamp());
    assert_eq!(claims.iat, now().unix_timestamp());
    assert_eq!(claims.exp, now().unix_timestamp() + tokens.expires_in);
    assert_eq!(claims.amr, ["pwd"]);
    assert_eq!(claims.email.as_deref(), Some(ADA_EMAIL));
    assert_eq!(claims.email_verified, Some(false));
    assert_eq!(claims.name, None, "no profile scope");
    assert_eq!(
        (claims.org_id, claims.org_role),
        (Some(ACME), Some("admin".to_owned())),
        "the application's organization, with Ada's role in it"
    );
    assert!(
        claims.org_permissions.is_empty(),
        "`openid email` grants no API scope: none of the role's permissions"
    );
}

#[test]
fn an_applications_tokens_speak_for_its_organization() {
    let mut mocks = exchanging(stored(None, 50));
    let signed = mocks.signer_signs();
    mocks.signer.expect_sign_id_token().never();
    token(
        mocks,
        credentials(CLIENT_SECRET),
        exchange(VERIFIER, CALLBACK),
    )
    .unwrap();
    let claims = signed.only();
    assert_eq!(claims.org_id, Some(ACME));
    assert_eq!(claims.org_role, Some("admin".to_owned()));
}

/// The tokens of an exchange of a code granted `scope`: the access token's claims and the ID
/// token's (for `openid`).
fn exchanged_claims(scope: &str) -> (AccessClaims, Option<IdTokenClaims>) {
    let mut code = stored(None, 50);
    code.code.scope = Scope::parse(scope).unwrap();
    let mut mocks = exchanging(code);
    let signed = mocks.signer_signs();
    let id_tokens = Seen::new();
    mocks
        .signer
        .expect_sign_id_token()
        .returning(id_tokens.signing("id.token.signature"));
    token(
        mocks,
        credentials(CLIENT_SECRET),
        exchange(VERIFIER, CALLBACK),
    )
    .unwrap();
    (signed.only(), id_tokens.all().into_iter().next())
}

#[test]
fn an_openid_token_is_meant_for_the_application_alone_and_grants_none_of_the_role() {
    let client_id = billing(&[CALLBACK]).client_id.as_str().to_owned();
    for scope in ["openid email", "openid", "read:user"] {
        let (access, id_token) = exchanged_claims(scope);
        assert_eq!(
            access.aud,
            Audience::Many(vec![client_id.clone()]),
            "{scope}: Gatehouse is not its audience"
        );
        assert_eq!(access.org_id, Some(ACME), "{scope}");
        assert_eq!(access.org_role.as_deref(), Some("admin"), "{scope}");
        assert!(access.org_permissions.is_empty(), "{scope}: {access:?}");
        if let Some(id_token) = id_token {
            assert!(id_token.org_permissions.is_empty(), "{scope}");
        }
    }
}

#[test]
fn an_api_scope_names_gatehouse_beside_the_application_and_narrows_the_role_to_what_it_covers() {
    let client_id = billing(&[CALLBACK]).client_id.as_str().to_owned();
    let (access, id_token) = exchanged_claims("openid org:read");
    assert_eq!(access.aud, Audience::gatehouse_and(&client_id));
    // Ada is an admin: of her role, what `org:read` covers (ApiScope's own table).
    let reads = ["organization.read", "applications.read", "audit.read"];
    assert_eq!(access.org_permissions, reads);
    assert_eq!(id_token.unwrap().org_permissions, reads);

    let (access, _) = exchanged_claims("members:read members:write");
    assert_eq!(access.aud, Audience::gatehouse_and(&client_id));
    assert_eq!(
        access.org_permissions,
        [
            "organization.members.read",
            "organization.members.create",
            "organization.members.invite",
            "organization.members.update",
            "organization.members.delete",
        ]
    );
}

#[test]
fn an_authorization_request_may_name_only_the_applications_organization() {
    for (named, refused) in [
        (ACME.to_string(), false),
        (Uuid::from_u128(0x610b_e700).to_string(), true),
        ("acme".to_owned(), true),
    ] {
        let mut asked = request();
        asked.organization_id = Some(named.clone());
        let mocks = may_grant();
        let answer = authorize(mocks, asked, true);
        if refused {
            let (_, query) = redirected(answer);
            assert_eq!(param(&query, "error"), Some("invalid_request"), "{named}");
            assert_eq!(param(&query, "code"), None);
        } else {
            assert!(
                matches!(answer, Ok(Authorization::Granted { .. })),
                "{answer:?}"
            );
        }
    }
}

#[test]
fn an_exchange_without_openid_signs_no_id_token() {
    let mut mocks = exchanging(stored(None, 50));
    mocks.signer_signs();
    mocks.signer.expect_sign_id_token().never();
    let tokens = token(
        mocks,
        credentials(CLIENT_SECRET),
        exchange(VERIFIER, CALLBACK),
    )
    .unwrap();
    assert_eq!(tokens.id_token, None);
}

fn ada_with_scope(scope: &str) -> Agent {
    Agent::Person(ada_granted(scope))
}

#[test]
fn userinfo_tells_what_the_scope_allows_and_only_to_an_openid_token() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    let oauth = mocks.oauth();
    let everything = block_on(oauth.userinfo(&ada_with_scope("openid email profile"))).unwrap();
    assert_eq!(everything.sub, ADA);
    assert_eq!(everything.email.as_deref(), Some(ADA_EMAIL));
    assert_eq!(everything.email_verified, Some(false));
    assert_eq!(everything.name.as_deref(), Some("Ada Lovelace"));
    let who = block_on(oauth.userinfo(&ada_with_scope("openid"))).unwrap();
    assert_eq!((who.email, who.name), (None, None));
    for agent in [ada_with_scope("email profile"), ada_with_scope("")] {
        match block_on(oauth.userinfo(&agent)) {
            Err(TokenEndpointError::OAuth(error)) => {
                assert_eq!(error.code, OAuthErrorCode::InsufficientScope)
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn discovery_names_the_endpoints_under_the_issuer() {
    let discovery = Mocks::new().oauth().discovery();
    let issuer = settings().issuer;
    assert_eq!(discovery.issuer, issuer);
    assert_eq!(discovery.token_endpoint, format!("{issuer}/oauth/token"));
    assert_eq!(
        discovery.userinfo_endpoint,
        format!("{issuer}/oauth/userinfo")
    );
    assert_eq!(
        discovery.revocation_endpoint,
        format!("{issuer}/oauth/revoke")
    );
    assert_eq!(
        discovery.introspection_endpoint,
        format!("{issuer}/oauth/introspect")
    );
    assert_eq!(
        discovery.jwks_uri,
        format!("{issuer}/.well-known/jwks.json")
    );
    assert!(discovery.scopes_supported.contains(&"openid"));
    assert!(discovery.scopes_supported.contains(&"webhooks:write"));
}

// ---------------------------------------------------------------------------------------------
// Client credentials: machine tokens
// ---------------------------------------------------------------------------------------------

fn client_credentials(scope: &str) -> TokenGrant {
    TokenGrant::ClientCredentials {
        scope: Some(scope.to_owned()),
    }
}

#[test]
fn client_credentials_issue_a_machine_token_of_the_application_in_its_organization() {
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.acme_is_on(Plan::Enterprise);
    let signed = Seen::new();
    mocks
        .signer
        .expect_sign_machine()
        .times(1)
        .returning(signed.signing("machine.token.signature"));
    mocks.audit = MockAuditStore::new();
    mocks
        .audit
        .expect_record_audit()
        .withf(|record| {
            let app = billing(&[CALLBACK]).id;
            record.action == AuditAction::OAuthClientCredentialsIssued
                && record.actor == AuditActor::Application(app)
                && record.organization_id == Some(ACME)
                && record.target == Some(AuditTarget::new(TargetKind::Application, app))
        })
        .times(1)
        .returning(|_| ready(Ok(())));

    let tokens = token(
        mocks,
        credentials(CLIENT_SECRET),
        client_credentials("org:read members:read"),
    )
    .unwrap();

    assert_eq!(tokens.access_token, "machine.token.signature");
    assert_eq!(tokens.refresh_token, None);
    assert_eq!(tokens.id_token, None);
    assert_eq!(tokens.scope.to_string(), "org:read members:read");
    assert_eq!(tokens.expires_in, MACHINE_TOKEN_SECONDS);
    let claims = signed.only();
    let client_id = billing(&[CALLBACK]).client_id.as_str().to_owned();
    assert_eq!(
        (claims.sub.as_str(), claims.client_id.as_str()),
        (client_id.as_str(), client_id.as_str())
    );
    assert_eq!(claims.org_id, ACME);
    assert_eq!(claims.aud, Audience::gatehouse_and(&client_id));
    assert_eq!(claims.scope, "org:read members:read");
    assert_eq!(claims.exp - claims.iat, MACHINE_TOKEN_SECONDS);
}

#[test]
fn client_credentials_need_the_enterprise_plan_and_api_scopes_only() {
    for plan in [Plan::Free, Plan::Pro, Plan::Business] {
        let mut mocks = Mocks::new();
        mocks.client_is_billing();
        mocks.acme_is_on(plan);
        mocks.signer.expect_sign_machine().never();
        assert_eq!(
            token(
                mocks,
                credentials(CLIENT_SECRET),
                client_credentials("org:read")
            )
            .err(),
            Some(OAuthErrorCode::UnauthorizedClient),
            "{plan:?}"
        );
    }
    for scope in ["", "openid", "org:read profile", "admin"] {
        let mut mocks = Mocks::new();
        mocks.client_is_billing();
        mocks.acme_is_on(Plan::Enterprise);
        mocks.signer.expect_sign_machine().never();
        assert_eq!(
            token(mocks, credentials(CLIENT_SECRET), client_credentials(scope)).err(),
            Some(OAuthErrorCode::InvalidScope),
            "{scope:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Revocation and introspection
// ---------------------------------------------------------------------------------------------

fn granted_session(application: ApplicationId) -> Session {
    Session {
        created_at: now() - Duration::hours(1),
        expires_at: now() + Duration::days(29),
        last_used_at: now() - Duration::minutes(1),
        grant: Some(ClientGrant {
            application_id: application,
            client_id: billing(&[CALLBACK]).client_id,
            scope: Scope::parse("openid").unwrap(),
        }),
        ..ada_session()
    }
}

impl Mocks {
    fn refresh_token_is(&mut self, session: Option<Session>) {
        let scope_of = session.clone();
        self.sessions
            .expect_session_by_refresh_token()
            .returning(move |_, _| ready(Ok(scope_of.clone())));
        self.refresh_token_opens(session);
    }
}

#[test]
fn a_refresh_grant_answers_with_the_sessions_scope_read_in_the_refreshs_one_round_trip() {
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.refresh_token_opens(Some(granted_session(billing(&[CALLBACK]).id)));
    // The scope comes with the refresh's own read of the session, not a second one.
    mocks.sessions.expect_session_by_refresh_token().never();
    // Used a minute ago: the one write a refresh makes at most every 30 s.
    mocks
        .sessions
        .expect_touch_session()
        .times(1)
        .returning(|_, _| ready(Ok(true)));
    mocks.ada_is_registered();
    let signed = mocks.signer_signs();
    let tokens = token(
        mocks,
        credentials(CLIENT_SECRET),
        TokenGrant::RefreshToken {
            refresh_token: REFRESH_TOKEN.to_owned(),
        },
    )
    .unwrap();
    assert_eq!(tokens.scope.to_string(), "openid");
    assert!(tokens.refresh_token.is_none() && tokens.id_token.is_none());
    let claims = signed.only();
    assert_eq!(claims.scope.as_deref(), Some("openid"));
    // Refreshed, an `openid` token is still the application's alone, granting nothing.
    let client_id = billing(&[CALLBACK]).client_id.as_str().to_owned();
    assert_eq!(claims.aud, Audience::Many(vec![client_id]));
    assert!(claims.org_permissions.is_empty());
}

#[test]
fn revoking_the_clients_refresh_token_ends_its_session_on_record() {
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.refresh_token_is(Some(granted_session(billing(&[CALLBACK]).id)));
    mocks
        .sessions
        .expect_end_session()
        .withf(|id, at, event, record| {
            ada_logs_out_now(id, at, event)
                && record.action == AuditAction::OAuthTokenRevoked
                && record.actor == AuditActor::Application(billing(&[CALLBACK]).id)
                && record.organization_id == Some(ACME)
                && record.target == Some(AuditTarget::new(TargetKind::User, ADA))
        })
        .times(1)
        .returning(|_, _, _, _| ready(Ok(true)));

    block_on(mocks.oauth().revoke(
        credentials(CLIENT_SECRET),
        "ghr_the-refresh-token",
        &origin(),
    ))
    .unwrap();
}

#[test]
fn another_clients_token_is_neither_revoked_nor_shown() {
    let theirs = ApplicationId::from_uuid(Uuid::from_u128(0xbad));
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.refresh_token_is(Some(granted_session(theirs)));
    mocks.sessions.expect_end_session().never();
    let oauth = mocks.oauth();
    block_on(oauth.revoke(credentials(CLIENT_SECRET), "ghr_theirs", &origin())).unwrap();
    assert_eq!(
        block_on(oauth.introspect(credentials(CLIENT_SECRET), "ghr_theirs", &origin())).unwrap(),
        Introspection::Inactive
    );
}

#[test]
fn introspection_describes_the_clients_live_refresh_token() {
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.ada_is_registered();
    mocks.refresh_token_is(Some(granted_session(billing(&[CALLBACK]).id)));
    let Introspection::Active(token) = block_on(mocks.oauth().introspect(
        credentials(CLIENT_SECRET),
        "ghr_ours",
        &origin(),
    ))
    .unwrap() else {
        panic!("inactive");
    };
    assert_eq!(token.kind, IntrospectedKind::Refresh);
    assert_eq!(token.sub, ADA.to_string());
    assert_eq!(token.username.as_deref(), Some(ADA_EMAIL));
    assert_eq!(token.scope.to_string(), "openid");
    assert_eq!(token.client_id, billing(&[CALLBACK]).client_id.as_str());
    assert_eq!(token.exp, (now() + Duration::days(29)).unix_timestamp());
}

#[test]
fn a_machine_token_cannot_be_revoked() {
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.acme_is_on(Plan::Enterprise);
    let client_id = billing(&[CALLBACK]).client_id.as_str().to_owned();
    mocks.signer.expect_verify().returning(move |_| {
        ready(Ok(BearerClaims::Machine(MachineClaims {
            exp: now().unix_timestamp() + 600,
            ..machine_claims(&client_id, "org:read")
        })))
    });
    mocks.sessions.expect_end_session().never();
    match block_on(
        mocks
            .oauth()
            .revoke(credentials(CLIENT_SECRET), "a.machine.token", &origin()),
    ) {
        Err(TokenEndpointError::OAuth(error)) => {
            assert_eq!(error.code, OAuthErrorCode::UnsupportedTokenType)
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The organization admits the member at /oauth/authorize as at every other way in
// ---------------------------------------------------------------------------------------------

/// Acme (enterprise) requires a second factor, with no grace left; Ada's sign-in on the pages
/// used a password only.
fn acme_requires_a_second_factor(mocks: &mut Mocks) {
    mocks.application_is(Some(billing(&[CALLBACK])));
    mocks.acme_is_on(Plan::Enterprise);
    mocks.sso_is_off();
    mocks.memberships.expect_membership().returning(|_, _| {
        let mut membership = ada_in_acme();
        membership.plan = Plan::Enterprise;
        membership.joined_at = now() - Duration::days(30);
        ready(Ok(Some(membership)))
    });
    mocks.policies = acme_requires_mfa_at_once(
        crate::model::MfaMethod::ALL.to_vec(),
        now() - Duration::days(2),
    );
    mocks.no_code_is_saved();
}

fn ada_has_a_confirmed_factor(mocks: &mut Mocks, confirmed: bool) {
    use crate::model::{MfaFactor, MfaFactorId, MfaMethod};
    let mut mfa = crate::ports::MockMfaStore::new();
    mfa.expect_mfa_factors().returning(move |_| {
        ready(Ok(vec![MfaFactor {
            id: MfaFactorId::from_uuid(Uuid::from_u128(0xf1)),
            user_id: ADA,
            kind: MfaMethod::Totp,
            created_at: now() - Duration::days(1),
            confirmed_at: confirmed.then(|| now() - Duration::days(1)),
            last_used_at: None,
        }]))
    });
    mocks.mfa = mfa;
}

#[test]
fn a_member_without_the_required_second_factor_gets_no_code() {
    let mut mocks = Mocks::new();
    acme_requires_a_second_factor(&mut mocks);
    ada_has_a_confirmed_factor(&mut mocks, false);

    match authorize(mocks, request(), true) {
        Ok(Authorization::NotAdmitted { reason, .. }) => {
            assert_eq!(reason, super::NotAdmitted::SecondFactorNeeded);
        }
        other => panic!("expected the page that says why, got {other:?}"),
    }
}

#[test]
fn a_member_who_has_a_second_factor_is_asked_to_sign_in_with_it() {
    let mut mocks = Mocks::new();
    acme_requires_a_second_factor(&mut mocks);
    ada_has_a_confirmed_factor(&mut mocks, true);

    assert!(matches!(
        authorize(mocks, request(), true),
        Ok(Authorization::SignIn { .. })
    ));
}

#[test]
fn prompt_none_answers_interaction_required_when_a_second_factor_is_needed() {
    let mut mocks = Mocks::new();
    acme_requires_a_second_factor(&mut mocks);
    ada_has_a_confirmed_factor(&mut mocks, true);
    let mut silent = request();
    silent.prompt = Some("none".to_owned());

    let (_, query) = redirected(authorize(mocks, silent, true));
    assert_eq!(param(&query, "error"), Some("interaction_required"));
    assert_eq!(param(&query, "state"), Some("xyz 1"));
}

#[test]
fn a_member_outside_the_ip_allowlist_gets_no_code() {
    let mut mocks = Mocks::new();
    mocks.application_is(Some(billing(&[CALLBACK])));
    mocks.acme_is_on(Plan::Enterprise);
    mocks.sso_is_off();
    mocks.memberships.expect_membership().returning(|_, _| {
        let mut membership = ada_in_acme();
        membership.plan = Plan::Enterprise;
        ready(Ok(Some(membership)))
    });
    // The request comes from 192.0.2.7 (`origin()`).
    mocks.policies = acme_allows_only("198.51.100.0/24");
    mocks.no_code_is_saved();

    match authorize(mocks, request(), true) {
        Ok(Authorization::NotAdmitted { reason, .. }) => {
            assert_eq!(reason, super::NotAdmitted::AddressNotAllowed);
        }
        other => panic!("expected the page that says why, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// API scopes need the user's consent
// ---------------------------------------------------------------------------------------------

/// Billing of Acme, enterprise, Ada a member: admitted, with no code saved yet.
fn admitted_mocks() -> Mocks {
    let mut mocks = Mocks::new();
    mocks.application_is(Some(billing(&[CALLBACK])));
    mocks.acme_is_on(Plan::Enterprise);
    mocks.ada_is_member(true);
    mocks
}

fn asking_for(scope: &str) -> AuthorizeRequest {
    AuthorizeRequest {
        scope: Some(scope.to_owned()),
        ..request()
    }
}

fn ada_consented_to(mocks: &mut Mocks, scope: &'static str) {
    mocks
        .authorization_codes
        .expect_consented_scopes()
        .withf(|user, app| *user == ADA && *app == billing(&[CALLBACK]).id)
        .returning(|_, _| ready(Ok(ApiScopes::of(&Scope::parse(scope).unwrap()))));
}

#[test]
fn api_scopes_the_user_has_not_consented_to_ask_for_consent_first() {
    let mut mocks = admitted_mocks();
    ada_consented_to(&mut mocks, "org:read");
    mocks.no_code_is_saved();

    match authorize(mocks, asking_for("openid org:read members:read"), true) {
        Ok(Authorization::Consent { scopes, .. }) => {
            assert_eq!(
                scopes.to_string(),
                "org:read members:read",
                "all it asks for"
            );
        }
        other => panic!("expected the consent page, got {other:?}"),
    }
}

#[test]
fn a_remembered_consent_is_not_asked_for_again() {
    let mut mocks = admitted_mocks();
    ada_consented_to(&mut mocks, "members:read org:read");
    mocks
        .authorization_codes
        .expect_save_authorization_code()
        .times(1)
        .returning(|_, _| ready(Ok(())));

    let (base, query) = redirected(authorize(mocks, asking_for("org:read"), true));
    assert_eq!(base, CALLBACK);
    assert!(param(&query, "code").is_some());
}

#[test]
fn scopes_that_are_not_api_scopes_need_no_consent() {
    let mut mocks = admitted_mocks();
    mocks.authorization_codes.expect_consented_scopes().never();
    mocks.codes_are_saved();

    let (_, query) = redirected(authorize(mocks, asking_for("openid email profile"), true));
    assert!(param(&query, "code").is_some());
}

#[test]
fn prompt_none_answers_consent_required() {
    let mut mocks = admitted_mocks();
    ada_consented_to(&mut mocks, "");
    let mut silent = asking_for("org:read");
    silent.prompt = Some("none".to_owned());

    let (_, query) = redirected(authorize(mocks, silent, true));
    assert_eq!(param(&query, "error"), Some("consent_required"));
    assert_eq!(param(&query, "state"), Some("xyz 1"));
}

fn answer_consent(
    mocks: Mocks,
    request: AuthorizeRequest,
    allowed: bool,
) -> Result<Authorization, AuthorizeError> {
    let session = ada_on_the_pages();
    block_on(
        mocks
            .oauth()
            .consent(request, Some(&session), allowed, &origin()),
    )
}

#[test]
fn allowing_remembers_the_consent_with_the_earlier_one_and_sends_a_code() {
    let mut mocks = admitted_mocks();
    let saved = Seen::new();
    let kept = saved.clone();
    let granted = std::sync::Arc::new(std::sync::Mutex::new(ApiScopes::of(
        &Scope::parse("webhooks:read").unwrap(),
    )));
    let read = std::sync::Arc::clone(&granted);
    mocks
        .authorization_codes
        .expect_consented_scopes()
        .returning(move |_, _| ready(Ok(read.lock().unwrap().clone())));
    let write = std::sync::Arc::clone(&granted);
    mocks
        .authorization_codes
        .expect_save_consent()
        .times(1)
        .returning(move |consent, record| {
            *write.lock().unwrap() = consent.scopes.clone();
            kept.record((consent, record));
            ready(Ok(()))
        });
    mocks
        .authorization_codes
        .expect_save_authorization_code()
        .times(1)
        .returning(|_, _| ready(Ok(())));

    let (base, query) = redirected(answer_consent(mocks, asking_for("openid org:read"), true));
    assert_eq!(base, CALLBACK);
    assert!(param(&query, "code").is_some());
    let (consent, record) = saved.only();
    assert_eq!(consent.user_id, ADA);
    assert_eq!(consent.application_id, billing(&[CALLBACK]).id);
    assert_eq!(consent.scopes.to_string(), "webhooks:read org:read");
    assert_eq!(consent.granted_at, now());
    assert_eq!(record.action, AuditAction::OAuthConsentGranted);
    assert_eq!(record.actor, AuditActor::User(ADA));
}

#[test]
fn denying_tells_the_client_access_denied_and_remembers_nothing() {
    let mut mocks = admitted_mocks();
    mocks.authorization_codes.expect_save_consent().never();
    mocks.no_code_is_saved();

    let (base, query) = redirected(answer_consent(mocks, asking_for("org:read"), false));
    assert_eq!(base, CALLBACK);
    assert_eq!(param(&query, "error"), Some("access_denied"));
    assert_eq!(param(&query, "state"), Some("xyz 1"));
    assert_eq!(param(&query, "code"), None);
}

// ---------------------------------------------------------------------------------------------
// PKCE is optional for a confidential client, unless its application requires it
// ---------------------------------------------------------------------------------------------

/// A request with the spec's own fields only: no `code_challenge`, no method.
fn without_pkce() -> AuthorizeRequest {
    AuthorizeRequest {
        code_challenge: None,
        code_challenge_method: None,
        ..request()
    }
}

/// Mocks for an authorization of `app` that may issue a code; the code it saves.
fn granting(app: Application) -> (Mocks, Seen<NewAuthorizationCode>) {
    let mut mocks = Mocks::new();
    mocks.application_is(Some(app));
    mocks.acme_is_on(Plan::Enterprise);
    mocks.ada_is_member(true);
    let saved = recording!(
        mocks.authorization_codes.expect_save_authorization_code(),
        |new, _| new,
        Ok(())
    );
    (mocks, saved)
}

#[test]
fn a_request_without_pkce_gets_a_code_with_no_challenge() {
    let (mocks, saved) = granting(billing(&[CALLBACK]));

    let (base, query) = redirected(authorize(mocks, without_pkce(), true));

    assert_eq!(base, CALLBACK);
    assert_eq!(
        param(&query, "code"),
        Some(secret_of(TokenKind::AuthorizationCode).as_str())
    );
    assert_eq!(param(&query, "state"), Some("xyz 1"));
    assert_eq!(saved.only().code.challenge, None);
}

#[test]
fn an_application_that_requires_pkce_refuses_a_request_without_a_challenge_at_the_client() {
    let mut strict = billing(&[CALLBACK]);
    strict.require_pkce = true;
    let (mocks, saved) = granting(strict.clone());

    let (base, query) = redirected(authorize(mocks, without_pkce(), true));

    assert_eq!(base, CALLBACK);
    assert_eq!(param(&query, "error"), Some("invalid_request"));
    assert_eq!(
        param(&query, "error_description"),
        Some("code_challenge is required (PKCE with S256): the application requires PKCE")
    );
    assert_eq!(param(&query, "state"), Some("xyz 1"));
    assert_eq!(param(&query, "code"), None);
    assert!(saved.all().is_empty(), "no code issued");

    // With a challenge, the same application issues a code bound to it.
    let (mocks, saved) = granting(strict);
    let (_, query) = redirected(authorize(mocks, request(), true));
    assert!(param(&query, "code").is_some());
    assert_eq!(
        saved.only().code.challenge.map(|c| c.as_str().to_owned()),
        Some(CHALLENGE.to_owned())
    );
}

#[test]
fn a_method_without_a_challenge_or_plain_is_refused_even_where_pkce_is_optional() {
    for method in ["S256", "plain"] {
        let (mocks, saved) = granting(billing(&[CALLBACK]));
        let asked = AuthorizeRequest {
            code_challenge_method: Some(method.to_owned()),
            ..without_pkce()
        };
        let (_, query) = redirected(authorize(mocks, asked, true));
        assert_eq!(param(&query, "error"), Some("invalid_request"), "{method}");
        assert!(saved.all().is_empty());
    }
    let (mocks, saved) = granting(billing(&[CALLBACK]));
    let plain = AuthorizeRequest {
        code_challenge_method: Some("plain".to_owned()),
        ..request()
    };
    let (_, query) = redirected(authorize(mocks, plain, true));
    assert_eq!(param(&query, "error"), Some("invalid_request"));
    assert!(saved.all().is_empty());
}

/// A code issued without a challenge, unused, valid for 50 more seconds.
fn unchallenged() -> StoredCode {
    let mut code = stored(None, 50);
    code.code.challenge = None;
    code
}

fn exchange_without_verifier() -> TokenGrant {
    TokenGrant::AuthorizationCode {
        code: CODE.to_owned(),
        redirect_uri: Some(CALLBACK.to_owned()),
        code_verifier: None,
    }
}

#[test]
fn a_code_issued_without_a_challenge_is_exchanged_with_the_client_secret_alone() {
    let mut mocks = exchanging(unchallenged());
    mocks.signer_signs();

    let tokens = token(
        mocks,
        credentials(CLIENT_SECRET),
        exchange_without_verifier(),
    )
    .unwrap();

    assert!(tokens.refresh_token.is_some());
    assert_eq!(tokens.scope.to_string(), "read:user");
}

/// The exchange's refusal, with nothing redeemed or signed: the code stays as it was.
fn refused_without_redeeming(code: StoredCode, grant: TokenGrant) -> OAuthErrorCode {
    let mut mocks = Mocks::new();
    mocks.client_is_billing();
    mocks.code_is(code);
    mocks.ada_is_member(true);
    mocks
        .authorization_codes
        .expect_redeem_authorization_code()
        .never();
    mocks.signer.expect_sign().never();
    match token(mocks, credentials(CLIENT_SECRET), grant) {
        Err(code) => code,
        Ok(_) => panic!("the exchange was expected to fail"),
    }
}

#[test]
fn a_verifier_for_a_code_issued_without_a_challenge_is_an_invalid_grant() {
    // Even the verifier of a real challenge: the code was bound to none (no PKCE downgrade).
    assert_eq!(
        refused_without_redeeming(unchallenged(), exchange(VERIFIER, CALLBACK)),
        OAuthErrorCode::InvalidGrant
    );
}

#[test]
fn a_code_issued_with_a_challenge_needs_its_verifier_and_is_not_used_up_without_it() {
    assert_eq!(
        refused_without_redeeming(stored(None, 50), exchange_without_verifier()),
        OAuthErrorCode::InvalidRequest
    );
    let empty = TokenGrant::AuthorizationCode {
        code: CODE.to_owned(),
        redirect_uri: Some(CALLBACK.to_owned()),
        code_verifier: Some(String::new()),
    };
    assert_eq!(
        refused_without_redeeming(stored(None, 50), empty),
        OAuthErrorCode::InvalidRequest
    );
}
