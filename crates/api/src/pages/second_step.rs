//! `POST /login/mfa`: the second step of a sign-in on the pages (csrf_token, return_to,
//! mfa_token, and code: a TOTP code or a recovery code; or webauthn: a security key's answer).

use actix_web::{http::StatusCode, web, HttpResponse};
use gatehouse_domain::{
    model::TotpCode,
    ports::SignInMethod,
    service::{SecondFactorProof, VerifyError},
};

use super::{
    csrf,
    errors::{Refusal, SIGN_IN_UNAVAILABLE},
    forms, session,
};
use crate::{extract::RequestOrigin, observe, state::AppState};

/// `POST /login/mfa`.
pub async fn verify(
    RequestOrigin(origin): RequestOrigin,
    state: web::Data<AppState>,
    form: csrf::Form,
) -> HttpResponse {
    let return_to = &form.return_to;
    let mfa_token = form.field("mfa_token");
    let code = form.field("code").trim().to_owned();
    let assertion = form.field("webauthn");
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
    let verified = state.mfa.verify(mfa_token, proof, None, &origin).await;
    observe::sign_in(&state, SignInMethod::SecondFactor, &verified);
    let error = match verified {
        Ok(tokens) => return session::open(&state, &tokens.refresh_token, return_to),
        Err(error) => error,
    };
    let Some(refusal) = Refusal::of_second_factor(&error) else {
        tracing::error!(%error, "the second step on the login page failed");
        let status = StatusCode::SERVICE_UNAVAILABLE;
        return forms::login(&state, status, return_to, "", Some(SIGN_IN_UNAVAILABLE)).await;
    };
    match error {
        // The security key's challenge answered (or not) once: offer codes now.
        VerifyError::WrongFactor => {
            let text = Some(refusal.text.as_str());
            forms::second_step(&state, refusal.status, return_to, mfa_token, None, text).await
        }
        // The sign-in is spent (or the account locked): from the first step again.
        _ => forms::login_refused(&state, return_to, "", &refusal).await,
    }
}
