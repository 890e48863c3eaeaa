//! The page the mailed invitation link opens, `{public_url}/invitations/{token}`: the
//! invitation in the organization's branding (organization, inviter, role), and one form that
//! accepts it: a button for the invitee already signed in, their password when the invited
//! address has an account, else a name and a password that register it. The use case is the
//! domain's [`InvitationLinkService`](gatehouse_domain::service::InvitationLinkService); this
//! file renders what it returns.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{Branding, InvitationState, INVITATION_TTL_DAYS},
    service::{
        AnswerRefused, Answered, FormPosted, InvitationAnswer, InvitationLink, InvitationStep,
        Opened, PendingInvitation,
    },
};

use super::{
    csrf,
    errors::{self, PasswordForm, Refusal},
    forms,
    layout::{escape, invitation_page, InvitationFields, InvitationForm},
    response::message,
    session,
};
use crate::{extract::origin_of, observe, state::AppState};

/// The path of the page (and of its form), for a token.
fn path_of(token: &str) -> String {
    format!("/invitations/{token}")
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
    errors::unavailable(&Branding::default())
}

/// The page of an invitation that can no longer be accepted, saying why: `410 Gone`.
fn closed(link: &InvitationLink) -> HttpResponse {
    let organization = link.invitation.organization_name.as_ref();
    let inviter = &link.inviter;
    let (heading, text) = match link.state {
        InvitationState::Expired => (
            "This invitation has expired",
            format!(
                "Invitations can be accepted for {INVITATION_TTL_DAYS} days. Ask {inviter} to \
                 invite you to {organization} again."
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

/// The page of a link that leads to no pending invitation.
fn not_pending(opened: &Opened) -> Option<HttpResponse> {
    match opened {
        Opened::Pending(_) => None,
        Opened::Closed(link) => Some(closed(link)),
        Opened::Unknown => Some(unknown()),
    }
}

/// The page of a pending invitation at `step`, with a fresh anti-forgery token (and its
/// cookie).
fn show(
    state: &AppState,
    status: StatusCode,
    token: &str,
    pending: &PendingInvitation,
    step: InvitationStep,
    full_name: &str,
    error: Option<&str>,
) -> HttpResponse {
    let invitation = &pending.link.invitation;
    let organization = invitation.organization_name.as_ref();
    let heading = format!("Join {organization}");
    let summary = format!(
        "{} invited {} to join {organization} as {}.",
        pending.link.inviter, invitation.email, invitation.role
    );
    let note = (pending.other_account && step != InvitationStep::Accept).then_some(
        "You are signed in with another account. Sign in with the invited address to accept.",
    );
    let fields = match step {
        InvitationStep::Accept => InvitationFields::Accept,
        InvitationStep::SignIn => InvitationFields::SignIn,
        InvitationStep::Register => InvitationFields::Register { full_name },
    };
    let action = escape(&path_of(token));
    csrf::form_page(state, status, |csrf_token| {
        let form = InvitationForm {
            heading: &heading,
            summary: &summary,
            action: &action,
            email: invitation.email.as_ref(),
            step: fields,
            note,
            error,
            csrf_token,
        };
        invitation_page(&pending.link.branding, &form)
    })
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
    let signed_in = session::signed_in(&req, &state).await;
    match state.invitations.open(&token, signed_in.as_ref()).await {
        Ok(Opened::Pending(pending)) => show(
            &state,
            StatusCode::OK,
            &token,
            &pending,
            pending.step,
            "",
            None,
        ),
        Ok(other) => not_pending(&other).unwrap_or_else(unknown),
        Err(error) => unavailable("reading an invitation", &error),
    }
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
    form: csrf::Form,
) -> HttpResponse {
    let token = path.into_inner();
    let signed_in = session::signed_in(&req, &state).await;
    let full_name = form.field("full_name");
    let answer = InvitationAnswer {
        password: form.field("password"),
        full_name,
    };
    let answered = state
        .invitations
        .answer(&token, signed_in.as_ref(), answer, &origin_of(&req))
        .await;
    let (pending, answered) = match answered {
        Ok(FormPosted::Answered(pending, answered)) => (pending, answered),
        Ok(FormPosted::NotPending(opened)) => return not_pending(&opened).unwrap_or_else(unknown),
        Err(error) => return unavailable("answering an invitation's page", &error),
    };
    observe::invitation_answered(&state, &answered);
    let organization = pending.link.invitation.organization_name.as_ref();
    let look = &pending.link.branding;
    let again = |status, step, error: &str| {
        show(
            &state,
            status,
            &token,
            &pending,
            step,
            full_name,
            Some(error),
        )
    };
    let (response, opened) = match answered {
        Answered::Joined { member, opened } => (
            message(
                look,
                StatusCode::OK,
                &format!("Welcome to {organization}"),
                &format!(
                    "You joined {organization} as {}. You are signed in as {}.",
                    member.role, member.email
                ),
            ),
            opened,
        ),
        Answered::AlreadyMember { opened } => (
            message(
                look,
                StatusCode::CONFLICT,
                &format!("You already belong to {organization}"),
                "There is nothing to accept.",
            ),
            opened,
        ),
        // The second step, on the pages; it comes back here, signed in.
        Answered::SecondFactor(needed) => {
            return forms::second_step_needed(&state, &path_of(&token), &needed).await
        }
        Answered::Again { step, refused } => {
            return match refused {
                AnswerRefused::NameMissing => again(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    step,
                    "Enter your full name.",
                ),
                AnswerRefused::WeakPassword(error) => again(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    step,
                    &format!("The {error}."),
                ),
                AnswerRefused::Registered => again(
                    StatusCode::CONFLICT,
                    step,
                    "An account with this address exists now: sign in with its password.",
                ),
                AnswerRefused::SignIn(error) => {
                    match Refusal::of_sign_in(&error, PasswordForm::Invitation) {
                        Some(refusal) => again(refusal.status, step, &refusal.text),
                        None => unavailable("signing in on an invitation's page", &error),
                    }
                }
            }
        }
    };
    match opened {
        Some(tokens) => session::with_session(&state, response, &tokens.refresh_token),
        None => response,
    }
}
