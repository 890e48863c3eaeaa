//! Service accounts, their keys and the organization's keys, against mocked ports: each test
//! states one rule.

use futures::executor::block_on;
use time::Duration;
use uuid::Uuid;

use super::{
    tests::{ada_acting, now, origin, ready, recording, secret_of, Mocks, ACME, ADA, GLOBEX},
    Actor, Agent, AuthenticateError, Authenticator, Forbidden, IamError, IamService,
    ServiceAccountChange, ServiceAccountKey,
};
use crate::{
    model::{
        ApiKey, ApiKeyId, ApiKeyName, AuditActor, ClientAddress, EventType, KeyHolder, Permission,
        Plan, Role, RoleRef, ServiceAccount, ServiceAccountId, ServiceAccountName, TokenHash,
        TokenKind,
    },
    ports::ServiceAccountAccess,
};

const DEPLOYER: ServiceAccountId = ServiceAccountId::from_uuid(Uuid::from_u128(0x5a_0001));
const DEPLOY_KEY: ApiKeyId = ApiKeyId::from_uuid(Uuid::from_u128(0x5a_4e1));

fn deployer(role: Role) -> ServiceAccount {
    ServiceAccount {
        id: DEPLOYER,
        organization_id: ACME,
        name: ServiceAccountName::parse("CI deploys").unwrap(),
        role: role.into(),
        created_by: ADA,
        created_at: now() - Duration::days(3),
        updated_at: now() - Duration::days(3),
    }
}

fn deployers_key() -> ApiKey {
    ApiKey {
        id: DEPLOY_KEY,
        name: ApiKeyName::parse("pipeline").unwrap(),
        prefix: "ghk_abcdefgh".to_owned(),
        organization_id: ACME,
        holder: KeyHolder::ServiceAccount(DEPLOYER),
        created_at: now() - Duration::days(2),
        last_used_at: None,
    }
}

impl Mocks {
    /// The store holds the deployer with `role` (in Acme, on `plan`), or nothing.
    fn deployer_is(&mut self, account: Option<(Role, Plan)>) {
        self.service_accounts
            .expect_service_account()
            .withf(|id| *id == DEPLOYER)
            .returning(move |_| {
                ready(Ok(account.map(|(role, plan)| ServiceAccountAccess {
                    account: deployer(role),
                    plan,
                })))
            });
    }

    fn the_key_is_the_deployers(&mut self) {
        self.api_keys
            .expect_use_api_key()
            .withf(|hash, _| *hash == TokenHash::of(&secret_of(TokenKind::ApiKey)))
            .returning(|_, _| ready(Ok(Some(deployers_key()))));
    }
}

fn authenticate(
    mocks: Mocks,
    organization: crate::model::OrganizationId,
) -> Result<Agent, AuthenticateError> {
    block_on(
        Authenticator::new((&mocks.ports()).into(), super::tests::ISSUER)
            .authenticate_api_key(&secret_of(TokenKind::ApiKey), organization),
    )
}

#[test]
fn a_service_accounts_key_acts_as_the_account_with_its_role_now() {
    let mut mocks = Mocks::new();
    mocks.the_key_is_the_deployers();
    mocks.deployer_is(Some((Role::Member, Plan::Pro)));
    let agent = authenticate(mocks, ACME).unwrap();
    let Agent::ServiceAccount(key) = agent.clone() else {
        panic!("a person: {agent:?}");
    };
    assert_eq!(key.key_id, DEPLOY_KEY);
    assert_eq!(key.account.role, Role::Member);
    assert_eq!(key.plan, Plan::Pro);

    let mut mocks = Mocks::new();
    mocks.deployer_is(Some((Role::Member, Plan::Pro)));
    let actor = block_on(
        Authenticator::new((&mocks.ports()).into(), super::tests::ISSUER).actor_of(
            agent,
            ACME,
            ClientAddress([192, 0, 2, 1].into()),
        ),
    )
    .unwrap();
    assert_eq!(actor.user_id(), None, "no person acts");
    assert_eq!(actor.audit_actor(), AuditActor::ServiceAccount(DEPLOYER));
    assert_eq!(actor.require(Permission::MembersRead), Ok(()));
    assert_eq!(
        actor.require(Permission::OrganizationUpdate),
        Err(Forbidden(Permission::OrganizationUpdate))
    );
}

#[test]
fn a_key_whose_account_is_gone_or_elsewhere_is_invalid() {
    let mut mocks = Mocks::new();
    mocks.the_key_is_the_deployers();
    mocks.deployer_is(None);
    assert!(matches!(
        authenticate(mocks, ACME),
        Err(AuthenticateError::Invalid(_))
    ));
    let mut mocks = Mocks::new();
    mocks.the_key_is_the_deployers();
    assert!(matches!(
        authenticate(mocks, GLOBEX),
        Err(AuthenticateError::Invalid(_))
    ));
}

#[test]
fn a_service_account_acts_in_its_own_organization_only() {
    let key = ServiceAccountKey {
        key_id: DEPLOY_KEY,
        account: deployer(Role::Admin),
        plan: Plan::Free,
    };
    let refused = block_on(
        Authenticator::new((&Mocks::new().ports()).into(), super::tests::ISSUER).actor_of(
            Agent::ServiceAccount(key),
            GLOBEX,
            ClientAddress([192, 0, 2, 1].into()),
        ),
    );
    assert!(matches!(refused, Err(super::OrgAccessError::NotFound)));
}

fn service(mocks: Mocks) -> IamService {
    IamService::new((&mocks.ports()).into())
}

#[test]
fn an_admin_creates_an_account_it_names_as_its_creator_with_an_event_and_a_record() {
    let mut mocks = Mocks::new();
    let stored = recording!(
        mocks
            .service_accounts
            .expect_create_service_account()
            .times(1),
        |account, event, audit| (account, event, audit),
        Ok(true)
    );
    let account = block_on(service(mocks).create_service_account(
        &ada_acting(Role::Admin, Plan::Free),
        ServiceAccountName::parse("CI deploys").unwrap(),
        RoleRef::BuiltIn(Role::Admin),
        &origin(),
    ))
    .unwrap();
    assert_eq!(account.created_by, ADA);
    assert_eq!(account.organization_id, ACME);
    assert_eq!(account.role, Role::Admin);
    let (saved, event, audit) = stored.only();
    assert_eq!(saved, account);
    assert_eq!(event.event_type, EventType::ServiceAccountCreated);
    assert_eq!(event.data["name"], "CI deploys");
    assert_eq!(audit.action.as_str(), "service_account.created");
}

#[test]
fn no_one_makes_an_owner_account_and_members_make_none() {
    let owner_role = block_on(service(Mocks::new()).create_service_account(
        &ada_acting(Role::Owner, Plan::Free),
        ServiceAccountName::parse("Boss").unwrap(),
        RoleRef::BuiltIn(Role::Owner),
        &origin(),
    ));
    assert!(matches!(owner_role, Err(IamError::OwnerRole)));
    for role in [Role::Member, Role::Viewer] {
        let refused = block_on(service(Mocks::new()).create_service_account(
            &ada_acting(role, Plan::Free),
            ServiceAccountName::parse("Mine").unwrap(),
            RoleRef::BuiltIn(Role::Viewer),
            &origin(),
        ));
        assert!(matches!(
            refused,
            Err(IamError::Forbidden(Forbidden(
                Permission::ServiceAccountsManage
            )))
        ));
    }
}

#[test]
fn an_account_makes_no_account_for_it_names_no_member() {
    let actor = Actor::ServiceAccount(ServiceAccountKey {
        key_id: DEPLOY_KEY,
        account: deployer(Role::Admin),
        plan: Plan::Free,
    });
    let refused = block_on(service(Mocks::new()).create_service_account(
        &actor,
        ServiceAccountName::parse("Child").unwrap(),
        RoleRef::BuiltIn(Role::Viewer),
        &origin(),
    ));
    assert!(matches!(refused, Err(IamError::PersonNeeded)));
}

#[test]
fn another_organizations_account_is_not_found_and_nothing_is_written() {
    let mut mocks = Mocks::new();
    mocks
        .service_accounts
        .expect_service_account()
        .returning(|_| {
            let mut elsewhere = deployer(Role::Viewer);
            elsewhere.organization_id = GLOBEX;
            ready(Ok(Some(ServiceAccountAccess {
                account: elsewhere,
                plan: Plan::Free,
            })))
        });
    let service = service(mocks);
    let admin = ada_acting(Role::Admin, Plan::Free);
    assert!(matches!(
        block_on(service.update_service_account(
            &admin,
            DEPLOYER,
            ServiceAccountChange {
                role: Some(RoleRef::BuiltIn(Role::Admin)),
                ..ServiceAccountChange::default()
            },
            &origin()
        )),
        Err(IamError::NotFound(_))
    ));
    assert!(matches!(
        block_on(service.delete_service_account(&admin, DEPLOYER, &origin())),
        Err(IamError::NotFound(_))
    ));
    assert!(matches!(
        block_on(service.create_service_account_key(
            &admin,
            DEPLOYER,
            ApiKeyName::parse("x").unwrap(),
            &origin()
        )),
        Err(IamError::NotFound(_))
    ));
}

#[test]
fn a_change_that_changes_nothing_writes_nothing() {
    let mut mocks = Mocks::new();
    mocks.deployer_is(Some((Role::Member, Plan::Free)));
    let same = block_on(service(mocks).update_service_account(
        &ada_acting(Role::Admin, Plan::Free),
        DEPLOYER,
        ServiceAccountChange {
            name: Some(ServiceAccountName::parse("CI deploys").unwrap()),
            role: Some(RoleRef::BuiltIn(Role::Member)),
        },
        &origin(),
    ))
    .unwrap();
    assert_eq!(same, deployer(Role::Member));
}

#[test]
fn a_service_accounts_key_is_held_by_the_account_not_by_its_maker() {
    let mut mocks = Mocks::new();
    mocks.deployer_is(Some((Role::Member, Plan::Free)));
    let stored = super::tests::store_saves_api_keys(&mut mocks);
    let created = block_on(service(mocks).create_service_account_key(
        &ada_acting(Role::Admin, Plan::Free),
        DEPLOYER,
        ApiKeyName::parse("pipeline").unwrap(),
        &origin(),
    ))
    .unwrap();
    assert_eq!(created.key, secret_of(TokenKind::ApiKey));
    let new = stored.only();
    assert_eq!(new.holder, KeyHolder::ServiceAccount(DEPLOYER));
    assert_eq!(new.key_hash, TokenHash::of(&created.key));
}

/// `actor` (a key, whatever its role) makes neither a service account nor a key of one, and
/// nothing is written.
fn makes_no_service_account_nor_key(actor: &Actor) {
    let mut mocks = Mocks::new();
    mocks.deployer_is(Some((Role::Admin, Plan::Free)));
    mocks.api_keys.expect_create_api_key().never();
    mocks
        .service_accounts
        .expect_create_service_account()
        .never();
    let service = service(mocks);
    assert!(matches!(
        block_on(service.create_service_account_key(
            actor,
            DEPLOYER,
            ApiKeyName::parse("spare").unwrap(),
            &origin()
        )),
        Err(IamError::PersonNeeded)
    ));
    assert!(matches!(
        block_on(service.create_service_account(
            actor,
            ServiceAccountName::parse("Sneaky").unwrap(),
            RoleRef::BuiltIn(Role::Viewer),
            &origin()
        )),
        Err(IamError::PersonNeeded)
    ));
}

#[test]
fn a_service_accounts_own_key_makes_no_keys_nor_accounts() {
    // Admin as it is, the account's key is not a person: a leaked key makes no spares.
    makes_no_service_account_nor_key(&Actor::ServiceAccount(ServiceAccountKey {
        key_id: DEPLOY_KEY,
        account: deployer(Role::Admin),
        plan: Plan::Free,
    }));
}

#[test]
fn a_users_api_key_makes_no_service_account_nor_a_key_of_one() {
    // The owner's own API key (made before single sign-on, say, or leaked): credentials that
    // outlive a session are made by the member signed in, never by a key.
    let Actor::Member { membership, .. } = ada_acting(Role::Owner, Plan::Free) else {
        unreachable!("ada_acting is a member");
    };
    makes_no_service_account_nor_key(&Actor::Member {
        principal: super::tests::ada_key_for_acme(),
        membership,
    });
}

#[test]
fn only_owners_and_admins_see_and_revoke_the_organizations_keys() {
    for role in [Role::Member, Role::Viewer] {
        let service = service(Mocks::new());
        let actor = ada_acting(role, Plan::Free);
        assert!(matches!(
            block_on(service.organization_keys(&actor, crate::model::PageRequest::default())),
            Err(IamError::Forbidden(Forbidden(Permission::ApiKeysManage)))
        ));
        assert!(matches!(
            block_on(service.revoke_key(&actor, DEPLOY_KEY, &origin())),
            Err(IamError::Forbidden(Forbidden(Permission::ApiKeysManage)))
        ));
    }
    let mut mocks = Mocks::new();
    mocks
        .service_accounts
        .expect_revoke_organization_api_key()
        .withf(|organization, id, audit| {
            *organization == ACME && *id == DEPLOY_KEY && audit.action.as_str() == "api_key.revoked"
        })
        .times(1)
        .returning(|_, _, _| ready(Ok(true)));
    block_on(service(mocks).revoke_key(
        &ada_acting(Role::Admin, Plan::Free),
        DEPLOY_KEY,
        &origin(),
    ))
    .unwrap();
}

fn auditor_role() -> crate::service::NewRole {
    crate::service::NewRole {
        key: crate::model::RoleKey::parse("auditor").unwrap(),
        name: crate::model::RoleName::parse("Auditor").unwrap(),
        description: crate::model::RoleDescription::default(),
        permissions: crate::model::PermissionSet::of([
            Permission::OrganizationRead,
            Permission::AuditRead,
        ]),
    }
}

#[test]
fn custom_roles_need_a_plan_with_them_and_roles_manage() {
    let refused = block_on(service(Mocks::new()).create_role(
        &ada_acting(Role::Owner, Plan::Pro),
        auditor_role(),
        &origin(),
    ));
    assert!(matches!(refused, Err(IamError::PlanRequired)));
    let refused = block_on(service(Mocks::new()).create_role(
        &ada_acting(Role::Member, Plan::Business),
        auditor_role(),
        &origin(),
    ));
    assert!(matches!(
        refused,
        Err(IamError::Forbidden(Forbidden(Permission::RolesManage)))
    ));
}

#[test]
fn a_role_defined_is_stored_with_an_event_and_a_record_and_a_taken_key_conflicts() {
    let mut mocks = Mocks::new();
    let stored = recording!(
        mocks.roles.expect_create_role().times(1),
        |role, event, audit| (role, event, audit),
        Ok(())
    );
    let role = block_on(service(mocks).create_role(
        &ada_acting(Role::Admin, Plan::Business),
        auditor_role(),
        &origin(),
    ))
    .unwrap();
    let (saved, event, audit) = stored.only();
    assert_eq!(saved, role);
    assert_eq!(event.event_type, EventType::RoleCreated);
    assert_eq!(
        event.data["permissions"],
        serde_json::json!(["organization.read", "audit.read"])
    );
    assert_eq!(audit.action.as_str(), "role.created");

    let mut mocks = Mocks::new();
    mocks
        .roles
        .expect_create_role()
        .returning(|_, _, _| ready(Err(crate::ports::StoreError::Conflict)));
    let taken = block_on(service(mocks).create_role(
        &ada_acting(Role::Admin, Plan::Business),
        auditor_role(),
        &origin(),
    ));
    assert!(matches!(taken, Err(IamError::RoleTaken(key)) if key == "auditor"));
}

#[test]
fn an_auditor_acts_with_its_set_and_gives_nothing_beyond_it() {
    let mut actor = ada_acting(Role::Viewer, Plan::Business);
    let auditor = crate::model::AssignedRole::Custom {
        key: crate::model::RoleKey::parse("auditor").unwrap(),
        permissions: auditor_role().permissions,
    };
    if let Actor::Member { membership, .. } = &mut actor {
        membership.role = auditor.clone();
    }
    assert_eq!(actor.require(Permission::AuditRead), Ok(()));
    assert_eq!(
        actor.require(Permission::MembersRead),
        Err(Forbidden(Permission::MembersRead))
    );
    assert!(actor.may_give(&auditor));
    assert!(
        !actor.may_give(&Role::Viewer.into()),
        "a viewer reads members; the auditor does not"
    );
}

/// A custom role of Acme with `key`.
fn custom(key: &str) -> crate::model::CustomRole {
    crate::model::CustomRole {
        organization_id: ACME,
        key: crate::model::RoleKey::parse(key).unwrap(),
        name: crate::model::RoleName::parse(key).unwrap(),
        description: crate::model::RoleDescription::default(),
        permissions: crate::model::PermissionSet::of([Permission::OrganizationRead]),
        created_at: now(),
        updated_at: now(),
    }
}

#[test]
fn the_roles_page_lists_the_built_in_ones_then_the_stores_slice_of_custom_ones() {
    use crate::model::{ListedRole, PageRequest};
    let listed = |page: i64, size: i64, custom_keys: &'static [&'static str]| {
        let request = PageRequest::new(Some(page), Some(size)).unwrap();
        let mut mocks = Mocks::new();
        // The store is asked only for the part of the page after the four built-in roles.
        let expected = request.after(4);
        mocks
            .roles
            .expect_roles()
            .withf(move |organization, slice| *organization == ACME && *slice == expected)
            .times(1)
            .returning(move |_, _| ready(Ok((custom_keys.iter().map(|k| custom(k)).collect(), 3))));
        let page =
            block_on(service(mocks).roles(&ada_acting(Role::Viewer, Plan::Free), request)).unwrap();
        let keys: Vec<String> = page
            .items()
            .iter()
            .map(|role| match role {
                ListedRole::BuiltIn(role) => role.as_str().to_owned(),
                ListedRole::Custom(role) => role.key.as_ref().to_owned(),
            })
            .collect();
        (keys, page.total(), page.has_next())
    };
    assert_eq!(
        listed(1, 3, &[]),
        (
            vec!["owner".into(), "admin".into(), "member".into()],
            7,
            true
        )
    );
    assert_eq!(
        listed(2, 3, &["a-role", "b-role"]),
        (
            vec!["viewer".into(), "a-role".into(), "b-role".into()],
            7,
            true
        )
    );
    assert_eq!(listed(3, 3, &["c-role"]), (vec!["c-role".into()], 7, false));
    assert_eq!(listed(9, 3, &[]), (vec![], 7, false));
}
