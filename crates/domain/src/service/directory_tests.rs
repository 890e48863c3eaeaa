//! Directory sync against mocked ports: what a provisioned user means for the membership, one
//! rule per test.

use std::sync::Arc;

use futures::executor::block_on;
use uuid::Uuid;

use super::{
    mail::in_the_clear,
    tests::{acme, ada_credentials, now, origin, ready, recording, Mocks, Seen, ACME, ADA},
    Actor, DirectoryClient, DirectoryError, DirectoryService, InvitationMails,
};
use crate::{
    mock::MockDomainStore,
    model::{
        AuditAction, DirectoryCursor, DirectoryFilter, DirectoryName, DirectoryPage,
        DirectorySelection, DirectoryText, DirectoryUser, DirectoryUserId, DirectoryWindow,
        GroupRoles, Membership, Plan, ResourceCheck, Role, ScimToken, ScimTokenId, ScimTokenName,
        UserAttributes, DIRECTORY_BATCH,
    },
    ports::{DirectoryChange, DirectoryWrite, GroupMembers, HeavyLane, MemberEffect},
};

const OKTA: ScimTokenId = ScimTokenId::from_uuid(Uuid::from_u128(0x0c7a));
const ISAAC: DirectoryUserId = DirectoryUserId::from_uuid(Uuid::from_u128(0x15aac));
/// An admin of Acme (ada@example.com's account stands in) who made a SCIM token.
const ADMIN_TOKEN: ScimTokenId = ScimTokenId::from_uuid(Uuid::from_u128(0xad_70c));

/// A SCIM token Ada made in Acme.
fn admin_token() -> ScimToken {
    ScimToken {
        id: ADMIN_TOKEN,
        organization_id: ACME,
        name: ScimTokenName::parse("okta").unwrap(),
        prefix: "ghsc_AbCd".to_owned(),
        created_by: ADA,
        created_at: now(),
        last_used_at: None,
    }
}

fn directory(plan: Plan) -> Actor {
    Actor::Directory(DirectoryClient {
        token_id: OKTA,
        organization_id: ACME,
        plan,
        created_by: ADA,
    })
}

fn attributes(user_name: &str, active: bool) -> UserAttributes {
    UserAttributes {
        user_name: DirectoryText::parse(user_name).unwrap(),
        external_id: None,
        display_name: None,
        name: DirectoryName {
            formatted: None,
            given_name: Some(DirectoryText::parse("Isaac").unwrap()),
            family_name: Some(DirectoryText::parse("Brock").unwrap()),
        },
        emails: Vec::new(),
        active,
    }
}

impl Mocks {
    /// Every heavy request finds a lane of its organization free.
    fn lanes_are_free(&mut self) {
        self.heavy
            .expect_enter()
            .returning(|_| ready(Some(HeavyLane::new(()))));
    }

    /// Acme on `plan`, no group mapped, `verified` its verified domain; every write recorded.
    fn acme_directory(&mut self, plan: Plan, verified: &'static str) -> Seen<DirectoryWrite> {
        self.organizations
            .expect_organization()
            .returning(move |_| ready(Ok(Some(acme(plan)))));
        self.directory
            .expect_group_roles()
            .returning(|_| ready(Ok(GroupRoles::default())));
        let mut domains = MockDomainStore::new();
        domains
            .expect_verifying_organization()
            .returning(move |domain| ready(Ok((domain.as_ref() == verified).then_some(ACME))));
        self.domains = domains;
        self.branding
            .expect_branding()
            .returning(|_| ready(Ok(None)));
        self.directory
            .expect_scim_tokens()
            .returning(|_| ready(Ok(vec![admin_token()])));
        recording!(
            self.directory.expect_write_directory(),
            |write| write,
            Ok(true)
        )
    }

    /// Acme's directory, on the business plan, provisions an active user with this address.
    fn provision(self, address: &str) -> Result<DirectoryUser, DirectoryError> {
        block_on(self.service().create_user(
            &directory(Plan::Business),
            attributes(address, true),
            &origin(),
        ))
    }

    fn service(self) -> DirectoryService {
        let (ports, auth) = self.ports_with_auth();
        let mails = InvitationMails::new((&ports).into(), "https://id.example.com".into());
        DirectoryService::new((&ports).into(), auth, mails)
    }
}

#[test]
fn an_address_in_a_verified_domain_without_an_account_gets_one_and_joins_with_the_default_role() {
    let mut mocks = Mocks::new();
    let written = mocks.acme_directory(Plan::Business, "acme.test");
    mocks.email_is_free();
    mocks.mailer.expect_send().never();
    let user = mocks.provision("isaac@acme.test").unwrap();
    let write = written.only();
    assert_eq!(write.changes, vec![DirectoryChange::CreateUser(user)]);
    match write.effects.as_slice() {
        [MemberEffect::Join {
            account: Some(account),
            role,
            ..
        }] => {
            assert_eq!(account.user.email.as_ref(), "isaac@acme.test");
            assert_eq!(account.user.full_name.as_ref(), "Isaac Brock");
            assert_eq!(*role, Role::Member);
        }
        other => panic!("expected one join with a new account: {other:?}"),
    }
    assert_eq!(write.events.len(), 1);
    assert_eq!(write.events[0].event_type.as_str(), "member.joined");
    assert_eq!(write.audit[0].actor.kind(), "scim");
}

#[test]
fn an_account_registered_in_advance_for_a_verified_address_is_reclaimed_before_it_joins() {
    for verified in [false, true] {
        let mut mocks = Mocks::new();
        let written = mocks.acme_directory(Plan::Business, "example.com");
        let mut credentials = ada_credentials();
        credentials.user.email_verified = verified;
        mocks.address_belongs_to(credentials);
        mocks.no_membership_is_found();
        mocks.mailer.expect_send().never();
        mocks.provision("ada@example.com").unwrap();
        let write = written.only();
        match (write.effects.as_slice(), verified) {
            (
                [MemberEffect::Reclaim(reclaim), MemberEffect::Join {
                    user_id,
                    account: None,
                    ..
                }],
                false,
            ) => {
                assert_eq!((reclaim.user_id, *user_id), (ADA, ADA));
                assert_eq!(reclaim.audit.action, AuditAction::UserReclaimed);
                assert_eq!(reclaim.audit.actor.kind(), "scim");
            }
            (
                [MemberEffect::Join {
                    user_id,
                    account: None,
                    ..
                }],
                true,
            ) => assert_eq!(*user_id, ADA),
            (effects, verified) => panic!("verified {verified}: {effects:?}"),
        }
    }
}

#[test]
fn a_scim_token_works_while_its_maker_may_manage_sso_there() {
    use crate::model::{ScimToken, ScimTokenName};
    use crate::ports::ScimTokenAccess;
    let authenticated = |creator: Option<Role>| {
        let mut mocks = Mocks::new();
        mocks.directory.expect_use_scim_token().returning(|_, _| {
            ready(Ok(Some(ScimTokenAccess {
                token: ScimToken {
                    id: OKTA,
                    organization_id: ACME,
                    name: ScimTokenName::parse("Okta").unwrap(),
                    prefix: "ghsc_abcd".to_owned(),
                    created_by: ADA,
                    created_at: now(),
                    last_used_at: None,
                },
                plan: Plan::Business,
            })))
        });
        mocks
            .memberships
            .expect_membership()
            .withf(|user, organization| (*user, *organization) == (ADA, ACME))
            .returning(move |_, _| {
                ready(Ok(creator.map(|role| Membership {
                    role: role.into(),
                    ..super::tests::ada_in_acme()
                })))
            });
        block_on(
            super::Authenticator::new((&mocks.ports()).into(), super::tests::ISSUER)
                .authenticate_scim_token("ghsc_abcd_secret", ACME),
        )
    };
    assert!(authenticated(Some(Role::Owner)).is_ok());
    assert!(authenticated(Some(Role::Admin)).is_ok());
    for gone in [Some(Role::Member), Some(Role::Viewer), None] {
        assert!(
            matches!(
                authenticated(gone),
                Err(super::AuthenticateError::Invalid(_))
            ),
            "{gone:?}"
        );
    }
}

#[test]
fn another_address_is_invited_by_mail_never_linked_to_the_account_that_has_it() {
    let mut mocks = Mocks::new();
    let written = mocks.acme_directory(Plan::Business, "acme.test");
    // Ada's account exists, but her domain is not one Acme verified.
    mocks.address_belongs_to(ada_credentials());
    mocks.no_membership_is_found();
    mocks.mail_is_sealed_in_the_clear();
    mocks.mailer.expect_send().never();
    mocks.provision("ada@example.com").unwrap();
    let write = written.only();
    assert!(
        matches!(write.effects.as_slice(), [MemberEffect::Invite(invitation)] if invitation.invited_by == ADA),
        "{:?}",
        write.effects
    );
    assert_eq!(write.events[0].event_type.as_str(), "member.invited");
    // The invitation's mail is written with it, for the worker to send.
    let [mail] = write.mails.as_slice() else {
        panic!("one mail: {:?}", write.mails)
    };
    let mail = in_the_clear(mail);
    assert_eq!(mail.to.as_ref(), "ada@example.com");
    assert!(mail.text.contains("/invitations/ghi_"), "{}", mail.text);
}

/// Acme's directory, whose user Isaac is Ada (`ada@example.com`, active), a member with `role`;
/// and what the directory writes.
fn ada_in_the_directory_as(role: Role) -> (Mocks, Seen<DirectoryWrite>) {
    let mut mocks = Mocks::new();
    let written = mocks.acme_directory(Plan::Business, "example.com");
    mocks.directory.expect_directory_user().returning(|_, _| {
        ready(Ok(Some(DirectoryUser {
            id: ISAAC,
            organization_id: ACME,
            attributes: attributes("ada@example.com", true),
            created_at: now(),
            updated_at: now(),
        })))
    });
    mocks
        .directory
        .expect_groups_of()
        .returning(|_, _| ready(Ok(Vec::new())));
    mocks.address_belongs_to(ada_credentials());
    mocks
        .memberships
        .expect_membership()
        .returning(move |_, _| {
            ready(Ok(Some(Membership {
                organization_id: ACME,
                user_id: ADA,
                role: role.into(),
                plan: Plan::Business,
                joined_at: now(),
            })))
        });
    (mocks, written)
}

#[test]
fn deactivating_the_owner_is_refused_and_writes_nothing() {
    let (mocks, written) = ada_in_the_directory_as(Role::Owner);
    let refused = block_on(mocks.service().replace_user(
        &directory(Plan::Business),
        ISAAC,
        attributes("ada@example.com", false),
        &origin(),
    ));
    assert!(
        matches!(refused, Err(DirectoryError::OwnerProtected)),
        "{refused:?}"
    );
    assert!(written.all().is_empty());
}

#[test]
fn a_plan_without_directory_sync_provisions_nothing() {
    let mocks = Mocks::new();
    let refused = block_on(mocks.service().create_user(
        &directory(Plan::Pro),
        attributes("isaac@acme.test", true),
        &origin(),
    ));
    assert!(
        matches!(refused, Err(DirectoryError::PlanRequired)),
        "{refused:?}"
    );
}

#[test]
fn a_directory_token_manages_members_and_nothing_else() {
    let actor = directory(Plan::Business);
    for permission in crate::model::Permission::ALL {
        let granted = actor.require(permission).is_ok();
        assert_eq!(
            granted,
            crate::model::DIRECTORY_PERMISSIONS.contains(&permission),
            "{permission:?}"
        );
    }
}

/// The directory deactivates an admin who made a SCIM token: the same write removes them and
/// revokes the token, recorded as the system's `scim_token.revoked`.
#[test]
fn an_admin_the_directory_deactivates_loses_the_scim_tokens_they_made_in_that_write() {
    let (mocks, written) = ada_in_the_directory_as(Role::Admin);
    block_on(mocks.service().replace_user(
        &directory(Plan::Business),
        ISAAC,
        attributes("ada@example.com", false),
        &origin(),
    ))
    .unwrap();
    let write = written.only();
    assert!(write
        .effects
        .iter()
        .any(|effect| matches!(effect, MemberEffect::Remove { user_id } if *user_id == ADA)));
    let revoked: Vec<_> = write
        .effects
        .iter()
        .filter_map(|effect| match effect {
            MemberEffect::RevokeScimToken(revocation) => Some(revocation),
            _ => None,
        })
        .collect();
    assert_eq!(revoked.len(), 1, "{:?}", write.effects);
    assert_eq!(revoked[0].token_id, ADMIN_TOKEN);
    assert_eq!(revoked[0].audit.action, AuditAction::ScimTokenRevoked);
    assert_eq!(revoked[0].audit.actor.kind(), "system");
    assert_eq!(revoked[0].audit.organization_id, Some(ACME));
}

/// Acme's directory users `0..n`, a second apart.
fn numbered(range: std::ops::Range<u128>) -> Vec<DirectoryUser> {
    range
        .map(|i| DirectoryUser {
            id: DirectoryUserId::from_uuid(Uuid::from_u128(0x5c1_0000 + i)),
            organization_id: ACME,
            attributes: attributes(&format!("user{i}@acme.test"), true),
            created_at: now() + time::Duration::seconds(i as i64),
            updated_at: now(),
        })
        .collect()
}

/// Accepts the users with an even number.
struct Even;

impl ResourceCheck<DirectoryUser> for Even {
    fn accepts(&self, user: &DirectoryUser) -> bool {
        user.id.as_uuid().as_u128().is_multiple_of(2)
    }
}

#[test]
fn a_filter_the_store_cannot_answer_reads_the_directory_in_batches_keeping_the_page() {
    let mut mocks = Mocks::new();
    mocks.lanes_are_free();
    let batch = DIRECTORY_BATCH as u128;
    mocks
        .directory
        .expect_directory_users_after()
        .withf(|org, after, limit| *org == ACME && after.is_none() && *limit == DIRECTORY_BATCH)
        .times(1)
        .returning(move |_, _, _| ready(Ok(numbered(0..batch))));
    let last = numbered(batch - 1..batch).remove(0);
    mocks
        .directory
        .expect_directory_users_after()
        .withf(move |_, after, _| {
            *after
                == Some(DirectoryCursor {
                    created_at: last.created_at,
                    id: last.id.as_uuid(),
                })
        })
        .times(1)
        .returning(move |_, _, _| ready(Ok(numbered(batch..batch + 3))));
    let page = block_on(mocks.service().list_users(
        &directory(Plan::Business),
        DirectorySelection::Check(Arc::new(Even)),
        DirectoryWindow {
            offset: 10,
            count: 5,
        },
    ))
    .unwrap();
    assert_eq!(page.total, batch as u64 / 2 + 2);
    let ids: Vec<u128> = page
        .resources
        .iter()
        .map(|user| user.id.as_uuid().as_u128() - 0x5c1_0000)
        .collect();
    assert_eq!(ids, vec![20, 22, 24, 26, 28]);
}

#[test]
fn users_then_groups_share_one_window() {
    let mut mocks = Mocks::new();
    mocks.lanes_are_free();
    mocks
        .directory
        .expect_directory_users_page()
        .withf(|_, filter, slice| {
            *filter == DirectoryFilter::All && (slice.offset(), slice.limit()) == (2, 3)
        })
        .returning(|_, _, _| {
            ready(Ok(DirectoryPage {
                resources: numbered(2..3),
                total: 3,
            }))
        });
    // One user on the page: the groups' listing starts at their first, for two more.
    mocks
        .directory
        .expect_directory_groups_page()
        .withf(|_, _, slice, members| {
            (slice.offset(), slice.limit()) == (0, 2) && *members == GroupMembers::Skipped
        })
        .returning(|_, _, _, _| {
            ready(Ok(DirectoryPage {
                resources: Vec::new(),
                total: 4,
            }))
        });
    let (users, groups) = block_on(mocks.service().list_everything(
        &directory(Plan::Business),
        DirectorySelection::Filter(DirectoryFilter::All),
        DirectorySelection::Filter(DirectoryFilter::All),
        DirectoryWindow {
            offset: 2,
            count: 3,
        },
        GroupMembers::Skipped,
    ))
    .unwrap();
    assert_eq!(
        (users.resources.len(), users.total, groups.total),
        (1, 3, 4)
    );
}

#[test]
fn a_list_that_finds_no_free_lane_of_its_organization_is_refused_and_reads_nothing() {
    let mut mocks = Mocks::new();
    mocks
        .heavy
        .expect_enter()
        .withf(|org| *org == ACME)
        .returning(|_| ready(None));
    mocks.directory.expect_directory_users_page().never();
    let refused = block_on(mocks.service().list_users(
        &directory(Plan::Business),
        DirectorySelection::Filter(DirectoryFilter::All),
        DirectoryWindow {
            offset: 0,
            count: 100,
        },
    ));
    assert!(matches!(refused, Err(DirectoryError::Busy(_))));
}
