//! Refresh and sign-out: a new access token for a live session, under the session policy as
//! it stands, and the end of a session.

use crate::service::payloads;

use super::{
    access_token_bound, admission::admit_member, AccessToken, Admitting, AuthService,
    OrganizationRefused, PASSWORD_EXPIRED,
};
use crate::{
    model::{
        ApplicationId, AuditAction, AuthMethod, ClientAddress, ClientGrant, EffectivePolicies,
        OrganizationChoice, Origin, TokenHash, TokenOrganization, SESSION_TOUCH_INTERVAL,
    },
    ports::{BoxError, RefreshContext, StoreError, TokenError},
    service::{user_event, Principal},
};

/// Why a refresh failed.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// Unknown, expired or revoked refresh token, or its session has ended.
    #[error("the refresh token is invalid, expired or revoked")]
    InvalidToken,
    /// Not refreshed within the idle timeout of the user's session policy.
    #[error("the session timed out after {0} minutes without a refresh; log in again")]
    Idle(u32),
    /// Older than the maximum session duration of the user's session policy.
    #[error("the session reached its maximum duration of {0} hours; log in again")]
    TooOld(u32),
    /// The password is older than an organization's `max_age_days`: change it first.
    #[error("{}", PASSWORD_EXPIRED)]
    PasswordExpired,
    /// The organization the token would speak for does not admit the user (any more).
    #[error(transparent)]
    NotAdmitted(OrganizationRefused),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Signing the new access token failed.
    #[error("refresh failed")]
    Internal(#[source] BoxError),
}

from_refusals!(RefreshError: Admitting, TokenError);

impl AuthService {
    /// A new access token for a live session. The refresh token itself is not rotated (spec).
    /// The user's session policy is checked as it stands now: a session idle for longer than the
    /// idle timeout, or older than the maximum duration, is refused. `application` is the
    /// client refreshing through OAuth: a session an application was granted refreshes only
    /// for that application, and a password login's session only outside OAuth.
    ///
    /// `organization` chooses the organization the new token speaks for (the session keeps
    /// the choice for later refreshes); it is admitted again on every refresh, from `client`
    /// (the caller's address; `None` for an application's server), so that a removal, a role
    /// change or a new policy reaches the next token.
    pub async fn refresh(
        &self,
        refresh_token: &str,
        application: Option<ApplicationId>,
        organization: OrganizationChoice,
        client: Option<ClientAddress>,
    ) -> Result<AccessToken, RefreshError> {
        self.refresh_session(refresh_token, application, organization, client)
            .await
            .map(|(access, _)| access)
    }

    /// [`Self::refresh`], with what the session was granted (`None` for a sign-in of the
    /// user's own): the OAuth token endpoint answers with its scope, read in the same round trip.
    pub(crate) async fn refresh_session(
        &self,
        refresh_token: &str,
        application: Option<ApplicationId>,
        organization: OrganizationChoice,
        client: Option<ClientAddress>,
    ) -> Result<(AccessToken, Option<ClientGrant>), RefreshError> {
        let now = self.ports.clock.now();
        let hash = TokenHash::of(refresh_token);
        // The session, its user, and the user's memberships with their organizations'
        // policies, in one read: one round trip, the admission's included.
        let RefreshContext {
            session,
            credentials,
            memberships,
        } = self
            .ports
            .sessions
            .refresh_context(&hash, now)
            .await?
            .filter(|found| found.session.grant.as_ref().map(|g| g.application_id) == application)
            .ok_or(RefreshError::InvalidToken)?;
        let policies = EffectivePolicies::of(memberships.iter().map(|access| {
            (
                access.membership.plan,
                access.policies.as_ref().map(|saved| &saved.policies),
            )
        }));
        if let Some(policy) = &policies.session {
            if now - session.last_used_at >= policy.idle_timeout() {
                return Err(RefreshError::Idle(policy.idle_timeout_minutes.get()));
            }
            if now - session.created_at >= policy.max_duration() {
                return Err(RefreshError::TooOld(
                    policy.max_session_duration_hours.get(),
                ));
            }
        }
        // Only a password sign-in's session depends on the password being current.
        if session.amr.includes(AuthMethod::Password)
            && policies
                .password
                .is_expired(credentials.password_changed_at, now)
        {
            return Err(RefreshError::PasswordExpired);
        }
        let scoped = organization.applied_to(session.organization_id);
        let access = scoped.and_then(|organization_id| {
            memberships
                .into_iter()
                .find(|access| access.membership.organization_id == organization_id)
        });
        let speaks_for = match scoped {
            // An application's session: its organization admitted the member at
            // /oauth/authorize (from the member's own address, which this request, from the
            // application's server, is not), and every use of its tokens inside Gatehouse is
            // admitted again; the token says the member's role as it is now.
            // Single sign-on holds for it as at every way in.
            Some(_) if session.grant.is_some() => {
                let membership = access
                    .map(|access| access.membership)
                    .ok_or(RefreshError::NotAdmitted(OrganizationRefused::NotMember))?;
                self.sso_admits(
                    &credentials.user,
                    &session.amr,
                    session.sso_organization_id,
                    &membership,
                )
                .await?;
                Some(TokenOrganization::of(&membership))
            }
            Some(_) => {
                let membership = access.as_ref().map(|access| access.membership.clone());
                let admitted = admit_member(
                    &credentials.user,
                    session.id,
                    &session.amr,
                    session.sso_organization_id,
                    access,
                    client,
                    now,
                )?;
                if let Some(membership) = &membership {
                    self.sso_admits(
                        &credentials.user,
                        &session.amr,
                        session.sso_organization_id,
                        membership,
                    )
                    .await?;
                }
                Some(admitted)
            }
            None => None,
        };
        // The session was live when read; a revocation since then stops the access token at
        // its first use (every authenticated request checks the session).
        let still_live = if scoped != session.organization_id {
            self.ports
                .sessions
                .scope_session(session.id, scoped, now)
                .await?
        } else {
            now - session.last_used_at < SESSION_TOUCH_INTERVAL
                || self.ports.sessions.touch_session(session.id, now).await?
        };
        if !still_live {
            return Err(RefreshError::InvalidToken);
        }
        let mut ends_at = session.expires_at;
        if let Some(policy) = &policies.session {
            ends_at = ends_at.min(session.created_at + policy.max_duration());
        }
        let not_after = access_token_bound(&policies, now, ends_at);
        let access = self
            .issue_access_token(
                &credentials.user,
                session.id,
                session.grant.as_ref(),
                &session.amr,
                speaks_for.as_ref(),
                now,
                not_after,
            )
            .await?;
        Ok((access, session.grant))
    }

    /// Ends the caller's session: its refresh token and every access token it issued stop
    /// working at once.
    pub async fn logout(&self, principal: &Principal, origin: &Origin) -> Result<(), StoreError> {
        let Principal::User {
            user_id,
            session_id,
            ..
        } = principal
        else {
            // An API key has no session to end.
            return Ok(());
        };
        let now = self.ports.clock.now();
        let logout_event = user_event(
            self.ports.random.as_ref(),
            now,
            *user_id,
            payloads::AuthLogout {
                user_id: *user_id,
                session_id: *session_id,
                reason: None,
            },
        );
        let record = self.sign_in_record(*user_id, AuditAction::Logout, origin, now);
        self.ports
            .sessions
            .end_session(*session_id, now, logout_event, record)
            .await?;
        Ok(())
    }
}
