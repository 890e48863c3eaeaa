//! The browser's session on the hosted pages: a cookie holding the session's refresh token,
//! `HttpOnly`, `SameSite=Lax`, `Secure` when the public URL is https.

use actix_web::{
    cookie::{time::Duration as CookieAge, Cookie, SameSite},
    HttpRequest, HttpResponse,
};
use gatehouse_domain::{model::SecretToken, service::BrowserSession};

use super::response::see_other;
use crate::state::AppState;

/// The session cookie: the refresh token of the session a sign-in on the pages opened.
pub const SESSION_COOKIE: &str = "gatehouse_session";

/// A cookie of the pages: for every path, never readable by a script.
pub(super) fn cookie(
    name: &'static str,
    value: String,
    secure: bool,
    same_site: SameSite,
) -> Cookie<'static> {
    Cookie::build(name, value)
        .path("/")
        .http_only(true)
        .secure(secure)
        .same_site(same_site)
        .finish()
}

/// `response` with `cookie` set; `what` names it in the log if that fails.
pub(super) fn with_cookie(
    mut response: HttpResponse,
    cookie: &Cookie<'static>,
    what: &str,
) -> HttpResponse {
    if let Err(error) = response.add_cookie(cookie) {
        tracing::error!(%error, "setting the {what} cookie failed");
    }
    response
}

/// The answer that signs the browser in: the session cookie and a `303` to `location`.
pub fn open(state: &AppState, refresh_token: &SecretToken, location: &str) -> HttpResponse {
    with_session(state, see_other(location), refresh_token)
}

/// `response` with the session cookie (the session's refresh token): it signs the browser in.
pub fn with_session(
    state: &AppState,
    response: HttpResponse,
    refresh_token: &SecretToken,
) -> HttpResponse {
    let session = cookie(
        SESSION_COOKIE,
        refresh_token.expose().to_owned(),
        state.secure_cookies,
        SameSite::Lax,
    );
    with_cookie(response, &session, "session")
}

/// `response` with the session cookie emptied and expired: the browser forgets its session.
pub fn forgotten(state: &AppState, response: HttpResponse) -> HttpResponse {
    let mut gone = cookie(
        SESSION_COOKIE,
        String::new(),
        state.secure_cookies,
        SameSite::Lax,
    );
    gone.set_max_age(CookieAge::ZERO);
    with_cookie(response, &gone, "emptied session")
}

/// The person signed in on the pages, by the session cookie.
pub async fn signed_in(req: &HttpRequest, state: &AppState) -> Option<BrowserSession> {
    let token = req.cookie(SESSION_COOKIE)?;
    match state.auth.signed_in(token.value()).await {
        Ok(session) => session,
        Err(error) => {
            tracing::warn!(%error, "the page's session could not be read");
            None
        }
    }
}
