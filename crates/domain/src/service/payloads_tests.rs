//! Every event type's payload, snapshotted (insta, `snapshots/`): the webhook contract, as a
//! receiver reads it. A change to a payload shows here as a changed snapshot to review
//! (`cargo insta review`), never silently.

use insta::assert_json_snapshot;
use time::Duration;
use uuid::Uuid;

use super::{
    payloads::{self, Payload},
    tests::{acme, email, full_name, now, ACME, ADA, ADA_SESSION},
};
use crate::model::{
    Application, ApplicationId, ApplicationName, ClientId, CustomRole, DomainId, EmailDomain,
    Member, MemberStatus, MfaFactorId, OrganizationDomain, Permission, PermissionSet, Plan,
    RedirectUri, RedirectUris, Role, RoleDescription, RoleKey, RoleName, ServiceAccount,
    ServiceAccountId, ServiceAccountName, User, UserId,
};

const GRACE: UserId = UserId::from_uuid(Uuid::from_u128(0x6ace));

/// The data of `payload`, with its event type's name beside it.
fn sent<P: Payload>(payload: P) -> serde_json::Value {
    serde_json::json!({ "event": P::TYPE.as_str(), "data": payload.into_data() })
}

fn ada() -> User {
    User {
        id: ADA,
        email: email("ada@example.com"),
        full_name: full_name("Ada Lovelace"),
        created_at: now() - Duration::days(30),
        updated_at: now(),
        email_verified: true,
    }
}

fn grace(status: MemberStatus) -> Member {
    let active = status == MemberStatus::Active;
    Member {
        organization_id: ACME,
        user_id: active.then_some(GRACE),
        email: email("grace@example.com"),
        full_name: active.then(|| full_name("Grace Hopper")),
        role: Role::Member.into(),
        status,
        invitation_id: None,
        invited_at: Some(now() - Duration::days(2)),
        invited_by: Some(ADA),
        accepted_at: active.then(|| now() - Duration::days(1)),
        joined_at: now() - Duration::days(1),
    }
}

fn billing_app() -> Application {
    Application {
        id: ApplicationId::from_uuid(Uuid::from_u128(0xb111)),
        organization_id: ACME,
        name: ApplicationName::parse("Billing").unwrap(),
        client_id: ClientId::generate(Uuid::from_u128(7)),
        redirect_uris: RedirectUris::new(vec![RedirectUri::parse(
            "https://billing.example.com/cb",
        )
        .unwrap()])
        .unwrap(),
        is_active: true,
        require_pkce: false,
        created_at: now() - Duration::days(1),
        updated_at: now(),
    }
}

fn deployer() -> ServiceAccount {
    ServiceAccount {
        id: ServiceAccountId::from_uuid(Uuid::from_u128(0xde91)),
        organization_id: ACME,
        name: ServiceAccountName::parse("CI deploys").unwrap(),
        role: Role::Member.into(),
        created_by: ADA,
        created_at: now() - Duration::days(3),
        updated_at: now(),
    }
}

fn auditor() -> CustomRole {
    CustomRole {
        organization_id: ACME,
        key: RoleKey::parse("auditor").unwrap(),
        name: RoleName::parse("Auditor").unwrap(),
        description: RoleDescription::parse("Reads the audit log").unwrap(),
        permissions: PermissionSet::of([Permission::OrganizationRead]),
        created_at: now(),
        updated_at: now(),
    }
}

fn acme_com(verified: bool) -> OrganizationDomain {
    OrganizationDomain {
        id: DomainId::from_uuid(Uuid::from_u128(0xd0)),
        organization_id: ACME,
        domain: EmailDomain::parse("acme.com").unwrap(),
        verification_value: "gatehouse-domain-verification=never-sent".to_owned(),
        verified_at: verified.then(now),
        created_at: now() - Duration::hours(1),
    }
}

#[test]
fn user_events() {
    let ada = ada();
    assert_json_snapshot!(
        "user.created",
        sent(payloads::UserCreated(payloads::user(&ada)))
    );
    assert_json_snapshot!(
        "user.updated",
        sent(payloads::UserUpdated {
            user: payloads::user(&ada),
            changed: &["full_name"],
        })
    );
    assert_json_snapshot!(
        "user.deleted",
        sent(payloads::UserDeleted(payloads::user(&ada)))
    );
}

#[test]
fn organization_events() {
    let acme = acme(Plan::Business);
    let organization = || payloads::organization(&acme);
    assert_json_snapshot!(
        "organization.created",
        sent(payloads::OrganizationCreated(organization()))
    );
    assert_json_snapshot!(
        "organization.updated",
        sent(payloads::OrganizationUpdated {
            organization: organization(),
            changed: &["name", "settings.allow_member_invite"],
            deleted_at: None,
        })
    );
    let mut gone = acme.clone();
    gone.is_active = false;
    assert_json_snapshot!(
        "organization.updated.deleted",
        sent(payloads::OrganizationUpdated {
            organization: payloads::organization(&gone),
            changed: &["is_active"],
            deleted_at: Some(now()),
        })
    );
    let pending = acme_com(false);
    let verified = acme_com(true);
    assert_json_snapshot!(
        "organization.domain_verified",
        sent(payloads::DomainVerified(payloads::domain(&verified)))
    );
    assert_json_snapshot!(
        "organization.domain_removed",
        sent(payloads::DomainRemoved(payloads::domain(&pending)))
    );
}

#[test]
fn member_events() {
    let invitee = grace(MemberStatus::Pending);
    let member = grace(MemberStatus::Active);
    assert_json_snapshot!(
        "member.invited",
        sent(payloads::MemberInvited(payloads::member(&invitee)))
    );
    assert_json_snapshot!(
        "member.joined",
        sent(payloads::MemberJoined(payloads::member(&member)))
    );
    let mut promoted = member.clone();
    promoted.role = Role::Admin.into();
    assert_json_snapshot!(
        "member.role_changed",
        sent(payloads::MemberRoleChanged {
            member: payloads::member(&promoted),
            previous_role: &Role::Member.into(),
        })
    );
    assert_json_snapshot!(
        "member.removed",
        sent(payloads::MemberRemoved {
            member: payloads::member(&member),
            removed_at: now(),
            left: true,
        })
    );
}

#[test]
fn application_events() {
    let app = billing_app();
    assert_json_snapshot!(
        "application.created",
        sent(payloads::ApplicationCreated(payloads::application(&app)))
    );
    assert_json_snapshot!(
        "application.updated",
        sent(payloads::ApplicationUpdated {
            application: payloads::application(&app),
            changed: &["client_secret"],
        })
    );
    assert_json_snapshot!(
        "application.deleted",
        sent(payloads::ApplicationDeleted(payloads::application(&app)))
    );
}

#[test]
fn auth_events() {
    assert_json_snapshot!(
        "auth.login",
        sent(payloads::AuthLogin {
            user_id: ADA,
            session_id: ADA_SESSION,
            method: "password",
        })
    );
    assert_json_snapshot!(
        "auth.logout",
        sent(payloads::AuthLogout {
            user_id: ADA,
            session_id: ADA_SESSION,
            reason: None,
        })
    );
    assert_json_snapshot!(
        "auth.logout.by_gatehouse",
        sent(payloads::AuthLogout {
            user_id: ADA,
            session_id: ADA_SESSION,
            reason: Some("refresh_token_reused"),
        })
    );
    assert_json_snapshot!(
        "auth.password_changed",
        sent(payloads::AuthPasswordChanged {
            user_id: ADA,
            session_id: Some(ADA_SESSION),
        })
    );
    assert_json_snapshot!(
        "auth.mfa_enabled",
        sent(payloads::AuthMfaEnabled {
            user_id: ADA,
            method: "totp",
            factor_id: MfaFactorId::from_uuid(Uuid::from_u128(0xfac7)),
        })
    );
}

#[test]
fn billing_iam_and_webhook_events() {
    assert_json_snapshot!(
        "billing.subscription.updated",
        sent(payloads::SubscriptionUpdated {
            organization_id: ACME,
            plan: Plan::Business,
            previous_plan: Plan::Pro,
        })
    );
    let account = deployer();
    assert_json_snapshot!(
        "service_account.created",
        sent(payloads::ServiceAccountCreated(payloads::service_account(
            &account
        )))
    );
    assert_json_snapshot!(
        "service_account.updated",
        sent(payloads::ServiceAccountUpdated {
            account: payloads::service_account(&account),
            previous_role: &Role::Viewer.into(),
        })
    );
    assert_json_snapshot!(
        "service_account.deleted",
        sent(payloads::ServiceAccountDeleted {
            account: payloads::service_account(&account),
            deleted_at: now(),
        })
    );
    let role = auditor();
    assert_json_snapshot!(
        "role.created",
        sent(payloads::RoleCreated(payloads::role(&role)))
    );
    assert_json_snapshot!(
        "role.updated",
        sent(payloads::RoleUpdated {
            role: payloads::role(&role),
            previous_permissions: &PermissionSet::of([
                Permission::OrganizationRead,
                Permission::MembersRead,
            ]),
        })
    );
    assert_json_snapshot!(
        "role.deleted",
        sent(payloads::RoleDeleted(payloads::role(&role)))
    );
    assert_json_snapshot!(
        "webhook.test",
        sent(payloads::WebhookTest {
            message: payloads::TEST_MESSAGE,
            organization_id: ACME,
        })
    );
}
