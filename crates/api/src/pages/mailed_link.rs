//! The pages a mailed link opens: `/magic-link/{token}` (one button that signs in; mail
//! scanners that open links do not spend them), `/reset-password/{token}` (the new password)
//! and `/verify-email/{token}` (one button that verifies the address). One page with a form,
//! `LinkForm`, that says and asks what its link is for; the form posts back to the link.

use actix_web::{http::StatusCode, web, HttpResponse};
use gatehouse_domain::{
    model::Branding,
    ports::SignInMethod,
    service::{LinkError, SignIn},
};

use super::{
    csrf,
    errors::link_refused,
    forms,
    layout::{escape, token_page, TokenForm},
    response::message,
    session,
};
use crate::{extract::RequestOrigin, observe, state::AppState};

/// `GET /magic-link/{token}`: a page with one button that signs in.
pub async fn magic_link_page(state: web::Data<AppState>, path: web::Path<String>) -> HttpResponse {
    LinkForm::MagicLink.show(&state, StatusCode::OK, &path, None)
}

/// `GET /reset-password/{token}`: the new-password form.
pub async fn reset_password_page(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> HttpResponse {
    LinkForm::ResetPassword.show(&state, StatusCode::OK, &path, None)
}

/// `GET /verify-email/{token}`: a page with one button that verifies the address.
pub async fn verify_email_page(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> HttpResponse {
    LinkForm::VerifyEmail.show(&state, StatusCode::OK, &path, None)
}

/// `POST /magic-link/{token}`: signs in (the session cookie), or asks for the second factor.
pub async fn sign_in(
    RequestOrigin(origin): RequestOrigin,
    state: web::Data<AppState>,
    path: web::Path<String>,
    form: csrf::Form,
) -> HttpResponse {
    let signed_in = state.links.sign_in_with_link(&path, None, &origin).await;
    observe::sign_in(&state, SignInMethod::MailedLink, &signed_in);
    match signed_in {
        Ok(SignIn::Tokens(tokens)) => session::open(&state, &tokens.refresh_token, &form.return_to),
        Ok(SignIn::SecondFactor(needed)) => {
            forms::second_step_needed(&state, &form.return_to, &needed).await
        }
        Err(error) => link_refused(error, "signing in with a mailed link"),
    }
}

/// `POST /reset-password/{token}`: sets the new password.
pub async fn reset_password(
    RequestOrigin(origin): RequestOrigin,
    state: web::Data<AppState>,
    path: web::Path<String>,
    form: csrf::Form,
) -> HttpResponse {
    let new_password = form.field("new_password");
    match state
        .links
        .reset_password(&path, new_password, &origin)
        .await
    {
        Ok(()) => message(
            &Branding::default(),
            StatusCode::OK,
            "Your password was changed",
            "You were signed out everywhere. Sign in with the new password.",
        ),
        // Refused before the link was spent: the form again.
        Err(error @ LinkError::WeakPassword(_)) => {
            let text = format!("The {error}.");
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            LinkForm::ResetPassword.show(&state, status, &path, Some(&text))
        }
        Err(error) => link_refused(error, "a password reset"),
    }
}

/// `POST /verify-email/{token}`: verifies the address.
pub async fn verify_email(
    RequestOrigin(origin): RequestOrigin,
    state: web::Data<AppState>,
    path: web::Path<String>,
    _form: csrf::Form,
) -> HttpResponse {
    match state.links.verify_email(&path, &origin).await {
        Ok(()) => message(
            &Branding::default(),
            StatusCode::OK,
            "Your email address is verified",
            "Thank you. You can close this window.",
        ),
        Err(error) => link_refused(error, "an email verification"),
    }
}

/// What a mailed link's page says and asks.
#[derive(Clone, Copy)]
enum LinkForm {
    /// `/magic-link/{token}`: one button that signs in.
    MagicLink,
    /// `/reset-password/{token}`: the new password.
    ResetPassword,
    /// `/verify-email/{token}`: one button that verifies the address.
    VerifyEmail,
}

impl LinkForm {
    fn action(self) -> &'static str {
        match self {
            Self::MagicLink => "/magic-link/",
            Self::ResetPassword => "/reset-password/",
            Self::VerifyEmail => "/verify-email/",
        }
    }

    fn heading(self) -> &'static str {
        match self {
            Self::MagicLink => "Sign in",
            Self::ResetPassword => "Choose a new password",
            Self::VerifyEmail => "Verify your email address",
        }
    }

    fn button(self) -> &'static str {
        match self {
            Self::MagicLink => "Sign in",
            Self::ResetPassword => "Set the new password",
            Self::VerifyEmail => "Verify",
        }
    }

    /// The form of the link with this token.
    fn show(
        self,
        state: &AppState,
        status: StatusCode,
        token: &str,
        error: Option<&str>,
    ) -> HttpResponse {
        let action = format!("{}{}", self.action(), escape(token));
        csrf::form_page(state, status, |csrf_token| {
            let form = TokenForm {
                heading: self.heading(),
                action: &action,
                button: self.button(),
                new_password: matches!(self, Self::ResetPassword),
                error,
                csrf_token,
            };
            token_page(&Branding::default(), &form)
        })
    }
}
