//! An invitation's mail, the one way it is written whoever invites (a member through the API,
//! the directory through SCIM): its one-time link, its sender's name, the organization's
//! branding; sealed for the outbox, where the store queues it with the invitation.

use super::mail::seal;
use crate::{
    model::{
        AssignedRole, Branding, Email, Feature, Organization, OrganizationId, Plan, SecretToken,
        UserId, INVITATION_TTL_DAYS,
    },
    ports::{service_ports, CipherError, Mail, SealedMail},
};

service_ports! {
    /// The ports [`InvitationMails`] uses.
    pub struct InvitationMailPorts { accounts: AccountStore, branding: BrandingStore, cipher: SecretCipher, random: Random }
}

/// Writes invitations' mails, and names who sent an invitation the way its mail and its page
/// do.
#[derive(Clone)]
pub struct InvitationMails {
    ports: InvitationMailPorts,
    public_url: String,
}

impl InvitationMails {
    /// Mails on these ports; `public_url` is where Gatehouse is reached, for their links.
    pub fn new(ports: InvitationMailPorts, public_url: String) -> Self {
        Self { ports, public_url }
    }

    /// An invitation's mail with its one-time link, in the organization's branding, sealed
    /// for the outbox: the store queues it with the invitation. The invitee also finds the
    /// invitation under `GET /api/v1/invitations` once signed in.
    pub(crate) async fn mail(
        &self,
        organization: &Organization,
        inviter: &str,
        email: Email,
        role: &AssignedRole,
        token: &SecretToken,
    ) -> Result<SealedMail, CipherError> {
        let link = format!("{}/invitations/{}", self.public_url, token.expose());
        let mut mail = Mail::new(
            email,
            format!(
                "{inviter} invited you to {} on Gatehouse",
                organization.name.as_ref()
            ),
            format!(
                "{inviter} invited you to join {org} as {role}.\n\n\
                 Accept the invitation: {link}\n\n\
                 The link signs you in, or lets you create your account with this email \
                 address, and then adds you to {org}. It expires in {INVITATION_TTL_DAYS} days.\n",
                org = organization.name.as_ref(),
            ),
        );
        self.brand(&mut mail, organization).await;
        seal(
            self.ports.cipher.as_ref(),
            self.ports.random.as_ref(),
            &mail,
        )
    }

    /// The full name of the member who invites, as mails and pages name them; "Someone" for
    /// an account gone or unreadable.
    pub(crate) async fn inviter_name(&self, inviter: UserId) -> String {
        self.ports
            .accounts
            .credentials_by_id(inviter)
            .await
            .ok()
            .flatten()
            .map_or_else(
                || "Someone".to_owned(),
                |c| c.user.full_name.as_ref().to_owned(),
            )
    }

    /// The organization's saved branding while its plan includes branding. Branding that
    /// cannot be read is none (the default look), with a warning.
    pub(crate) async fn branding_of(
        &self,
        organization_id: OrganizationId,
        plan: Plan,
    ) -> Option<Branding> {
        if !plan.includes(Feature::Branding) {
            return None;
        }
        match self.ports.branding.branding(organization_id).await {
            Ok(saved) => saved.map(|saved| saved.branding),
            Err(error) => {
                tracing::warn!(%error, organization.id = %organization_id, "branding not read; the default look instead");
                None
            }
        }
    }

    /// Puts the organization's email branding (sender name, reply-to, footer) on its mail, while
    /// its plan includes branding. Branding that cannot be read leaves the mail plain.
    async fn brand(&self, mail: &mut Mail, organization: &Organization) {
        let Some(branding) = self.branding_of(organization.id, organization.plan).await else {
            return;
        };
        let email = branding.email_branding;
        mail.sender_name = Some(email.from_name.as_str().to_owned());
        mail.reply_to = email.reply_to;
        let footer = email.footer_text.as_str();
        if !footer.is_empty() {
            mail.text = format!("{}\n-- \n{footer}\n", mail.text);
        }
    }
}
