//! The actix-web extractor of a verified bearer token (feature `actix`).

use std::{fmt, future::Future, ops::Deref, pin::Pin};

use actix_web::{
    dev::Payload, http::header, http::StatusCode, web, FromRequest, HttpRequest, HttpResponse,
    ResponseError,
};

use crate::{Claims, Verifier, VerifyError};

/// The claims of the request's `Authorization: Bearer` token, verified by the [`Verifier`] in
/// the application's data (`App::new().app_data(web::Data::new(verifier))`).
///
/// A request without a bearer token, or with one the verifier refuses, is answered
/// `401 {"detail": ...}` with `WWW-Authenticate: Bearer` (and `error="invalid_token"` when a
/// token was refused); `503` while the key set cannot be fetched.
#[derive(Clone, Debug)]
pub struct VerifiedClaims(pub Claims);

impl Deref for VerifiedClaims {
    type Target = Claims;

    fn deref(&self) -> &Claims {
        &self.0
    }
}

/// Why [`VerifiedClaims`] refused a request; answers with its status and a `{detail}` body.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unauthorized {
    /// No `Authorization: Bearer` header.
    #[error("a bearer token is required")]
    Missing,
    /// The token was refused.
    #[error("the bearer token is not valid: {0}")]
    Invalid(#[source] VerifyError),
    /// The application holds no `web::Data<Verifier>`: a mistake of its wiring.
    #[error("no token verifier is configured")]
    NotConfigured,
}

impl ResponseError for Unauthorized {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::Invalid(VerifyError::KeySet(_)) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Missing | Self::Invalid(_) => StatusCode::UNAUTHORIZED,
            Self::NotConfigured => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        match self {
            Self::Missing => {
                response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
            }
            Self::Invalid(VerifyError::KeySet(_)) | Self::NotConfigured => {}
            Self::Invalid(_) => {
                response
                    .insert_header((header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\""));
            }
        }
        response.json(serde_json::json!({ "detail": Detail(self).to_string() }))
    }
}

/// What a client is told: the refusal, without the causes behind a key-set failure.
struct Detail<'a>(&'a Unauthorized);

impl fmt::Display for Detail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Unauthorized::Invalid(VerifyError::KeySet(_)) => {
                f.write_str("the token cannot be verified now; try again later")
            }
            other => other.fmt(f),
        }
    }
}

impl FromRequest for VerifiedClaims {
    type Error = Unauthorized;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Unauthorized>>>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let verifier = request.app_data::<web::Data<Verifier>>().cloned();
        let token = bearer(request).map(str::to_owned);
        Box::pin(async move {
            let verifier = verifier.ok_or(Unauthorized::NotConfigured)?;
            let token = token.ok_or(Unauthorized::Missing)?;
            verifier
                .verify(&token)
                .await
                .map(VerifiedClaims)
                .map_err(Unauthorized::Invalid)
        })
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme in any case).
fn bearer(request: &HttpRequest) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}
