//! The hosted login page: `GET /login` shows it (in the branding of the application an OAuth
//! request names), `POST /login` signs in with a session cookie, `POST /logout` ends it. Both
//! forms carry an anti-forgery token that must match a cookie set with the page (the
//! double-submit pattern); the session cookie is `SameSite=Lax` on top of that.

use actix_web::{
    cookie::{time::Duration as CookieAge, Cookie, SameSite},
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use gatehouse_domain::{
    model::{Branding, ReturnPath, SecretToken, TokenKind, TotpCode},
    service::{BrowserSession, LoginError, SecondFactorProof, SignIn, VerifyError},
};

use gatehouse_domain::ports::SignInMethod;

use crate::extract::origin_of;
use crate::observe;
use crate::{
    pages::{login_page, message_page, mfa_page, LoginForm, MfaForm},
    routes::saml,
    state::AppState,
};

/// The session cookie: the refresh token of the session a sign-in on the page opened.
pub const SESSION_COOKIE: &str = "gatehouse_session";
/// The anti-forgery cookie that the forms' `csrf_token` must match.
pub const CSRF_COOKIE: &str = "gatehouse_csrf";

/// Where to go after signing in: a path of this service ([`ReturnPath`]), else `/login/done`
/// (no open redirect).
pub fn safe_return_to(raw: Option<&str>) -> String {
    raw.and_then(|path| ReturnPath::parse(path).ok())
        .unwrap_or_else(ReturnPath::done)
        .as_str()
        .to_owned()
}

fn cookie(name: &'static str, value: String, secure: bool, same_site: SameSite) -> Cookie<'static> {
    Cookie::build(name, value)
        .path("/")
        .http_only(true)
        .secure(secure)
        .same_site(same_site)
        .finish()
}

/// A page: HTML, never cached, never framed, no script. (No `form-action`: browsers apply it
/// to the redirects after a form too, and signing in ends on the client's redirect URI.)
pub fn html(status: StatusCode, body: String) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("X-Frame-Options", "DENY"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; \
             img-src https: data:; frame-ancestors 'none'; base-uri 'none'",
        ))
        .body(body)
}

/// The branding of the application that the pending authorization names, if any.
pub async fn look_for(state: &AppState, return_to: &str) -> Branding {
    let client_id = return_to
        .strip_prefix("/oauth/authorize?")
        .and_then(|query| {
            url::form_urlencoded::parse(query.as_bytes())
                .find(|(name, _)| name == "client_id")
                .map(|(_, value)| value.into_owned())
        });
    match client_id {
        Some(client_id) => match state.oauth.branding_for(&client_id).await {
            Ok(Some(branding)) => branding,
            Ok(None) => Branding::default(),
            Err(error) => {
                tracing::warn!(%error, "the login page's branding could not be read");
                Branding::default()
            }
        },
        None => Branding::default(),
    }
}

/// The login page with a fresh anti-forgery token (and its cookie).
async fn show(
    state: &AppState,
    status: StatusCode,
    return_to: &str,
    email: &str,
    error: Option<&str>,
) -> HttpResponse {
    let look = look_for(state, return_to).await;
    let token = state.ports.random.secret(TokenKind::Csrf);
    let body = login_page(
        &look,
        &LoginForm {
            email,
            error,
            csrf_token: token.expose(),
            return_to,
        },
    );
    with_csrf_cookie(state, html(status, body), &token)
}

/// The page with the anti-forgery cookie its forms' token must match.
pub(crate) fn with_csrf_cookie(
    state: &AppState,
    mut response: HttpResponse,
    token: &SecretToken,
) -> HttpResponse {
    let csrf = cookie(
        CSRF_COOKIE,
        token.expose().to_owned(),
        state.secure_cookies,
        SameSite::Strict,
    );
    if let Err(error) = response.add_cookie(&csrf) {
        tracing::error!(%error, "setting the anti-forgery cookie failed");
    }
    response
}

/// `GET /login?return_to=/oauth/authorize?...`
pub async fn page(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let return_to = url::form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(name, _)| name == "return_to")
        .map(|(_, value)| value.into_owned());
    let return_to = safe_return_to(return_to.as_deref());
    show(&state, StatusCode::OK, &return_to, "", None).await
}

/// A form's fields.
pub(crate) fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

pub(crate) fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map_or("", |(_, v)| v.as_str())
}

/// Whether the form's anti-forgery token is the cookie's (compared in constant time).
fn forgery_checked(req: &HttpRequest, fields: &[(String, String)]) -> bool {
    let Some(cookie) = req.cookie(CSRF_COOKIE) else {
        return false;
    };
    let (a, b) = (
        cookie.value().as_bytes(),
        field(fields, "csrf_token").as_bytes(),
    );
    !a.is_empty()
        && a.len() == b.len()
        && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn forged(look: &Branding) -> HttpResponse {
    html(
        StatusCode::FORBIDDEN,
        message_page(
            look,
            "This form has expired",
            "Go back, reload the page and try again.",
        ),
    )
}

/// A posted form's fields and its `return_to` (a path of this service), once its anti-forgery
/// token matches the cookie; else the page saying the form expired.
pub(crate) async fn checked_form(
    req: &HttpRequest,
    state: &AppState,
    body: &[u8],
) -> Result<(Vec<(String, String)>, String), HttpResponse> {
    let fields = form_fields(body);
    let return_to = safe_return_to(Some(field(&fields, "return_to")));
    if forgery_checked(req, &fields) {
        Ok((fields, return_to))
    } else {
        Err(forged(&look_for(state, &return_to).await))
    }
}

/// `POST /login`: email, password, csrf_token, return_to.
pub async fn sign_in(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> HttpResponse {
    let (fields, return_to) = match checked_form(&req, &state, &body).await {
        Ok(form) => form,
        Err(forged) => return forged,
    };
    let email = field(&fields, "email").trim().to_owned();
    let password = field(&fields, "password").to_owned();
    let signed_in = state
        .auth
        .login(&email, password, None, &origin_of(&req))
        .await;
    observe::sign_in(&state, SignInMethod::Password, &signed_in);
    match signed_in {
        Ok(SignIn::Tokens(tokens)) => open_page_session(&state, &tokens.refresh_token, &return_to),
        Ok(SignIn::SecondFactor(needed)) => {
            show_mfa(
                &state,
                StatusCode::OK,
                &return_to,
                needed.mfa_token.expose(),
                needed.webauthn_options.as_ref(),
                None,
            )
            .await
        }
        // The same words whether the email exists or not.
        Err(LoginError::InvalidCredentials) => {
            let message = "The email or password is wrong.";
            show(
                &state,
                StatusCode::UNAUTHORIZED,
                &return_to,
                &email,
                Some(message),
            )
            .await
        }
        // The same words whether the email exists or not, too.
        Err(LoginError::LockedOut(locked)) => {
            let minutes = (locked.seconds() + 59) / 60;
            let message = format!(
                "Too many failed sign-ins for this account. Try again in {minutes} minute{}.",
                if minutes == 1 { "" } else { "s" }
            );
            let mut response = show(
                &state,
                StatusCode::TOO_MANY_REQUESTS,
                &return_to,
                &email,
                Some(&message),
            )
            .await;
            if let Ok(value) = header::HeaderValue::from_str(&locked.seconds().to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        // The address signs in with its organization's identity provider: there it goes, and
        // back to where this sign-in was going.
        Err(LoginError::SsoRequired(sso_url)) => {
            let return_to: String =
                url::form_urlencoded::byte_serialize(return_to.as_bytes()).collect();
            HttpResponse::SeeOther()
                .insert_header((header::LOCATION, format!("{sso_url}?return_to={return_to}")))
                .insert_header((header::CACHE_CONTROL, "no-store"))
                .finish()
        }
        Err(LoginError::PasswordExpired) => {
            let message = "Your password has expired: renew it, then sign in again.";
            show(
                &state,
                StatusCode::FORBIDDEN,
                &return_to,
                &email,
                Some(message),
            )
            .await
        }
        Err(error) => {
            tracing::error!(%error, "signing in on the login page failed");
            let message = "Signing in is not possible right now. Try again in a moment.";
            show(
                &state,
                StatusCode::SERVICE_UNAVAILABLE,
                &return_to,
                &email,
                Some(message),
            )
            .await
        }
    }
}

/// The second step's page with a fresh anti-forgery token (and its cookie).
pub(crate) async fn show_mfa(
    state: &AppState,
    status: StatusCode,
    return_to: &str,
    mfa_token: &str,
    webauthn_options: Option<&serde_json::Value>,
    error: Option<&str>,
) -> HttpResponse {
    let look = look_for(state, return_to).await;
    let token = state.ports.random.secret(TokenKind::Csrf);
    let body = mfa_page(
        &look,
        &MfaForm {
            mfa_token,
            error,
            csrf_token: token.expose(),
            return_to,
            webauthn_options,
        },
    );
    with_csrf_cookie(state, html(status, body), &token)
}

/// `POST /login/mfa`: the second step on the hosted pages (csrf_token, return_to, mfa_token,
/// code: a TOTP code or a recovery code).
pub async fn verify_second_factor(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> HttpResponse {
    let (fields, return_to) = match checked_form(&req, &state, &body).await {
        Ok(form) => form,
        Err(forged) => return forged,
    };
    let mfa_token = field(&fields, "mfa_token").to_owned();
    let code = field(&fields, "code").trim().to_owned();
    let assertion = field(&fields, "webauthn");
    // A security key's answer when the page's script put one; else six digits are an
    // authenticator app's code, and anything else is tried as a recovery code.
    let proof = if !assertion.is_empty() {
        SecondFactorProof::Webauthn(
            serde_json::from_str(assertion).unwrap_or(serde_json::Value::Null),
        )
    } else if TotpCode::parse(&code).is_some() {
        SecondFactorProof::Code(code)
    } else {
        SecondFactorProof::RecoveryCode(code)
    };
    let verified = state
        .mfa
        .verify(&mfa_token, proof, None, &origin_of(&req))
        .await;
    observe::sign_in(&state, SignInMethod::SecondFactor, &verified);
    match verified {
        Ok(tokens) => open_page_session(&state, &tokens.refresh_token, &return_to),
        Err(VerifyError::WrongFactor) => {
            // The security key's challenge answered (or not) once: offer codes now.
            let message = "That code is not valid. Try the current one.";
            show_mfa(
                &state,
                StatusCode::UNAUTHORIZED,
                &return_to,
                &mfa_token,
                None,
                Some(message),
            )
            .await
        }
        Err(VerifyError::InvalidToken) => {
            let message = "Your sign-in took too long or had too many wrong codes. Sign in again.";
            show(
                &state,
                StatusCode::UNAUTHORIZED,
                &return_to,
                "",
                Some(message),
            )
            .await
        }
        Err(VerifyError::LockedOut(locked)) => {
            let minutes = (locked.seconds() + 59) / 60;
            let message = format!(
                "Too many failed sign-ins for this account. Try again in {minutes} minute{}.",
                if minutes == 1 { "" } else { "s" }
            );
            show(
                &state,
                StatusCode::TOO_MANY_REQUESTS,
                &return_to,
                "",
                Some(&message),
            )
            .await
        }
        Err(error) => {
            tracing::error!(%error, "the second step on the login page failed");
            let message = "Signing in is not possible right now. Try again in a moment.";
            show(
                &state,
                StatusCode::SERVICE_UNAVAILABLE,
                &return_to,
                "",
                Some(message),
            )
            .await
        }
    }
}

/// The answer that signs the browser in: the session cookie (the session's refresh token)
/// and a `303` to `location`.
pub fn open_page_session(
    state: &AppState,
    refresh_token: &SecretToken,
    location: &str,
) -> HttpResponse {
    let response = HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish();
    with_session_cookie(state, response, refresh_token)
}

/// The response with the session cookie (the session's refresh token): it signs the browser
/// in.
pub(crate) fn with_session_cookie(
    state: &AppState,
    mut response: HttpResponse,
    refresh_token: &SecretToken,
) -> HttpResponse {
    let session = cookie(
        SESSION_COOKIE,
        refresh_token.expose().to_owned(),
        state.secure_cookies,
        SameSite::Lax,
    );
    if let Err(error) = response.add_cookie(&session) {
        tracing::error!(%error, "setting the session cookie failed");
    }
    response
}

/// `POST /login/sso` (the login form's "Continue with SSO"): to the identity provider of the
/// email's organization, or the page again saying there is none.
pub async fn sign_in_with_sso(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> HttpResponse {
    let (fields, return_to) = match checked_form(&req, &state, &body).await {
        Ok(form) => form,
        Err(forged) => return forged,
    };
    let email = field(&fields, "email").trim().to_owned();
    match saml::continue_with_sso(&state, &email, &return_to).await {
        Ok(to_the_idp) => to_the_idp,
        Err(message) => {
            show(
                &state,
                StatusCode::NOT_FOUND,
                &return_to,
                &email,
                Some(message),
            )
            .await
        }
    }
}

/// `POST /logout`: ends the session of the cookie, forgets the cookie, back to the login page.
pub async fn sign_out(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> HttpResponse {
    let fields = form_fields(&body);
    if !forgery_checked(&req, &fields) {
        return forged(&Branding::default());
    }
    if let Some(session) = signed_in(&req, &state).await {
        if let Err(error) = state
            .auth
            .logout(&session.principal(), &origin_of(&req))
            .await
        {
            tracing::warn!(%error, "ending the page's session failed");
        }
    }
    let mut gone = cookie(
        SESSION_COOKIE,
        String::new(),
        state.secure_cookies,
        SameSite::Lax,
    );
    gone.set_max_age(CookieAge::ZERO);
    let mut response = HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/login"))
        .finish();
    if let Err(error) = response.add_cookie(&gone) {
        tracing::error!(%error, "clearing the session cookie failed");
    }
    response
}

/// The person signed in on the page, by the session cookie.
pub async fn signed_in(req: &HttpRequest, state: &AppState) -> Option<BrowserSession> {
    let token = req.cookie(SESSION_COOKIE)?;
    match state.auth.signed_in(token.value()).await {
        Ok(principal) => principal,
        Err(error) => {
            tracing::warn!(%error, "the page's session could not be read");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::safe_return_to;

    #[test]
    fn only_paths_of_this_service_are_returned_to() {
        assert_eq!(
            safe_return_to(Some("/oauth/authorize?a=b")),
            "/oauth/authorize?a=b"
        );
        for bad in [
            "https://evil.example.com",
            "//evil.example.com",
            "/\\evil.example.com",
            "evil",
            "",
        ] {
            assert_eq!(safe_return_to(Some(bad)), "/login/done", "{bad}");
        }
        assert_eq!(safe_return_to(None), "/login/done");
    }
}
