//! Accepting an invitation from its mailed link, `{public_url}/invitations/{token}`: what the
//! link opens, what its page asks of the browser, and the answer that registers or signs in
//! the invited address and joins. Opening the link changes nothing (a mail scanner spends
//! nothing); the answer is one of the ways in, and it signs in exactly as every password
//! sign-in does ([`AuthService::login`]: lockout, policies, second factor).

use super::{
    AuthService, BrowserSession, InvitationLink, LoginError, MemberError, MemberService,
    RegisterError, SecondFactorNeeded, SignIn, TokenPair,
};
use crate::{
    model::{FullName, InvitationState, Member, Origin},
    ports::StoreError,
};

/// What the page of a pending invitation asks of this browser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvitationStep {
    /// The invitee is signed in: one button accepts.
    Accept,
    /// The invited address has an account: its password signs in, then accepts.
    SignIn,
    /// No account has the invited address: a name and a password register it, then accept.
    Register,
}

/// A pending invitation as its page shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingInvitation {
    /// The invitation, its inviter and its organization's branding.
    pub link: InvitationLink,
    /// What the page asks.
    pub step: InvitationStep,
    /// The browser is signed in, but not as the invitee: the page says to sign in with the
    /// invited address.
    pub other_account: bool,
}

/// What an invitation's link opens.
#[derive(Clone, Debug, PartialEq)]
pub enum Opened {
    /// An invitation that can be accepted.
    Pending(PendingInvitation),
    /// An invitation that expired, was revoked or was used: `link.state` says which.
    Closed(InvitationLink),
    /// No invitation has this token (or its organization was deleted).
    Unknown,
}

/// The page's form, as posted.
#[derive(Clone, Copy)]
pub struct InvitationAnswer<'a> {
    /// The invited account's password, or the new account's.
    pub password: &'a str,
    /// The new account's name (the registering step only).
    pub full_name: &'a str,
}

impl std::fmt::Debug for InvitationAnswer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InvitationAnswer")
            .field("full_name", &self.full_name)
            .finish_non_exhaustive()
    }
}

/// Why the form is shown again.
#[derive(Debug)]
pub enum AnswerRefused {
    /// Registering needs a name.
    NameMissing,
    /// The new password breaks a rule or is a common one (a [`RegisterError::WeakPassword`]).
    WeakPassword(RegisterError),
    /// The address was registered meanwhile (another tab): signing in is what is left.
    Registered,
    /// The sign-in was refused: a wrong password, a locked account, an expired password; or
    /// a failure of ours, which the caller tells apart (`Store`, `Internal`).
    SignIn(LoginError),
}

/// What an answer to a pending invitation led to.
#[derive(Debug)]
pub enum Answered {
    /// Joined the organization. `opened`: the session the answer opened, when it signed in
    /// (the browser is signed in with it).
    Joined {
        /// The new membership.
        member: Member,
        /// The session the answer opened, if it signed in.
        opened: Option<TokenPair>,
    },
    /// The invitee already belongs to the organization: nothing to accept.
    AlreadyMember {
        /// The session the answer opened, if it signed in.
        opened: Option<TokenPair>,
    },
    /// The password was right and the account has a second factor: its step comes next, and
    /// comes back to the page signed in.
    SecondFactor(SecondFactorNeeded),
    /// The form again, at `step`, saying what was refused.
    Again {
        /// What the form asks now.
        step: InvitationStep,
        /// Why.
        refused: AnswerRefused,
    },
}

/// What posting the page's form did.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one a request, built once and moved once: boxing buys nothing"
)]
pub enum FormPosted {
    /// The token names no pending invitation (any more: spent, withdrawn or expired between
    /// the page and the click): what the link opens now.
    NotPending(Opened),
    /// The pending invitation as the page showed it, and what the answer led to.
    Answered(PendingInvitation, Answered),
}

/// Why the invitation's page could not be answered: failures of ours, never the person's.
#[derive(Debug, thiserror::Error)]
pub enum InvitationLinkError {
    /// Reading or accepting the invitation failed.
    #[error("reading or accepting the invitation failed: {0}")]
    Member(#[from] MemberError),
    /// Registering the invited address failed.
    #[error("registering the invited address failed: {0}")]
    Register(#[source] RegisterError),
    /// Reading the session the sign-in opened failed.
    #[error("reading the new session failed: {0}")]
    Session(#[from] StoreError),
    /// The session the sign-in opened is gone already.
    #[error("the session the sign-in opened is gone")]
    SessionGone,
}

/// The use case of the invitation's page, on the services that register, sign in and accept
/// the way every other way in does.
#[derive(Clone)]
pub struct InvitationLinkService {
    /// Registers and signs in the invited address.
    auth: AuthService,
    /// Reads and accepts the invitation.
    members: MemberService,
}

impl InvitationLinkService {
    /// The use case on these services.
    pub fn new(auth: AuthService, members: MemberService) -> Self {
        Self { auth, members }
    }

    /// What the link with this token opens for a browser signed in as `session` (if at all).
    /// Changes nothing.
    ///
    /// # Errors
    /// [`InvitationLinkError::Member`] when the store fails.
    pub async fn open(
        &self,
        token: &str,
        session: Option<&BrowserSession>,
    ) -> Result<Opened, InvitationLinkError> {
        let Some(link) = self.members.invitation_link(token).await? else {
            return Ok(Opened::Unknown);
        };
        if link.state != InvitationState::Pending {
            return Ok(Opened::Closed(link));
        }
        let step = match link.invitee {
            Some(invitee) if session.is_some_and(|s| s.user_id == invitee) => {
                InvitationStep::Accept
            }
            Some(_) => InvitationStep::SignIn,
            None => InvitationStep::Register,
        };
        let other_account = session.is_some() && step != InvitationStep::Accept;
        Ok(Opened::Pending(PendingInvitation {
            link,
            step,
            other_account,
        }))
    }

    /// Answers the page's form: accepts as the signed-in invitee, or signs in (registering
    /// the invited address first when it has no account) and accepts.
    ///
    /// # Errors
    /// Failures of ours ([`InvitationLinkError`]); every refusal of the person's answer is an
    /// [`Answered::Again`].
    pub async fn answer(
        &self,
        token: &str,
        session: Option<&BrowserSession>,
        answer: InvitationAnswer<'_>,
        origin: &Origin,
    ) -> Result<FormPosted, InvitationLinkError> {
        let pending = match self.open(token, session).await? {
            Opened::Pending(pending) => pending,
            other => return Ok(FormPosted::NotPending(other)),
        };
        let again = |step, refused| Answered::Again { step, refused };
        match (pending.step, session) {
            (InvitationStep::Accept, Some(session)) => {
                let joined = self.join(token, session, origin, None).await?;
                return self.answered(token, pending, joined).await;
            }
            (InvitationStep::Accept, None) => return Ok(FormPosted::NotPending(Opened::Unknown)),
            (InvitationStep::SignIn, _) => {}
            // No account yet: registered first, then signed in like any account.
            (InvitationStep::Register, _) => {
                let Ok(name) = FullName::parse(answer.full_name) else {
                    let refused = again(InvitationStep::Register, AnswerRefused::NameMissing);
                    return Ok(FormPosted::Answered(pending, refused));
                };
                let email = pending.link.invitation.email.clone();
                match self
                    .auth
                    .register(email, answer.password, name, origin)
                    .await
                {
                    Ok(_) => {}
                    Err(error @ RegisterError::WeakPassword(_)) => {
                        let refused =
                            again(InvitationStep::Register, AnswerRefused::WeakPassword(error));
                        return Ok(FormPosted::Answered(pending, refused));
                    }
                    Err(RegisterError::EmailTaken) => {
                        let refused = again(InvitationStep::SignIn, AnswerRefused::Registered);
                        return Ok(FormPosted::Answered(pending, refused));
                    }
                    Err(error) => return Err(InvitationLinkError::Register(error)),
                }
            }
        }
        let email = pending.link.invitation.email.as_ref();
        let signed_in = self
            .auth
            .login(email, answer.password.to_owned(), None, origin)
            .await;
        let tokens = match signed_in {
            Ok(SignIn::Tokens(tokens)) => tokens,
            Ok(SignIn::SecondFactor(needed)) => {
                return Ok(FormPosted::Answered(
                    pending,
                    Answered::SecondFactor(needed),
                ))
            }
            Err(error) => {
                let refused = again(InvitationStep::SignIn, AnswerRefused::SignIn(error));
                return Ok(FormPosted::Answered(pending, refused));
            }
        };
        let session = self
            .auth
            .signed_in(tokens.refresh_token.expose())
            .await?
            .ok_or(InvitationLinkError::SessionGone)?;
        let joined = self.join(token, &session, origin, Some(tokens)).await?;
        self.answered(token, pending, joined).await
    }

    /// Accepts the invitation as the signed-in invitee; `None` when it stopped being pending
    /// between the page and the click.
    async fn join(
        &self,
        token: &str,
        session: &BrowserSession,
        origin: &Origin,
        opened: Option<TokenPair>,
    ) -> Result<Option<Answered>, InvitationLinkError> {
        let joined = self
            .members
            .accept_by_token(&session.principal(), token, origin)
            .await;
        match joined {
            Ok(member) => Ok(Some(Answered::Joined { member, opened })),
            Err(MemberError::AlreadyMember(_)) => Ok(Some(Answered::AlreadyMember { opened })),
            Err(MemberError::Expired | MemberError::InvitationNotFound) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// The answer, or what the link opens now when the invitation stopped being pending.
    async fn answered(
        &self,
        token: &str,
        pending: PendingInvitation,
        joined: Option<Answered>,
    ) -> Result<FormPosted, InvitationLinkError> {
        match joined {
            Some(answered) => Ok(FormPosted::Answered(pending, answered)),
            None => match self.open(token, None).await? {
                // Still pending by the store's reading yet not acceptable: unknown to the page.
                Opened::Pending(_) => Ok(FormPosted::NotPending(Opened::Unknown)),
                other => Ok(FormPosted::NotPending(other)),
            },
        }
    }
}
