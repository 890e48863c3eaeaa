//! Anti-forgery for the pages' forms (the double-submit pattern): each form carries a token
//! that must match a `SameSite=Strict` cookie set with the page.

use std::{future::Future, pin::Pin};

use actix_web::{
    cookie::SameSite, dev::Payload, http::StatusCode, web, FromRequest, HttpRequest, HttpResponse,
    ResponseError,
};
use gatehouse_domain::model::{Branding, ReturnPath, SecretToken, TokenKind};
use subtle::ConstantTimeEq;

use super::{
    branding::branding_for,
    errors::forged,
    response::html,
    session::{self, cookie},
};
use crate::{extract::state, state::AppState};

/// The anti-forgery cookie that the forms' `csrf_token` must match.
pub const CSRF_COOKIE: &str = "gatehouse_csrf";

/// A fresh anti-forgery token for a form about to be shown.
fn fresh(state: &AppState) -> SecretToken {
    state.random.secret(TokenKind::Csrf)
}

/// A page with a form: `render` draws it around a fresh anti-forgery token, and the answer
/// sets the cookie that token must match.
pub fn form_page(
    state: &AppState,
    status: StatusCode,
    render: impl FnOnce(&str) -> String,
) -> HttpResponse {
    let token = fresh(state);
    let body = render(token.expose());
    with_cookie(state, html(status, body), &token)
}

/// The page with the anti-forgery cookie its form's token must match.
fn with_cookie(state: &AppState, response: HttpResponse, token: &SecretToken) -> HttpResponse {
    let csrf = cookie(
        CSRF_COOKIE,
        token.expose().to_owned(),
        state.secure_cookies,
        SameSite::Strict,
    );
    session::with_cookie(response, &csrf, "anti-forgery")
}

/// A posted form whose anti-forgery token matched the cookie: as an extractor, a page's
/// handler gets it only then; else the answer is the page saying the form expired.
pub struct Form {
    fields: Vec<(String, String)>,
    /// Where to go once done: the form's `return_to` when it is a path of this service, else
    /// `/login/done`.
    pub return_to: String,
}

impl Form {
    /// A field's value; empty when the form has none.
    pub fn field(&self, name: &str) -> &str {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Where to go after signing in: a path of this service ([`ReturnPath`]), else `/login/done`
/// (no open redirect).
pub fn safe_return_to(raw: Option<&str>) -> String {
    raw.and_then(|path| ReturnPath::parse(path).ok())
        .unwrap_or_else(ReturnPath::done)
        .as_str()
        .to_owned()
}

/// Why a posted form was not taken.
#[derive(Debug)]
pub enum FormRefused {
    /// The body could not be read (too large, cut off).
    Body(actix_web::Error),
    /// The anti-forgery token did not match: the page saying the form expired, in this look.
    Expired(Box<Branding>),
}

impl std::fmt::Display for FormRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Body(error) => error.fmt(f),
            Self::Expired(_) => f.write_str("the form's anti-forgery token does not match"),
        }
    }
}

impl ResponseError for FormRefused {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::Body(error) => error.as_response_error().status_code(),
            Self::Expired(_) => StatusCode::FORBIDDEN,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            Self::Body(error) => error.error_response(),
            Self::Expired(look) => forged(look),
        }
    }
}

impl FromRequest for Form {
    type Error = FormRefused;
    type Future = Pin<Box<dyn Future<Output = Result<Self, FormRefused>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = web::Bytes::from_request(req, payload);
        Box::pin(checked(req.clone(), body))
    }
}

/// The posted form, once its `body` is read and its anti-forgery token matches the cookie
/// (compared in constant time by `subtle`); else the look of the page saying the form expired
/// (the branding of where it was going).
async fn checked(
    req: HttpRequest,
    body: impl Future<Output = Result<web::Bytes, actix_web::Error>>,
) -> Result<Form, FormRefused> {
    let body = body.await.map_err(FormRefused::Body)?;
    let state = state(&req).map_err(|error| FormRefused::Body(error.into()))?;
    let fields: Vec<(String, String)> = url::form_urlencoded::parse(&body).into_owned().collect();
    let form = Form {
        return_to: String::new(),
        fields,
    };
    let return_to = safe_return_to(Some(form.field("return_to")));
    let form = Form { return_to, ..form };
    if matches_cookie(&req, &form) {
        Ok(form)
    } else {
        let look = branding_for(&state, &form.return_to).await;
        Err(FormRefused::Expired(Box::new(look)))
    }
}

fn matches_cookie(req: &HttpRequest, form: &Form) -> bool {
    let Some(cookie) = req.cookie(CSRF_COOKIE) else {
        return false;
    };
    let (a, b) = (
        cookie.value().as_bytes(),
        form.field("csrf_token").as_bytes(),
    );
    !a.is_empty() && bool::from(a.ct_eq(b))
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
