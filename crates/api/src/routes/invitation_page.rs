//! The page the mailed invitation link opens, `{public_url}/invitations/{token}`: the
//! invitation in the organization's branding (organization, inviter, role), and one form that
//! accepts it: a button for the invitee already signed in, their password when the invited
//! address has an account, else a name and a password that register it. Opening the link
//! changes nothing (a mail scanner spends nothing); expired, revoked and used links get a page
//! that says so.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{Branding, Email, FullName, InvitationState, Origin, TokenKind},
    ports::SignInMethod,
    service::{
        BrowserSession, InvitationLink, LoginError, MemberError, RegisterError, SignIn, TokenPair,
    },
};

use crate::{
    extract::origin_of,
    observe,
    pages::{escape, invitation_page, message_page, InvitationForm, InvitationStep},
    routes::login::{
        checked_form, field, html, show_mfa, signed_in, with_csrf_cookie, with_session_cookie,
    },
    state::AppState,
};

/// The path of the page (and of its form), for a token.
fn path_of(token: &str) -> String {
    format!("/invitations/{token}")
}

fn message(look: &Branding, status: StatusCode, heading: &str, text: &str) -> HttpResponse {
    html(status, message_page(look, heading, text))
}

/// A token that names no invitation (or one of an organization that was deleted).
fn unknown() -> HttpResponse {
    message(
        &Branding::default(),
        StatusCode::NOT_FOUND,
        "This invitation link does not work",
        "Check that you opened the whole link from the mail. If it still does not work, ask \
         for a new invitation.",
    )
}

fn unavailable(what: &str, error: &dyn std::fmt::Display) -> HttpResponse {
    tracing::error!(%error, "{what} failed");
    message(
        &Branding::default(),
        StatusCode::SERVICE_UNAVAILABLE,
        "Not possible right now",
        "Try again in a moment.",
    )
}

/// The page of an invitation that can no longer be accepted, saying why: `410 Gone`.
fn closed(link: &InvitationLink) -> HttpResponse {
    let organization = link.invitation.organization_name.as_ref();
    let inviter = &link.inviter;
    let (heading, text) = match link.state {
        InvitationState::Expired => (
            "This invitation has expired",
            format!(
                "Invitations can be accepted for 7 days. Ask {inviter} to invite you to \
                 {organization} again."
            ),
        ),
        InvitationState::Revoked => (
            "This invitation was withdrawn",
            format!("{organization} withdrew it. Ask {inviter} if you still need to join."),
        ),
        InvitationState::Accepted | InvitationState::Pending => (
            "This invitation was already used",
            format!(
                "It has been accepted. Sign in with {} to reach {organization}.",
                link.invitation.email
            ),
        ),
    };
    message(&link.branding, StatusCode::GONE, heading, &text)
}

/// What the pending invitation's page asks of this browser.
fn step_for<'a>(
    link: &InvitationLink,
    session: Option<&BrowserSession>,
    full_name: &'a str,
) -> InvitationStep<'a> {
    match link.invitee {
        Some(invitee) if session.is_some_and(|s| s.user_id == invitee) => InvitationStep::Accept,
        Some(_) => InvitationStep::SignIn,
        None => InvitationStep::Register { full_name },
    }
}

/// The page of a pending invitation, with a fresh anti-forgery token (and its cookie).
fn show(
    state: &AppState,
    status: StatusCode,
    token: &str,
    link: &InvitationLink,
    step: InvitationStep<'_>,
    error: Option<&str>,
    session: Option<&BrowserSession>,
) -> HttpResponse {
    let invitation = &link.invitation;
    let organization = invitation.organization_name.as_ref();
    let heading = format!("Join {organization}");
    let summary = format!(
        "{} invited {} to join {organization} as {}.",
        link.inviter, invitation.email, invitation.role
    );
    let other_account = "You are signed in with another account. Sign in with the invited \
                         address to accept.";
    let note = match step {
        InvitationStep::SignIn if session.is_some() => Some(other_account),
        InvitationStep::Register { .. } if session.is_some() => Some(other_account),
        _ => None,
    };
    let csrf = state.ports.random.secret(TokenKind::Csrf);
    let body = invitation_page(
        &link.branding,
        &InvitationForm {
            heading: &heading,
            summary: &summary,
            action: &escape(&path_of(token)),
            email: invitation.email.as_ref(),
            step,
            note,
            error,
            csrf_token: csrf.expose(),
        },
    );
    with_csrf_cookie(state, html(status, body), &csrf)
}

/// The invitation the token names, or the page to answer instead.
async fn find(state: &AppState, token: &str) -> Result<InvitationLink, HttpResponse> {
    match state.members.invitation_link(token).await {
        Ok(Some(link)) if link.state == InvitationState::Pending => Ok(link),
        Ok(Some(link)) => Err(closed(&link)),
        Ok(None) => Err(unknown()),
        Err(error) => Err(unavailable("reading an invitation", &error)),
    }
}

/// `GET /invitations/{token}`: the invitation, and the form that accepts it.
#[utoipa::path(
    get, path = "/invitations/{token}", tag = "invitations",
    params(("token" = String, Path, description = "The token of the mailed link")),
    responses(
        (status = 200, content_type = "text/html", body = String, description = "The invitation and the form that accepts it"),
        (status = 404, content_type = "text/html", body = String, description = "No invitation has this token"),
        (status = 410, content_type = "text/html", body = String, description = "Expired, revoked or already used: the page says which"),
        (status = 503, content_type = "text/html", body = String, description = "The store could not be read"),
    )
)]
pub async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> HttpResponse {
    let token = path.into_inner();
    let link = match find(&state, &token).await {
        Ok(link) => link,
        Err(page) => return page,
    };
    let session = signed_in(&req, &state).await;
    let step = step_for(&link, session.as_ref(), "");
    show(
        &state,
        StatusCode::OK,
        &token,
        &link,
        step,
        None,
        session.as_ref(),
    )
}

/// `POST /invitations/{token}`: accepts as the signed-in invitee, or signs in (or registers)
/// the invited address first and then accepts. Joined, the browser is signed in.
#[utoipa::path(
    post, path = "/invitations/{token}", tag = "invitations",
    params(("token" = String, Path, description = "The token of the mailed link")),
    request_body(content = String, content_type = "application/x-www-form-urlencoded",
        description = "csrf_token (the page's), password, and full_name to register"),
    responses(
        (status = 200, content_type = "text/html", body = String, description = "Joined (the session cookie is set), or the second step of a sign-in"),
        (status = 401, content_type = "text/html", body = String, description = "The password is wrong: the form again"),
        (status = 403, content_type = "text/html", body = String, description = "The form expired (anti-forgery token), or the password expired"),
        (status = 404, content_type = "text/html", body = String, description = "No invitation has this token"),
        (status = 409, content_type = "text/html", body = String, description = "Already a member of the organization"),
        (status = 410, content_type = "text/html", body = String, description = "Expired, revoked or already used"),
        (status = 422, content_type = "text/html", body = String, description = "A field was refused (a weak password, a missing name): the form again"),
        (status = 429, content_type = "text/html", body = String, description = "Too many failed sign-ins for the account"),
        (status = 503, content_type = "text/html", body = String, description = "The store could not be read or written"),
    )
)]
pub async fn accept(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let token = path.into_inner();
    let fields = match checked_form(&req, &state, &body).await {
        Ok((fields, _)) => fields,
        Err(forged) => return forged,
    };
    let link = match find(&state, &token).await {
        Ok(link) => link,
        Err(page) => return page,
    };
    let origin = origin_of(&req);
    let session = signed_in(&req, &state).await;
    let password = field(&fields, "password").to_owned();
    let full_name = field(&fields, "full_name");
    let again = |status: StatusCode, step: InvitationStep<'_>, error: &str| {
        show(
            &state,
            status,
            &token,
            &link,
            step,
            Some(error),
            session.as_ref(),
        )
    };
    match step_for(&link, session.as_ref(), full_name) {
        InvitationStep::Accept => {
            let Some(session) = &session else {
                return unknown();
            };
            return join(&state, &token, &link, session, &origin, None).await;
        }
        InvitationStep::SignIn => {}
        // No account yet: registered first, then signed in like any account.
        InvitationStep::Register { full_name } => {
            let Ok(name) = FullName::parse(full_name) else {
                return again(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    InvitationStep::Register { full_name },
                    "Enter your full name.",
                );
            };
            let registered = state
                .auth
                .register(link.invitation.email.clone(), &password, name, &origin)
                .await;
            match registered {
                Ok(_) => {}
                Err(error @ RegisterError::WeakPassword(_)) => {
                    return again(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        InvitationStep::Register { full_name },
                        &format!("The {error}."),
                    )
                }
                // Registered meanwhile (another tab): signing in is what is left.
                Err(RegisterError::EmailTaken) => {
                    return again(
                        StatusCode::CONFLICT,
                        InvitationStep::SignIn,
                        "An account with this address exists now: sign in with its password.",
                    )
                }
                Err(error) => return unavailable("registering on an invitation's page", &error),
            }
        }
    }
    let tokens = match sign_in(&state, &token, &link.invitation.email, password, &origin).await {
        Ok(tokens) => tokens,
        Err(SignInPage::Answer(page)) => return page,
        Err(SignInPage::Again(status, error)) => {
            return again(status, InvitationStep::SignIn, &error)
        }
    };
    let session = match state.auth.signed_in(tokens.refresh_token.expose()).await {
        Ok(Some(session)) => session,
        Ok(None) => return unknown(),
        Err(error) => return unavailable("reading the new session", &error),
    };
    join(&state, &token, &link, &session, &origin, Some(&tokens)).await
}

/// How a sign-in on the page did not end in a session.
enum SignInPage {
    /// A whole page to answer (the second step, or a refusal of its own).
    Answer(HttpResponse),
    /// The form again, with this status and error.
    Again(StatusCode, String),
}

/// Signs the invited address in with its password, as the hosted login page does.
async fn sign_in(
    state: &AppState,
    token: &str,
    email: &Email,
    password: String,
    origin: &Origin,
) -> Result<TokenPair, SignInPage> {
    let signed_in = state
        .auth
        .login(email.as_ref(), password, None, origin)
        .await;
    observe::sign_in(state, SignInMethod::Password, &signed_in);
    match signed_in {
        Ok(SignIn::Tokens(tokens)) => Ok(tokens),
        // The second step, on the hosted pages; it comes back here, signed in.
        Ok(SignIn::SecondFactor(needed)) => Err(SignInPage::Answer(
            show_mfa(
                state,
                StatusCode::OK,
                &path_of(token),
                needed.mfa_token.expose(),
                needed.webauthn_options.as_ref(),
                None,
            )
            .await,
        )),
        Err(LoginError::InvalidCredentials) => Err(SignInPage::Again(
            StatusCode::UNAUTHORIZED,
            "The password is wrong.".to_owned(),
        )),
        Err(LoginError::LockedOut(locked)) => {
            let minutes = (locked.seconds() + 59) / 60;
            Err(SignInPage::Again(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "Too many failed sign-ins for this account. Try again in {minutes} minute{}.",
                    if minutes == 1 { "" } else { "s" }
                ),
            ))
        }
        Err(LoginError::PasswordExpired) => Err(SignInPage::Again(
            StatusCode::FORBIDDEN,
            "Your password has expired: renew it, then open the link again.".to_owned(),
        )),
        Err(error) => Err(SignInPage::Answer(unavailable(
            "signing in on an invitation's page",
            &error,
        ))),
    }
}

/// Accepts the invitation as the signed-in invitee: the page that says they joined, with the
/// session cookie when the page opened the session.
async fn join(
    state: &AppState,
    token: &str,
    link: &InvitationLink,
    session: &BrowserSession,
    origin: &Origin,
    opened: Option<&TokenPair>,
) -> HttpResponse {
    let organization = link.invitation.organization_name.as_ref();
    let joined = state
        .members
        .accept_by_token(&session.principal(), token, origin)
        .await;
    let response = match joined {
        Ok(member) => message(
            &link.branding,
            StatusCode::OK,
            &format!("Welcome to {organization}"),
            &format!(
                "You joined {organization} as {}. You are signed in as {}.",
                member.role, member.email
            ),
        ),
        Err(MemberError::AlreadyMember(_)) => message(
            &link.branding,
            StatusCode::CONFLICT,
            &format!("You already belong to {organization}"),
            "There is nothing to accept.",
        ),
        Err(MemberError::Expired | MemberError::InvitationNotFound) => {
            // Spent, withdrawn or expired between the page and the click.
            match find(state, token).await {
                Ok(_) => unknown(),
                Err(page) => page,
            }
        }
        Err(error) => unavailable("accepting an invitation", &error),
    };
    match opened {
        Some(tokens) => with_session_cookie(state, response, &tokens.refresh_token),
        None => response,
    }
}
