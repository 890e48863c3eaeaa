//! The organization and member store contract, run on PostgreSQL and on SQLite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use diesel::{sql_types::BigInt, QueryableByName};
use gatehouse_domain::model::{
    DirectoryEmail, DirectoryGroup, DirectoryName, DirectoryText, DirectoryUser, GroupAttributes,
    GroupRoles, ScimToken, ScimTokenName, UserAttributes,
};
use gatehouse_domain::{
    model::{
        ApiKeyName, Application, ApplicationId, ApplicationName, ClientId, DefaultRole, Email,
        EventId, EventType, FullName, InvitableRole, InvitationId, InvitationState, KeyHolder,
        MemberFilter, MemberStatus, NewApiKey, NewApplication, NewEvent, NewInvitation,
        NewOrganization, NewUser, OpenInvitation, OrganizationChange, OrganizationFilter,
        OrganizationId, OrganizationName, OrganizationType, PageRequest, PasswordHash, Plan,
        RedirectUri, RedirectUris, Role, RoleRef, SearchTerm, ServiceAccount, ServiceAccountName,
        Slug, TokenHash, UserId,
    },
    ports::{
        DirectoryChange, DirectoryWrite, MemberEffect, NewAccount, PurgedOrganizations, StoreError,
    },
};
use gatehouse_store::{Backend, Store, StoreOptions};
use gatehouse_test_macros::on_both_backends;
use gatehouse_testkit::TestDatabase;
use serde_json::json;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// Set-up

/// A store on a fresh database, and what keeps that database alive.
struct Db {
    store: Arc<dyn Store>,
    url: String,
    _postgres: Option<TestDatabase>,
    _dir: Option<tempfile::TempDir>,
}

impl Db {
    async fn postgres() -> Self {
        let database = TestDatabase::create().await;
        let url = database.url().to_owned();
        Self {
            store: open(&url).await,
            url,
            _postgres: Some(database),
            _dir: None,
        }
    }

    async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = gatehouse_testkit::sqlite_url(&dir);
        Self {
            store: open(&url).await,
            url,
            _postgres: None,
            _dir: Some(dir),
        }
    }

    /// Runs a statement that returns one `n` column.
    async fn count(&self, sql: &str) -> i64 {
        #[derive(QueryableByName)]
        struct Count {
            #[diesel(sql_type = BigInt)]
            n: i64,
        }
        let query = diesel::sql_query(sql);
        let row: Count = match gatehouse_store::backend_of(&self.url).unwrap() {
            Backend::Postgres => {
                use diesel_async::{AsyncConnection, RunQueryDsl};
                let mut conn = diesel_async::AsyncPgConnection::establish(&self.url)
                    .await
                    .unwrap();
                query.get_result(&mut conn).await.unwrap()
            }
            Backend::Sqlite => {
                use diesel::{Connection, RunQueryDsl};
                let path = self.url.trim_start_matches("sqlite://");
                let mut conn = diesel::SqliteConnection::establish(path).unwrap();
                query.get_result(&mut conn).unwrap()
            }
        };
        row.n
    }

    /// How many events of the type the outbox holds.
    async fn events(&self, event_type: EventType) -> i64 {
        self.count(&format!(
            "SELECT count(*) AS n FROM events WHERE event_type = '{event_type}'"
        ))
        .await
    }

    /// How many rows of `table` belong to the organization.
    async fn rows_of(&self, table: &str, org: OrganizationId) -> i64 {
        self.count(&format!(
            "SELECT count(*) AS n FROM {table} WHERE organization_id = '{org}'"
        ))
        .await
    }

    async fn add_application(&self, org: OrganizationId, active: bool) {
        let at = OffsetDateTime::now_utc();
        let application = Application {
            id: ApplicationId::from_uuid(Uuid::now_v7()),
            organization_id: org,
            name: ApplicationName::parse("App").unwrap(),
            client_id: ClientId::generate(Uuid::new_v4()),
            redirect_uris: RedirectUris::new(vec![RedirectUri::parse(
                "https://app.example.com/cb",
            )
            .unwrap()])
            .unwrap(),
            is_active: active,
            require_pkce: false,
            created_at: at,
            updated_at: at,
        };
        let new = NewApplication {
            application,
            secret_hash: TokenHash::of("ghcs_test"),
        };
        let created = NewEvent {
            id: EventId::from(Uuid::now_v7()),
            event_type: EventType::ApplicationCreated,
            organization_id: Some(org),
            user_id: None,
            data: json!({}),
            occurred_at: at,
        };
        assert!(self
            .store
            .create_application(new, created, record())
            .await
            .unwrap());
    }

    /// Registers a user (with their personal workspace).
    async fn user(&self, email: &str, name: &str, at: OffsetDateTime) -> User {
        let id = UserId::from_uuid(Uuid::now_v7());
        let workspace = OrganizationId::from_uuid(Uuid::now_v7());
        self.store
            .create_account(
                NewAccount {
                    user: NewUser {
                        id,
                        email: Email::parse(email).unwrap(),
                        full_name: FullName::parse(name).unwrap(),
                        password_hash: Some(PasswordHash::from_phc("$argon2id$fake".into())),
                        email_verified: false,
                        created_at: at,
                    },
                    workspace: NewOrganization {
                        id: workspace,
                        name: OrganizationName::personal_workspace_of(name),
                        slug: Slug::generate_from(name),
                        slug_generated: true,
                        kind: OrganizationType::Personal,
                        plan: Plan::Free,
                        created_at: at,
                    },
                    events: vec![event(EventType::UserCreated, None, Some(id), at)],
                },
                record(),
            )
            .await
            .unwrap();
        User {
            id,
            email: Email::parse(email).unwrap(),
            workspace,
        }
    }

    /// Creates an organization with the slug given.
    async fn create_org(
        &self,
        owner: UserId,
        name: &str,
        slug: &str,
        kind: OrganizationType,
        at: OffsetDateTime,
    ) -> Result<OrganizationId, StoreError> {
        let id = OrganizationId::from_uuid(Uuid::now_v7());
        self.store
            .create_organization(
                NewOrganization {
                    id,
                    name: OrganizationName::parse(name).unwrap(),
                    slug: Slug::parse(slug).unwrap(),
                    slug_generated: false,
                    kind,
                    plan: Plan::Free,
                    created_at: at,
                },
                owner,
                vec![event(
                    EventType::OrganizationCreated,
                    Some(id),
                    Some(owner),
                    at,
                )],
                record(),
            )
            .await
            .map(|_| id)
    }

    async fn team(
        &self,
        owner: UserId,
        name: &str,
        slug: &str,
        at: OffsetDateTime,
    ) -> OrganizationId {
        self.create_org(owner, name, slug, OrganizationType::Team, at)
            .await
            .unwrap()
    }

    /// Invites the email, to expire a week after `at`, keeping a live invitation of it.
    async fn invite(
        &self,
        org: OrganizationId,
        email: &str,
        role: Role,
        by: UserId,
        at: OffsetDateTime,
    ) -> Result<(InvitationId, TokenHash), StoreError> {
        self.invite_as(org, email, role, by, at, OpenInvitation::Kept)
            .await
    }

    /// Invites the email, to expire a week after `at`, doing `open` to a live invitation.
    async fn invite_as(
        &self,
        org: OrganizationId,
        email: &str,
        role: Role,
        by: UserId,
        at: OffsetDateTime,
        open: OpenInvitation,
    ) -> Result<(InvitationId, TokenHash), StoreError> {
        let id = InvitationId::from_uuid(Uuid::now_v7());
        let token_hash = TokenHash::of(&Uuid::new_v4().to_string());
        self.store
            .create_invitation(
                NewInvitation {
                    id,
                    organization_id: org,
                    email: Email::parse(email).unwrap(),
                    role: InvitableRole::new(role).unwrap(),
                    token_hash: token_hash.clone(),
                    invited_by: by,
                    invited_at: at,
                    expires_at: NewInvitation::expiry(at),
                    open,
                },
                event(EventType::MemberInvited, Some(org), Some(by), at),
                record(),
                mail(),
            )
            .await
            .map(|()| (id, token_hash))
    }

    async fn accept(
        &self,
        invitation: InvitationId,
        user: UserId,
        org: OrganizationId,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.store
            .accept_invitation(
                invitation,
                user,
                at,
                event(EventType::MemberJoined, Some(org), Some(user), at),
                record(),
            )
            .await
    }

    /// Invites the user and has them accept.
    async fn join(
        &self,
        org: OrganizationId,
        user: &User,
        role: Role,
        by: UserId,
        at: OffsetDateTime,
    ) {
        let (invitation, _) = self
            .invite(org, user.email.as_ref(), role, by, at)
            .await
            .unwrap();
        assert!(self.accept(invitation, user.id, org, at).await.unwrap());
    }

    async fn member_ids(
        &self,
        org: OrganizationId,
        filter: MemberFilter,
        page: PageRequest,
        now: OffsetDateTime,
    ) -> (Vec<String>, u64) {
        let page = self.store.members(org, filter, page, now).await.unwrap();
        let emails = page
            .items()
            .iter()
            .map(|m| m.email.as_ref().to_owned())
            .collect();
        (emails, page.total())
    }
}

async fn open(url: &str) -> Arc<dyn Store> {
    gatehouse_store::open(url, &StoreOptions::default())
        .await
        .unwrap()
}

struct User {
    id: UserId,
    email: Email,
    workspace: OrganizationId,
}

/// Now, at the precision both backends keep.
fn now() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.nanosecond() / 1_000 * 1_000)
        .expect("a whole number of microseconds is a valid nanosecond")
}

fn event(
    event_type: EventType,
    organization_id: Option<OrganizationId>,
    user_id: Option<UserId>,
    at: OffsetDateTime,
) -> NewEvent {
    NewEvent {
        id: EventId::from_uuid(Uuid::now_v7()),
        event_type,
        organization_id,
        user_id,
        data: json!({}),
        occurred_at: at,
    }
}

fn page(page: i64, size: i64) -> PageRequest {
    PageRequest::new(Some(page), Some(size)).unwrap()
}

fn term(text: &str) -> Option<SearchTerm> {
    Some(
        SearchTerm::parse(text)
            .expect("a search without control characters")
            .expect("a search with text"),
    )
}

fn search(text: &str) -> OrganizationFilter {
    OrganizationFilter {
        kind: None,
        search: term(text),
    }
}

// ---------------------------------------------------------------------------------------------
// Organizations

#[on_both_backends]
async fn slugs_are_unique(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    let again = db
        .create_org(alice.id, "Acme again", "acme", OrganizationType::Team, t0)
        .await;
    assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");
    assert_eq!(db.events(EventType::OrganizationCreated).await, 1);

    let base = Slug::parse("acme").unwrap();
    assert_eq!(
        db.store.first_free_slug(&base).await.unwrap().as_ref(),
        "acme-2"
    );
    db.team(alice.id, "Acme 2", "acme-2", t0).await;
    assert_eq!(
        db.store.first_free_slug(&base).await.unwrap().as_ref(),
        "acme-3"
    );
    let fresh = Slug::parse("fresh").unwrap();
    assert_eq!(db.store.first_free_slug(&fresh).await.unwrap(), fresh);

    // A generated slug takes the first free candidate.
    let generated = OrganizationId::from_uuid(Uuid::now_v7());
    db.store
        .create_organization(
            NewOrganization {
                id: generated,
                name: OrganizationName::parse("Acme").unwrap(),
                slug: base.clone(),
                slug_generated: true,
                kind: OrganizationType::Team,
                plan: Plan::Free,
                created_at: t0,
            },
            alice.id,
            vec![],
            record(),
        )
        .await
        .unwrap();
    let org = db.store.organization(generated).await.unwrap().unwrap();
    assert_eq!(org.slug.as_ref(), "acme-3");

    let org = db.store.organization(acme).await.unwrap().unwrap();
    assert_eq!(org.slug.as_ref(), "acme");
    assert_eq!(org.name.as_ref(), "Acme");
    assert_eq!(org.kind, OrganizationType::Team);
    assert_eq!(org.plan, Plan::Free);
    assert!(org.is_active);
    assert_eq!(org.settings.default_role, DefaultRole::Member);
    assert!(!org.settings.allow_member_invite);
    assert_eq!((org.created_at, org.updated_at), (t0, t0));
    let owner = db.store.member(acme, alice.id).await.unwrap().unwrap();
    assert_eq!(owner.role, Role::Owner);
}

#[on_both_backends]
async fn organizations_of_pages_and_filters(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let alpha = db
        .team(alice.id, "Alpha Team", "alpha", t0 + Duration::seconds(1))
        .await;
    let beta = db
        .team(alice.id, "Beta TEAM", "beta", t0 + Duration::seconds(2))
        .await;
    let gamma = db
        .team(
            alice.id,
            "Gamma 100%_sure",
            "gamma",
            t0 + Duration::seconds(3),
        )
        .await;
    let bobs = db
        .team(
            bob.id,
            "Alpha Other Team",
            "alpha-other",
            t0 + Duration::seconds(4),
        )
        .await;

    let ids = |page: &gatehouse_domain::model::Page<gatehouse_domain::model::Organization>| {
        page.items().iter().map(|org| org.id).collect::<Vec<_>>()
    };
    let first = db
        .store
        .organizations_of(alice.id, OrganizationFilter::default(), page(1, 2))
        .await
        .unwrap();
    assert_eq!(ids(&first), [gamma, beta]);
    assert_eq!(first.total(), 4);
    assert!(first.has_next() && !first.has_prev());
    let second = db
        .store
        .organizations_of(alice.id, OrganizationFilter::default(), page(2, 2))
        .await
        .unwrap();
    assert_eq!(ids(&second), [alpha, alice.workspace]);
    assert!(!second.has_next() && second.has_prev());
    assert!(!ids(&first).contains(&bobs) && !ids(&second).contains(&bobs));

    let teams = OrganizationFilter {
        kind: Some(OrganizationType::Team),
        search: None,
    };
    let listed = db
        .store
        .organizations_of(alice.id, teams, page(1, 20))
        .await
        .unwrap();
    assert_eq!(ids(&listed), [gamma, beta, alpha]);
    assert_eq!(listed.total(), 3);
    let personal = OrganizationFilter {
        kind: Some(OrganizationType::Personal),
        search: None,
    };
    let listed = db
        .store
        .organizations_of(alice.id, personal, page(1, 20))
        .await
        .unwrap();
    assert_eq!(ids(&listed), [alice.workspace]);

    let listed = db
        .store
        .organizations_of(alice.id, search("tEaM"), page(1, 20))
        .await
        .unwrap();
    assert_eq!(ids(&listed), [beta, alpha]);
    assert_eq!(listed.total(), 2);
    let listed = db
        .store
        .organizations_of(alice.id, search("team"), page(2, 1))
        .await
        .unwrap();
    assert_eq!((ids(&listed), listed.total()), (vec![alpha], 2));
    // Wildcards stand for themselves.
    let listed = db
        .store
        .organizations_of(alice.id, search("0%_S"), page(1, 20))
        .await
        .unwrap();
    assert_eq!(ids(&listed), [gamma]);
    let listed = db
        .store
        .organizations_of(alice.id, search("%"), page(1, 20))
        .await
        .unwrap();
    assert_eq!(ids(&listed), [gamma]);
    let listed = db
        .store
        .organizations_of(alice.id, search("_"), page(1, 20))
        .await
        .unwrap();
    assert_eq!(ids(&listed), [gamma]);
    let listed = db
        .store
        .organizations_of(alice.id, search("nothing"), page(1, 20))
        .await
        .unwrap();
    assert!(listed.items().is_empty() && listed.total() == 0);

    // Bob sees his own, and Alpha once he joins it.
    db.join(
        alpha,
        &bob,
        Role::Member,
        alice.id,
        t0 + Duration::seconds(5),
    )
    .await;
    let listed = db
        .store
        .organizations_of(bob.id, OrganizationFilter::default(), page(1, 20))
        .await
        .unwrap();
    assert_eq!(ids(&listed), [bobs, alpha, bob.workspace]);
    assert_eq!(listed.items()[1].member_count, 2);
}

#[on_both_backends]
async fn organization_counts(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let acme = db
        .team(alice.id, "Acme", "acme", t0 + Duration::seconds(1))
        .await;
    let org = db.store.organization(acme).await.unwrap().unwrap();
    assert_eq!((org.member_count, org.application_count), (1, 0));

    db.join(acme, &bob, Role::Viewer, alice.id, t0).await;
    // A pending invitation is not a member.
    db.invite(acme, "carol@example.com", Role::Member, alice.id, t0)
        .await
        .unwrap();
    db.add_application(acme, true).await;
    db.add_application(acme, false).await;
    db.add_application(alice.workspace, true).await;
    let org = db.store.organization(acme).await.unwrap().unwrap();
    assert_eq!((org.member_count, org.application_count), (2, 2));
    let listed = db
        .store
        .organizations_of(alice.id, OrganizationFilter::default(), page(1, 20))
        .await
        .unwrap();
    let counts: Vec<_> = listed
        .items()
        .iter()
        .map(|org| (org.id, org.member_count, org.application_count))
        .collect();
    assert_eq!(counts, [(acme, 2, 2), (alice.workspace, 1, 1)]);
    assert!(db
        .store
        .organization(OrganizationId::from_uuid(Uuid::now_v7()))
        .await
        .unwrap()
        .is_none());
}

#[on_both_backends]
async fn updates_change_only_given_fields(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    db.team(alice.id, "Other", "other", t0).await;
    let before = db.store.organization(acme).await.unwrap().unwrap();
    let update = |change: OrganizationChange, at| {
        let store = db.store.clone();
        async move {
            store
                .update_organization(
                    acme,
                    change,
                    at,
                    event(EventType::OrganizationUpdated, Some(acme), None, at),
                    record(),
                )
                .await
        }
    };

    let t1 = t0 + Duration::seconds(1);
    let renamed = OrganizationChange {
        name: Some(OrganizationName::parse("Acme Corp").unwrap()),
        ..OrganizationChange::default()
    };
    assert!(update(renamed, t1).await.unwrap());
    let after = db.store.organization(acme).await.unwrap().unwrap();
    assert_eq!(after.name.as_ref(), "Acme Corp");
    assert_eq!(after.slug, before.slug);
    assert_eq!(after.settings, before.settings);
    assert_eq!(after.updated_at, t1);
    assert_eq!(after.created_at, t0);

    let t2 = t0 + Duration::seconds(2);
    let settings = OrganizationChange {
        default_role: Some(DefaultRole::Viewer),
        allow_member_invite: Some(true),
        slug: Some(Slug::parse("acme-corp").unwrap()),
        ..OrganizationChange::default()
    };
    assert!(update(settings, t2).await.unwrap());
    let after = db.store.organization(acme).await.unwrap().unwrap();
    assert_eq!(after.name.as_ref(), "Acme Corp");
    assert_eq!(after.slug.as_ref(), "acme-corp");
    assert_eq!(after.settings.default_role, DefaultRole::Viewer);
    assert!(after.settings.allow_member_invite);
    assert_eq!(db.events(EventType::OrganizationUpdated).await, 2);

    let taken = OrganizationChange {
        slug: Some(Slug::parse("other").unwrap()),
        ..OrganizationChange::default()
    };
    let result = update(taken, t2).await;
    assert!(matches!(result, Err(StoreError::Conflict)), "{result:?}");
    assert_eq!(db.events(EventType::OrganizationUpdated).await, 2);
    assert_eq!(
        db.store
            .organization(acme)
            .await
            .unwrap()
            .unwrap()
            .slug
            .as_ref(),
        "acme-corp"
    );

    // An organization that is not live is not updated, and no event is recorded.
    let gone = OrganizationId::from_uuid(Uuid::now_v7());
    let result = db
        .store
        .update_organization(
            gone,
            OrganizationChange::default(),
            t2,
            event(EventType::OrganizationUpdated, Some(gone), None, t2),
            record(),
        )
        .await;
    assert!(!result.unwrap());
    assert_eq!(db.events(EventType::OrganizationUpdated).await, 2);
}

#[on_both_backends]
async fn deleted_organizations_disappear_and_purge(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    db.join(acme, &bob, Role::Member, alice.id, t0).await;
    db.invite(acme, "carol@example.com", Role::Member, alice.id, t0)
        .await
        .unwrap();
    db.add_application(acme, true).await;
    let t1 = t0 + Duration::seconds(10);
    let delete = |at| {
        let store = db.store.clone();
        async move {
            store
                .delete_organization(
                    acme,
                    at,
                    event(EventType::OrganizationUpdated, Some(acme), None, at),
                    record(),
                )
                .await
                .unwrap()
        }
    };
    assert!(delete(t1).await);
    assert!(!delete(t1).await);
    assert_eq!(db.events(EventType::OrganizationUpdated).await, 1);

    assert!(db.store.organization(acme).await.unwrap().is_none());
    assert!(db.store.membership(alice.id, acme).await.unwrap().is_none());
    assert!(db.store.membership(bob.id, acme).await.unwrap().is_none());
    let listed = db
        .store
        .organizations_of(alice.id, OrganizationFilter::default(), page(1, 20))
        .await
        .unwrap();
    assert_eq!(
        listed.items().iter().map(|o| o.id).collect::<Vec<_>>(),
        [alice.workspace]
    );
    assert_eq!(listed.total(), 1);
    let carol = Email::parse("carol@example.com").unwrap();
    assert!(db
        .store
        .invitations_for(&carol, t1, PageRequest::default())
        .await
        .unwrap()
        .into_items()
        .is_empty());
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) AS n FROM applications WHERE organization_id = '{acme}' AND is_active = true"
        ))
        .await,
        0
    );
    let renamed = OrganizationChange {
        name: Some(OrganizationName::parse("Zombie").unwrap()),
        ..OrganizationChange::default()
    };
    let updated = db
        .store
        .update_organization(
            acme,
            renamed,
            t1,
            event(EventType::OrganizationUpdated, Some(acme), None, t1),
            record(),
        )
        .await
        .unwrap();
    assert!(!updated);
    // The slug stays taken until the purge.
    let taken = db
        .create_org(alice.id, "Acme", "acme", OrganizationType::Team, t1)
        .await;
    assert!(matches!(taken, Err(StoreError::Conflict)), "{taken:?}");

    assert_eq!(
        db.store.purge_organizations(t1, 1_000).await.unwrap(),
        PurgedOrganizations::default(),
        "not deleted before the cutoff"
    );
    // In slices of one row: its two memberships one at a time, the organization still there,
    // then the organization with the rest (its invitation, its application) by cascade.
    let after = t1 + Duration::seconds(1);
    let org_rows = format!("SELECT count(*) AS n FROM organizations WHERE id = '{acme}'");
    for _ in 0..2 {
        assert_eq!(
            db.store.purge_organizations(after, 1).await.unwrap(),
            PurgedOrganizations {
                organizations: 0,
                rows: 1
            }
        );
        assert_eq!(db.count(&org_rows).await, 1, "the organization goes last");
    }
    assert_eq!(
        db.store.purge_organizations(after, 1).await.unwrap(),
        PurgedOrganizations {
            organizations: 1,
            rows: 0
        }
    );
    assert_eq!(
        db.store.purge_organizations(after, 1).await.unwrap(),
        PurgedOrganizations::default(),
        "nothing left: the purge ends"
    );
    for table in ["memberships", "invitations", "applications"] {
        assert_eq!(db.rows_of(table, acme).await, 0, "{table}");
    }
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) AS n FROM organizations WHERE id = '{acme}'"
        ))
        .await,
        0
    );
    // Live organizations stay.
    assert!(db
        .store
        .organization(alice.workspace)
        .await
        .unwrap()
        .is_some());
    assert!(db
        .store
        .organization(bob.workspace)
        .await
        .unwrap()
        .is_some());
    db.create_org(alice.id, "Acme", "acme", OrganizationType::Team, t1)
        .await
        .unwrap();
}

#[on_both_backends]
async fn set_plan_changes_live_organizations(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    let t1 = t0 + Duration::seconds(1);
    let set = |org, plan| {
        let store = db.store.clone();
        async move {
            store
                .set_plan(
                    org,
                    plan,
                    t1,
                    event(EventType::BillingSubscriptionUpdated, Some(org), None, t1),
                    record(),
                )
                .await
                .unwrap()
        }
    };
    assert!(set(acme, Plan::Business).await);
    let org = db.store.organization(acme).await.unwrap().unwrap();
    assert_eq!((org.plan, org.updated_at), (Plan::Business, t1));
    assert_eq!(
        db.store.highest_plan(alice.id).await.unwrap(),
        Some(Plan::Business)
    );
    assert!(!set(OrganizationId::from_uuid(Uuid::now_v7()), Plan::Pro).await);
    assert_eq!(db.events(EventType::BillingSubscriptionUpdated).await, 1);
}

/// `POST /control/events`: the billing system's event, in the outbox of a live organization
/// only.
#[on_both_backends]
async fn billing_events_are_recorded_for_live_organizations(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    let paid = |org| event(EventType::BillingInvoicePaid, Some(org), None, t0);
    assert!(db
        .store
        .record_billing_event(paid(acme), record())
        .await
        .unwrap());
    assert_eq!(db.events(EventType::BillingInvoicePaid).await, 1);
    let nowhere = OrganizationId::from_uuid(Uuid::now_v7());
    assert!(!db
        .store
        .record_billing_event(paid(nowhere), record())
        .await
        .unwrap());
    db.store
        .delete_organization(
            acme,
            t0,
            event(EventType::OrganizationUpdated, Some(acme), None, t0),
            record(),
        )
        .await
        .unwrap();
    assert!(!db
        .store
        .record_billing_event(paid(acme), record())
        .await
        .unwrap());
    assert_eq!(
        db.events(EventType::BillingInvoicePaid).await,
        1,
        "nothing written"
    );
}

// ---------------------------------------------------------------------------------------------
// Members

#[on_both_backends]
async fn members_page_across_members_and_invitations(db: Db) {
    let t0 = now();
    let at = |s| t0 + Duration::seconds(s);
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let carol = db.user("carol@example.com", "Carol", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", at(1)).await;
    let (bob_invitation, _) = db
        .invite(acme, "bob@example.com", Role::Viewer, alice.id, at(2))
        .await
        .unwrap();
    assert!(db
        .accept(bob_invitation, bob.id, acme, at(3))
        .await
        .unwrap());
    db.join(acme, &carol, Role::Admin, alice.id, at(4)).await;
    let (dave, _) = db
        .invite(acme, "dave@example.com", Role::Member, bob.id, at(5))
        .await
        .unwrap();
    db.invite(acme, "erin@example.com", Role::Viewer, alice.id, at(6))
        .await
        .unwrap();
    // Neither an expired nor a revoked invitation is listed.
    db.invite(
        acme,
        "old@example.com",
        Role::Member,
        alice.id,
        at(0) - Duration::days(8),
    )
    .await
    .unwrap();
    let (revoked, _) = db
        .invite(acme, "gone@example.com", Role::Member, alice.id, at(7))
        .await
        .unwrap();
    assert!(db
        .store
        .revoke_invitation(acme, revoked, at(8), record())
        .await
        .unwrap());
    // Nor members of other organizations.
    db.invite(
        bob.workspace,
        "frank@example.com",
        Role::Member,
        bob.id,
        at(9),
    )
    .await
    .unwrap();

    let now = at(10);
    let all = MemberFilter::default();
    let first = db
        .store
        .members(acme, all.clone(), page(1, 2), now)
        .await
        .unwrap();
    let second = db
        .store
        .members(acme, all.clone(), page(2, 2), now)
        .await
        .unwrap();
    let third = db
        .store
        .members(acme, all.clone(), page(3, 2), now)
        .await
        .unwrap();
    let fourth = db
        .store
        .members(acme, all.clone(), page(4, 2), now)
        .await
        .unwrap();
    let emails = |page: &gatehouse_domain::model::Page<gatehouse_domain::model::Member>| {
        page.items()
            .iter()
            .map(|m| m.email.as_ref().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(emails(&first), ["alice@example.com", "bob@example.com"]);
    assert_eq!(emails(&second), ["carol@example.com", "dave@example.com"]);
    assert_eq!(emails(&third), ["erin@example.com"]);
    assert!(fourth.items().is_empty());
    for page in [&first, &second, &third, &fourth] {
        assert_eq!(page.total(), 5);
    }
    assert!(first.has_next() && second.has_next() && !third.has_next());

    let owner = &first.items()[0];
    assert_eq!(owner.user_id, Some(alice.id));
    assert_eq!(owner.role, Role::Owner);
    assert_eq!(owner.status, MemberStatus::Active);
    assert_eq!(owner.full_name.as_ref().map(AsRef::as_ref), Some("Alice"));
    assert_eq!((owner.invited_at, owner.invited_by), (None, None));
    assert_eq!((owner.accepted_at, owner.joined_at), (Some(at(1)), at(1)));
    let joined = &first.items()[1];
    assert_eq!(joined.user_id, Some(bob.id));
    assert_eq!(joined.role, Role::Viewer);
    assert_eq!(joined.status, MemberStatus::Active);
    assert_eq!(joined.invitation_id, None);
    assert_eq!(
        (joined.invited_at, joined.invited_by),
        (Some(at(2)), Some(alice.id))
    );
    assert_eq!((joined.accepted_at, joined.joined_at), (Some(at(3)), at(3)));
    let pending = &second.items()[1];
    assert_eq!(pending.organization_id, acme);
    assert_eq!((pending.user_id, pending.full_name.as_ref()), (None, None));
    assert_eq!(pending.role, Role::Member);
    assert_eq!(pending.status, MemberStatus::Pending);
    assert_eq!(pending.invitation_id, Some(dave));
    assert_eq!(
        (pending.invited_at, pending.invited_by),
        (Some(at(5)), Some(bob.id))
    );
    assert_eq!((pending.accepted_at, pending.joined_at), (None, at(5)));

    // A page size that spans both sources at once.
    let (everyone, total) = db.member_ids(acme, all.clone(), page(1, 20), now).await;
    assert_eq!(total, 5);
    assert_eq!(everyone.len(), 5);
    // Invitations that expire by `now` are left out.
    let (later, total) = db
        .member_ids(acme, all, page(1, 20), at(6) + Duration::days(7))
        .await;
    assert_eq!((later.len(), total), (3, 3));

    let active_only = MemberFilter {
        active_only: true,
        ..MemberFilter::default()
    };
    let (active, total) = db
        .member_ids(acme, active_only.clone(), page(2, 2), now)
        .await;
    assert_eq!((active, total), (vec!["carol@example.com".to_owned()], 3));
    let (active, total) = db.member_ids(acme, active_only, page(3, 2), now).await;
    assert_eq!((active.len(), total), (0, 3));
    // The deepest page a client can ask for: empty, with the total.
    let deepest = page(i64::from(u32::MAX), 100);
    let (listed, total) = db
        .member_ids(acme, MemberFilter::default(), deepest, now)
        .await;
    assert_eq!((listed.len(), total), (0, 5));
}

#[on_both_backends]
async fn members_filters(db: Db) {
    let t0 = now();
    let at = |s| t0 + Duration::seconds(s);
    let alice = db.user("alice@example.com", "Alice Smith", t0).await;
    let bob = db.user("bob@example.com", "Bob Jones", t0).await;
    let carol = db.user("carol@jones.example", "Carol", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", at(1)).await;
    db.join(acme, &bob, Role::Viewer, alice.id, at(2)).await;
    db.join(acme, &carol, Role::Member, alice.id, at(3)).await;
    db.invite(acme, "dave@example.com", Role::Viewer, alice.id, at(4))
        .await
        .unwrap();
    db.invite(acme, "erin.jones@example.com", Role::Admin, alice.id, at(5))
        .await
        .unwrap();
    // Another tenant's Jones: the index finds him too, the organization does not.
    let zed = db.user("zed.jones@example.com", "Zed Jones", t0).await;
    db.team(zed.id, "Globex", "globex", at(5)).await;
    let now = at(6);

    let viewers = MemberFilter {
        role: Some(RoleRef::BuiltIn(Role::Viewer)),
        ..MemberFilter::default()
    };
    let (listed, total) = db.member_ids(acme, viewers, page(1, 20), now).await;
    assert_eq!(
        (listed, total),
        (
            vec!["bob@example.com".to_owned(), "dave@example.com".to_owned()],
            2
        )
    );

    // Names and emails of members, emails of invitations; case does not matter.
    let jones = MemberFilter {
        search: term("JONES"),
        ..MemberFilter::default()
    };
    let (listed, total) = db.member_ids(acme, jones.clone(), page(1, 20), now).await;
    assert_eq!(
        listed,
        [
            "bob@example.com",
            "carol@jones.example",
            "erin.jones@example.com"
        ]
    );
    assert_eq!(total, 3);
    let (listed, total) = db.member_ids(acme, jones.clone(), page(2, 2), now).await;
    assert_eq!(
        (listed, total),
        (vec!["erin.jones@example.com".to_owned()], 3)
    );
    let active_jones = MemberFilter {
        active_only: true,
        ..jones
    };
    let (listed, total) = db.member_ids(acme, active_jones, page(1, 20), now).await;
    assert_eq!((listed.len(), total), (2, 2));
    let smith_viewers = MemberFilter {
        role: Some(RoleRef::BuiltIn(Role::Viewer)),
        search: term("smith"),
        active_only: false,
    };
    let (listed, total) = db.member_ids(acme, smith_viewers, page(1, 20), now).await;
    assert_eq!((listed.len(), total), (0, 0));
    let wildcard = MemberFilter {
        search: term("_"),
        ..MemberFilter::default()
    };
    let (listed, total) = db.member_ids(acme, wildcard, page(1, 20), now).await;
    assert_eq!((listed.len(), total), (0, 0));
    // Two characters hold no trigram: the search reads the organization's members instead,
    // and finds the same.
    let bo = MemberFilter {
        search: term("bO"),
        ..MemberFilter::default()
    };
    let (listed, total) = db.member_ids(acme, bo, page(1, 20), now).await;
    assert_eq!((listed, total), (vec!["bob@example.com".to_owned()], 1));
    // The index's query syntax is the term's own text: quotes and operators find nothing.
    for odd in ["\"jones", "jones\" OR \"smith", "jo*", "NEAR(jones smith)"] {
        let odd = MemberFilter {
            search: term(odd),
            ..MemberFilter::default()
        };
        let (listed, total) = db.member_ids(acme, odd, page(1, 20), now).await;
        assert_eq!((listed.len(), total), (0, 0));
    }
    // A name as written in the middle of a word, and an address across its `@`.
    let middle = MemberFilter {
        search: term("ob jon"),
        ..MemberFilter::default()
    };
    let (listed, _) = db.member_ids(acme, middle, page(1, 20), now).await;
    assert_eq!(listed, ["bob@example.com"]);
    let across = MemberFilter {
        search: term("ol@jones.EX"),
        ..MemberFilter::default()
    };
    let (listed, _) = db.member_ids(acme, across, page(1, 20), now).await;
    assert_eq!(listed, ["carol@jones.example"]);

    let member = db.store.member(acme, carol.id).await.unwrap().unwrap();
    assert_eq!(member.role, Role::Member);
    assert_eq!(member.email.as_ref(), "carol@jones.example");
    assert!(db
        .store
        .member(bob.workspace, carol.id)
        .await
        .unwrap()
        .is_none());
    let email = |e: &str| Email::parse(e).unwrap();
    assert!(db
        .store
        .is_member_email(acme, &email("bob@example.com"))
        .await
        .unwrap());
    assert!(!db
        .store
        .is_member_email(acme, &email("dave@example.com"))
        .await
        .unwrap());
    assert!(!db
        .store
        .is_member_email(bob.workspace, &email("carol@jones.example"))
        .await
        .unwrap());
}

#[on_both_backends]
async fn invitations_lifecycle(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let acme = db.team(alice.id, "Acme Corp", "acme", t0).await;
    let beta = db.team(alice.id, "Beta", "beta", t0).await;
    let gamma = db.team(alice.id, "Gamma", "gamma", t0).await;
    let dead = db.team(alice.id, "Dead", "dead", t0).await;

    let (first, token) = db
        .invite(acme, "dave@example.com", Role::Admin, alice.id, t0)
        .await
        .unwrap();
    assert_eq!(db.events(EventType::MemberInvited).await, 1);
    let invitation = db.store.invitation(first).await.unwrap().unwrap();
    assert_eq!(invitation.id, first);
    assert_eq!(invitation.organization_id, acme);
    assert_eq!(invitation.organization_name.as_ref(), "Acme Corp");
    assert_eq!(invitation.organization_slug.as_ref(), "acme");
    assert_eq!(invitation.email.as_ref(), "dave@example.com");
    assert_eq!(invitation.role, Role::Admin);
    assert_eq!(invitation.invited_by, alice.id);
    assert_eq!(
        (invitation.invited_at, invitation.expires_at),
        (t0, NewInvitation::expiry(t0))
    );
    assert_eq!(
        db.store.invitation_by_token(&token).await.unwrap(),
        Some(invitation.clone())
    );
    assert!(db
        .store
        .invitation_by_token(&TokenHash::of("other"))
        .await
        .unwrap()
        .is_none());

    // One open invitation per email and organization.
    let t1 = t0 + Duration::seconds(1);
    let duplicate = db
        .invite(acme, "dave@example.com", Role::Member, alice.id, t1)
        .await;
    assert!(
        matches!(duplicate, Err(StoreError::Conflict)),
        "{duplicate:?}"
    );
    assert_eq!(db.events(EventType::MemberInvited).await, 1);
    db.invite(beta, "dave@example.com", Role::Member, alice.id, t1)
        .await
        .unwrap();
    // The directory's invitation replaces a live one, whose link stops working.
    let (replacing, _) = db
        .invite_as(
            beta,
            "dave@example.com",
            Role::Viewer,
            alice.id,
            t1,
            OpenInvitation::Replaced,
        )
        .await
        .unwrap();
    let open = db
        .store
        .invitations_for(
            &Email::parse("dave@example.com").unwrap(),
            t1,
            PageRequest::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        open.items()
            .iter()
            .filter(|i| i.organization_id == beta)
            .map(|i| i.id)
            .collect::<Vec<_>>(),
        [replacing]
    );

    // An expired one is closed and replaced; it is still found (as expired) until then.
    let long_ago = t0 - Duration::days(8);
    let (expired, _) = db
        .invite(gamma, "dave@example.com", Role::Member, alice.id, long_ago)
        .await
        .unwrap();
    let found = db.store.invitation(expired).await.unwrap().unwrap();
    assert!(found.is_expired(t0));
    let replaced_at = t0 + Duration::seconds(2);
    let (replacement, _) = db
        .invite(
            gamma,
            "dave@example.com",
            Role::Viewer,
            alice.id,
            replaced_at,
        )
        .await
        .unwrap();
    assert!(db.store.invitation(expired).await.unwrap().is_none());
    assert!(db.store.invitation(replacement).await.unwrap().is_some());

    // Not listed: revoked, expired, or in an organization that is gone.
    let t2 = t0 + Duration::seconds(3);
    let (in_dead, _) = db
        .invite(dead, "dave@example.com", Role::Member, alice.id, t2)
        .await
        .unwrap();
    db.store
        .delete_organization(
            dead,
            t2,
            event(EventType::OrganizationUpdated, Some(dead), None, t2),
            record(),
        )
        .await
        .unwrap();
    assert!(db.store.invitation(in_dead).await.unwrap().is_none());
    let dave = Email::parse("dave@example.com").unwrap();
    let listed: Vec<_> = db
        .store
        .invitations_for(&dave, t2, PageRequest::default())
        .await
        .unwrap()
        .into_items()
        .into_iter()
        .map(|i| i.organization_id)
        .collect();
    assert_eq!(listed, [gamma, beta, acme]);

    let beta_invitation = db
        .store
        .invitations_for(&dave, t2, PageRequest::default())
        .await
        .unwrap()
        .into_items()[1]
        .id;
    assert!(!db
        .store
        .revoke_invitation(acme, beta_invitation, t2, record())
        .await
        .unwrap());
    assert!(db
        .store
        .revoke_invitation(beta, beta_invitation, t2, record())
        .await
        .unwrap());
    assert!(!db
        .store
        .revoke_invitation(beta, beta_invitation, t2, record())
        .await
        .unwrap());
    assert!(db
        .store
        .invitation(beta_invitation)
        .await
        .unwrap()
        .is_none());
    let listed: Vec<_> = db
        .store
        .invitations_for(&dave, t2, PageRequest::default())
        .await
        .unwrap()
        .into_items()
        .into_iter()
        .map(|i| i.organization_id)
        .collect();
    assert_eq!(listed, [gamma, acme]);
    // A revoked invitation no longer blocks a new one.
    db.invite(beta, "dave@example.com", Role::Member, alice.id, t2)
        .await
        .unwrap();

    // Expiry is checked against `now`.
    let later = NewInvitation::expiry(t0);
    let listed: Vec<_> = db
        .store
        .invitations_for(&dave, later, PageRequest::default())
        .await
        .unwrap()
        .into_items()
        .into_iter()
        .map(|i| i.organization_id)
        .collect();
    assert_eq!(listed, [beta, gamma]);
    let other = Email::parse("nobody@example.com").unwrap();
    assert!(db
        .store
        .invitations_for(&other, t2, PageRequest::default())
        .await
        .unwrap()
        .into_items()
        .is_empty());
}

/// What the page of a mailed link reads: the invitation by its token, whatever became of it,
/// while its organization exists.
#[on_both_backends]
async fn invitation_records_tell_what_became_of_each(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    let dead = db.team(alice.id, "Dead", "dead", t0).await;
    let (pending, pending_token) = db
        .invite(acme, "bob@example.com", Role::Viewer, alice.id, t0)
        .await
        .unwrap();
    let found = db
        .store
        .invitation_record(&pending_token)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        found.invitation,
        db.store.invitation(pending).await.unwrap().unwrap()
    );
    assert_eq!(
        (found.accepted_at, found.revoked_at, found.plan),
        (None, None, Plan::Free)
    );
    assert_eq!(found.state(t0), InvitationState::Pending);
    assert_eq!(
        found.state(NewInvitation::expiry(t0)),
        InvitationState::Expired
    );

    let t1 = t0 + Duration::seconds(1);
    assert!(db.accept(pending, bob.id, acme, t1).await.unwrap());
    let used = db
        .store
        .invitation_record(&pending_token)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(used.accepted_at, Some(t1));
    assert_eq!(used.state(t1), InvitationState::Accepted);

    let (withdrawn, withdrawn_token) = db
        .invite(acme, "carol@example.com", Role::Member, alice.id, t1)
        .await
        .unwrap();
    assert!(db
        .store
        .revoke_invitation(acme, withdrawn, t1, record())
        .await
        .unwrap());
    let revoked = db
        .store
        .invitation_record(&withdrawn_token)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(revoked.revoked_at, Some(t1));
    assert_eq!(revoked.state(t1), InvitationState::Revoked);

    let (_, in_dead) = db
        .invite(dead, "dan@example.com", Role::Member, alice.id, t1)
        .await
        .unwrap();
    db.store
        .delete_organization(
            dead,
            t1,
            event(EventType::OrganizationUpdated, Some(dead), None, t1),
            record(),
        )
        .await
        .unwrap();
    assert!(db
        .store
        .invitation_record(&in_dead)
        .await
        .unwrap()
        .is_none());
    assert!(db
        .store
        .invitation_record(&TokenHash::of("other"))
        .await
        .unwrap()
        .is_none());
}

#[on_both_backends]
async fn accepting_invitations(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;

    let (invitation, _) = db
        .invite(acme, "bob@example.com", Role::Admin, alice.id, t0)
        .await
        .unwrap();
    let t1 = t0 + Duration::seconds(1);
    assert!(db.accept(invitation, bob.id, acme, t1).await.unwrap());
    let member = db.store.member(acme, bob.id).await.unwrap().unwrap();
    assert_eq!(member.role, Role::Admin);
    assert_eq!(member.status, MemberStatus::Active);
    assert_eq!(member.accepted_at, Some(t1));
    assert_eq!(member.joined_at, t1);
    assert_eq!(
        (member.invited_at, member.invited_by),
        (Some(t0), Some(alice.id))
    );
    let membership = db.store.membership(bob.id, acme).await.unwrap().unwrap();
    assert_eq!(membership.role, Role::Admin);
    assert!(db.store.invitation(invitation).await.unwrap().is_none());
    assert_eq!(db.events(EventType::MemberJoined).await, 1);

    // Accepted once only.
    assert!(!db.accept(invitation, bob.id, acme, t1).await.unwrap());
    assert!(!db
        .accept(InvitationId::from_uuid(Uuid::now_v7()), bob.id, acme, t1)
        .await
        .unwrap());
    assert_eq!(db.events(EventType::MemberJoined).await, 1);

    // Someone who already belongs cannot accept: nothing changes.
    let (again, _) = db
        .invite(acme, "someone@example.com", Role::Viewer, alice.id, t1)
        .await
        .unwrap();
    let result = db.accept(again, bob.id, acme, t1).await;
    assert!(matches!(result, Err(StoreError::Conflict)), "{result:?}");
    assert!(db.store.invitation(again).await.unwrap().is_some());
    assert_eq!(
        db.store.member(acme, bob.id).await.unwrap().unwrap().role,
        Role::Admin
    );
    assert_eq!(db.events(EventType::MemberJoined).await, 1);

    // A revoked invitation cannot be accepted.
    assert!(db
        .store
        .revoke_invitation(acme, again, t1, record())
        .await
        .unwrap());
    let carol = db.user("carol@example.com", "Carol", t0).await;
    assert!(!db.accept(again, carol.id, acme, t1).await.unwrap());
    assert!(db.store.member(acme, carol.id).await.unwrap().is_none());
}

#[on_both_backends]
async fn roles_and_removal(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    db.join(acme, &bob, Role::Member, alice.id, t0).await;

    let t1 = t0 + Duration::seconds(1);
    let change = |user, role: Role| {
        let store = db.store.clone();
        async move {
            store
                .change_role(
                    acme,
                    user,
                    role.into(),
                    t1,
                    event(EventType::MemberRoleChanged, Some(acme), None, t1),
                    record(),
                    vec![],
                )
                .await
                .unwrap()
        }
    };
    assert!(change(bob.id, Role::Admin).await);
    assert_eq!(
        db.store.member(acme, bob.id).await.unwrap().unwrap().role,
        Role::Admin
    );
    let outsider = db.user("carol@example.com", "Carol", t0).await;
    assert!(!change(outsider.id, Role::Admin).await);
    assert_eq!(db.events(EventType::MemberRoleChanged).await, 1);

    let key = |org| NewApiKey {
        id: Uuid::now_v7().into(),
        name: ApiKeyName::parse("ci").unwrap(),
        prefix: "gh_abcd".to_owned(),
        key_hash: TokenHash::of(&Uuid::new_v4().to_string()),
        organization_id: org,
        holder: KeyHolder::User(bob.id),
        created_at: t0,
    };
    db.store
        .create_api_key(key(acme), record())
        .await
        .unwrap()
        .expect("created");
    let kept = db
        .store
        .create_api_key(key(bob.workspace), record())
        .await
        .unwrap()
        .expect("created");

    let remove = |user| {
        let store = db.store.clone();
        async move {
            store
                .remove_member(
                    acme,
                    user,
                    event(EventType::MemberRemoved, Some(acme), Some(user), t1),
                    record(),
                    vec![],
                )
                .await
                .unwrap()
        }
    };
    assert!(remove(bob.id).await);
    assert!(db.store.member(acme, bob.id).await.unwrap().is_none());
    assert!(db.store.membership(bob.id, acme).await.unwrap().is_none());
    assert_eq!(
        db.store
            .api_keys_of(bob.id, PageRequest::default())
            .await
            .unwrap()
            .into_items(),
        [kept]
    );
    assert!(!remove(bob.id).await);
    assert_eq!(db.events(EventType::MemberRemoved).await, 1);
    let org = db.store.organization(acme).await.unwrap().unwrap();
    assert_eq!(org.member_count, 1);
}

#[on_both_backends]
async fn transferring_ownership(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let carol = db.user("carol@example.com", "Carol", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    db.join(acme, &bob, Role::Member, alice.id, t0).await;
    let t1 = t0 + Duration::seconds(1);
    let transfer = |from, to| {
        let store = db.store.clone();
        async move {
            store
                .transfer_ownership(
                    acme,
                    from,
                    to,
                    t1,
                    vec![
                        event(EventType::MemberRoleChanged, Some(acme), None, t1),
                        event(EventType::MemberRoleChanged, Some(acme), None, t1),
                    ],
                    record(),
                )
                .await
                .unwrap()
        }
    };
    let role = |user| {
        let store = db.store.clone();
        async move { store.member(acme, user).await.unwrap().map(|m| m.role) }
    };
    // To someone who is not a member: nothing moves, the demotion included.
    assert!(!transfer(alice.id, carol.id).await);
    assert_eq!(role(alice.id).await, Some(Role::Owner.into()));
    assert_eq!(db.events(EventType::MemberRoleChanged).await, 0);
    // From someone who is not the owner: nothing moves.
    assert!(!transfer(bob.id, bob.id).await);
    assert_eq!(role(bob.id).await, Some(Role::Member.into()));

    assert!(transfer(alice.id, bob.id).await);
    assert_eq!(role(alice.id).await, Some(Role::Admin.into()));
    assert_eq!(role(bob.id).await, Some(Role::Owner.into()));
    assert_eq!(db.events(EventType::MemberRoleChanged).await, 2);
    assert_eq!(
        db.count("SELECT count(*) AS n FROM memberships WHERE role = 'owner'")
            .await,
        4,
        "one owner per organization: Acme's and the three personal workspaces'"
    );
    // Alice owns no team with people any more.
    assert!(db
        .store
        .owned_teams_with_members(alice.id)
        .await
        .unwrap()
        .is_empty());
    // Twice is not possible: she is not the owner now.
    assert!(!transfer(alice.id, bob.id).await);
}

#[on_both_backends]
async fn service_accounts_and_their_keys(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    let globex = db.team(alice.id, "Globex", "globex", t0).await;
    let account = ServiceAccount {
        id: Uuid::now_v7().into(),
        organization_id: acme,
        name: ServiceAccountName::parse("CI deploys").unwrap(),
        role: Role::Member.into(),
        created_by: alice.id,
        created_at: t0,
        updated_at: t0,
    };
    assert!(db
        .store
        .create_service_account(
            account.clone(),
            event(EventType::ServiceAccountCreated, Some(acme), None, t0),
            record()
        )
        .await
        .unwrap());
    assert_eq!(
        db.store.service_accounts(acme).await.unwrap(),
        std::slice::from_ref(&account)
    );
    assert!(db.store.service_accounts(globex).await.unwrap().is_empty());
    let access = db.store.service_account(account.id).await.unwrap().unwrap();
    assert_eq!(access.account, account);
    assert_eq!(access.plan, Plan::Free);

    let token = Uuid::new_v4().to_string();
    let key = NewApiKey {
        id: Uuid::now_v7().into(),
        name: ApiKeyName::parse("pipeline").unwrap(),
        prefix: "ghk_abcd".to_owned(),
        key_hash: TokenHash::of(&token),
        organization_id: acme,
        holder: KeyHolder::ServiceAccount(account.id),
        created_at: t0,
    };
    let stored = db
        .store
        .create_api_key(key.clone(), record())
        .await
        .unwrap()
        .expect("created");
    assert_eq!(stored.holder, KeyHolder::ServiceAccount(account.id));
    let used = db
        .store
        .use_api_key(&TokenHash::of(&token), t0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(used.holder, KeyHolder::ServiceAccount(account.id));
    // It is the organization's key, and no user's.
    let listed = db
        .store
        .organization_api_keys(acme, PageRequest::default())
        .await
        .unwrap();
    assert_eq!(listed.total(), 1);
    assert_eq!(listed.items()[0].id, stored.id);
    assert_eq!(listed.items()[0].last_used_at, Some(t0), "used once");
    assert!(db
        .store
        .api_keys_of(alice.id, PageRequest::default())
        .await
        .unwrap()
        .into_items()
        .is_empty());

    // A change of role, only in its own organization.
    let t1 = t0 + Duration::seconds(1);
    let rename = |organization| {
        let store = db.store.clone();
        async move {
            store
                .update_service_account(
                    organization,
                    account.id,
                    None,
                    Some(Role::Admin.into()),
                    t1,
                    event(
                        EventType::ServiceAccountUpdated,
                        Some(organization),
                        None,
                        t1,
                    ),
                    record(),
                )
                .await
                .unwrap()
        }
    };
    assert!(rename(globex).await.is_none());
    let updated = rename(acme).await.unwrap();
    assert_eq!(updated.role, Role::Admin);
    assert_eq!(updated.name.as_ref(), "CI deploys");
    assert_eq!(updated.updated_at, t1);
    assert_eq!(db.events(EventType::ServiceAccountUpdated).await, 1);

    // Deleting it, in its own organization only, deletes its keys.
    let delete = |organization| {
        let store = db.store.clone();
        async move {
            store
                .delete_service_account(
                    organization,
                    account.id,
                    event(
                        EventType::ServiceAccountDeleted,
                        Some(organization),
                        None,
                        t1,
                    ),
                    record(),
                )
                .await
                .unwrap()
        }
    };
    assert!(!delete(globex).await);
    assert!(db
        .store
        .service_account(account.id)
        .await
        .unwrap()
        .is_some());
    assert!(delete(acme).await);
    assert!(db
        .store
        .service_account(account.id)
        .await
        .unwrap()
        .is_none());
    assert!(db
        .store
        .use_api_key(&TokenHash::of(&token), t1)
        .await
        .unwrap()
        .is_none());
    assert_eq!(db.rows_of("api_keys", acme).await, 0);
    assert_eq!(db.events(EventType::ServiceAccountDeleted).await, 1);
}

#[on_both_backends]
async fn deleting_users(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let shared = db.team(alice.id, "Shared", "shared", t0).await;
    let alone = db.team(alice.id, "Alone", "alone", t0).await;
    let bobs_team = db.team(bob.id, "Bobs", "bobs", t0).await;
    db.join(shared, &bob, Role::Member, alice.id, t0).await;
    db.join(bobs_team, &alice, Role::Admin, bob.id, t0).await;

    assert_eq!(
        db.store.owned_teams_with_members(alice.id).await.unwrap(),
        [shared]
    );
    assert_eq!(
        db.store.owned_teams_with_members(bob.id).await.unwrap(),
        [bobs_team]
    );
    // Teams that are gone do not count.
    db.store
        .delete_organization(
            bobs_team,
            t0,
            event(EventType::OrganizationUpdated, Some(bobs_team), None, t0),
            record(),
        )
        .await
        .unwrap();
    assert!(db
        .store
        .owned_teams_with_members(bob.id)
        .await
        .unwrap()
        .is_empty());

    let deleted = event(EventType::UserDeleted, None, Some(bob.id), t0);
    db.store
        .delete_user(bob.id, vec![deleted], record(), vec![])
        .await
        .unwrap();
    // Recorded before anything went: one row per live organization Bob belonged to (his
    // workspace and the team he was a member of; not his soft-deleted team).
    assert_eq!(db.events(EventType::UserDeleted).await, 2);
    for org in [bob.workspace, shared] {
        assert_eq!(
            db.count(&format!(
                "SELECT count(*) AS n FROM events WHERE event_type = '{}' \
                 AND organization_id = '{org}'",
                EventType::UserDeleted
            ))
            .await,
            1
        );
    }
    assert!(db.store.credentials_by_id(bob.id).await.unwrap().is_none());
    assert!(db
        .store
        .organization(bob.workspace)
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) AS n FROM organizations WHERE id = '{}'",
            bob.workspace
        ))
        .await,
        0
    );
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) AS n FROM memberships WHERE user_id = '{}'",
            bob.id
        ))
        .await,
        0
    );
    // The team Bob merely belonged to stays, without him.
    let team = db.store.organization(shared).await.unwrap().unwrap();
    assert_eq!(team.member_count, 1);
    assert!(db
        .store
        .owned_teams_with_members(alice.id)
        .await
        .unwrap()
        .is_empty());
    assert!(db
        .store
        .credentials_by_id(alice.id)
        .await
        .unwrap()
        .is_some());

    // Alice owns only teams nobody else belongs to now: they go with her.
    db.store
        .delete_user(alice.id, vec![], record(), vec![])
        .await
        .unwrap();
    assert!(db
        .store
        .credentials_by_id(alice.id)
        .await
        .unwrap()
        .is_none());
    for org in [alice.workspace, shared, alone] {
        assert_eq!(
            db.count(&format!(
                "SELECT count(*) AS n FROM organizations WHERE id = '{org}'"
            ))
            .await,
            0
        );
    }
    assert_eq!(db.count("SELECT count(*) AS n FROM memberships").await, 0);
}

/// An audit record, for the store calls that take one.
fn record() -> gatehouse_domain::model::AuditRecord {
    gatehouse_domain::model::AuditRecord::new(
        Uuid::now_v7(),
        OffsetDateTime::now_utc(),
        gatehouse_domain::model::AuditActor::System,
        gatehouse_domain::model::AuditAction::MemberRoleChanged,
        &gatehouse_domain::model::Origin::system(),
    )
}

fn directory_user(
    org: OrganizationId,
    user_name: &str,
    active: bool,
    at: OffsetDateTime,
) -> DirectoryUser {
    DirectoryUser {
        id: Uuid::now_v7().into(),
        organization_id: org,
        attributes: UserAttributes {
            user_name: DirectoryText::parse(user_name).unwrap(),
            external_id: Some(DirectoryText::parse("00u1").unwrap()),
            display_name: None,
            name: DirectoryName::default(),
            emails: vec![DirectoryEmail {
                value: DirectoryText::parse(user_name).unwrap(),
                kind: Some(DirectoryText::parse("work").unwrap()),
                primary: true,
            }],
            active,
        },
        created_at: at,
        updated_at: at,
    }
}

/// A mail as the domain seals it for the outbox (the bytes stand for its sealed form).
fn mail() -> gatehouse_domain::ports::SealedMail {
    gatehouse_domain::ports::SealedMail {
        id: Uuid::now_v7(),
        sealed: b"a sealed mail".to_vec(),
    }
}

fn directory_write(
    org: OrganizationId,
    at: OffsetDateTime,
    changes: Vec<DirectoryChange>,
    effects: Vec<MemberEffect>,
) -> DirectoryWrite {
    DirectoryWrite {
        organization_id: org,
        at,
        changes,
        effects,
        events: vec![event(EventType::MemberJoined, Some(org), None, at)],
        audit: vec![record()],
        mails: Vec::new(),
    }
}

#[on_both_backends]
async fn directory_writes_are_whole_and_stay_in_their_organization(db: Db) {
    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    let globex = db.team(alice.id, "Globex", "globex", t0).await;

    // Bob provisioned: the resource and his membership, together.
    let user = directory_user(acme, "bob@example.com", true, t0);
    let join = MemberEffect::Join {
        user_id: bob.id,
        account: None,
        role: Role::Member.into(),
    };
    assert!(db
        .store
        .write_directory(directory_write(
            acme,
            t0,
            vec![DirectoryChange::CreateUser(user.clone())],
            vec![join]
        ))
        .await
        .unwrap());
    assert_eq!(
        db.store
            .directory_users_after(acme, None, 500)
            .await
            .unwrap(),
        vec![user.clone()]
    );
    assert!(db
        .store
        .directory_users_after(globex, None, 500)
        .await
        .unwrap()
        .is_empty());
    assert!(db
        .store
        .directory_user(globex, user.id)
        .await
        .unwrap()
        .is_none());
    let membership = db.store.membership(bob.id, acme).await.unwrap().unwrap();
    assert_eq!(membership.role, Role::Member);

    // The same userName but for case: a conflict, and nothing of that write stays.
    let twin = directory_user(acme, "BOB@example.com", true, t0);
    let promote = MemberEffect::ChangeRole {
        user_id: bob.id,
        role: Role::Admin.into(),
    };
    let refused = db
        .store
        .write_directory(directory_write(
            acme,
            t0,
            vec![DirectoryChange::CreateUser(twin)],
            vec![promote],
        ))
        .await;
    assert!(matches!(refused, Err(StoreError::Conflict)), "{refused:?}");
    assert_eq!(
        db.store
            .membership(bob.id, acme)
            .await
            .unwrap()
            .unwrap()
            .role,
        Role::Member
    );

    // A group of Acme holds Acme's users only: one of Globex naming Bob writes nothing.
    let group = |org: OrganizationId, name: &str| DirectoryGroup {
        id: Uuid::now_v7().into(),
        organization_id: org,
        attributes: GroupAttributes {
            display_name: DirectoryText::parse(name).unwrap(),
            external_id: None,
            members: vec![user.id],
        },
        created_at: t0,
        updated_at: t0,
    };
    let admins = group(acme, "Admins");
    assert!(db
        .store
        .write_directory(directory_write(
            acme,
            t0,
            vec![DirectoryChange::CreateGroup(admins.clone())],
            vec![]
        ))
        .await
        .unwrap());
    assert_eq!(
        db.store.directory_group(acme, admins.id).await.unwrap(),
        Some(admins.clone())
    );
    assert_eq!(
        db.store.groups_of(acme, user.id).await.unwrap(),
        vec![DirectoryText::parse("Admins").unwrap()]
    );
    let stolen = group(globex, "Thieves");
    assert!(!db
        .store
        .write_directory(directory_write(
            globex,
            t0,
            vec![DirectoryChange::CreateGroup(stolen.clone())],
            vec![]
        ))
        .await
        .unwrap());
    assert!(db
        .store
        .directory_groups_after(
            globex,
            None,
            500,
            gatehouse_domain::ports::GroupMembers::Read
        )
        .await
        .unwrap()
        .is_empty());

    // The group-to-role map, resolved as written.
    let roles =
        GroupRoles::new([(DirectoryText::parse("Admins").unwrap(), Role::Admin.into())]).unwrap();
    assert!(db
        .store
        .write_directory(directory_write(
            acme,
            t0,
            vec![DirectoryChange::GroupRoles(roles.clone())],
            vec![]
        ))
        .await
        .unwrap());
    assert_eq!(db.store.group_roles(acme).await.unwrap(), roles);
    assert_eq!(
        db.store.group_roles(globex).await.unwrap(),
        GroupRoles::default()
    );

    // Deactivated: the membership and Bob's keys for Acme end with the same write.
    let key = db
        .store
        .create_api_key(
            NewApiKey {
                id: Uuid::now_v7().into(),
                name: ApiKeyName::parse("laptop").unwrap(),
                prefix: "ghk_bob".to_owned(),
                key_hash: TokenHash::of("bob's key"),
                organization_id: acme,
                holder: KeyHolder::User(bob.id),
                created_at: t0,
            },
            record(),
        )
        .await
        .unwrap();
    assert!(key.is_some());
    let mut inactive = user.clone();
    inactive.attributes.active = false;
    assert!(db
        .store
        .write_directory(directory_write(
            acme,
            t0,
            vec![DirectoryChange::ReplaceUser(inactive.clone())],
            vec![MemberEffect::Remove { user_id: bob.id }],
        ))
        .await
        .unwrap());
    assert!(db.store.membership(bob.id, acme).await.unwrap().is_none());
    assert!(db
        .store
        .use_api_key(&TokenHash::of("bob's key"), t0)
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        db.store.directory_user(acme, user.id).await.unwrap(),
        Some(inactive)
    );

    // Deleted: out of its groups too. Gone twice: nothing written.
    assert!(db
        .store
        .write_directory(directory_write(
            acme,
            t0,
            vec![DirectoryChange::DeleteUser(user.id)],
            vec![]
        ))
        .await
        .unwrap());
    assert!(db
        .store
        .directory_group(acme, admins.id)
        .await
        .unwrap()
        .unwrap()
        .attributes
        .members
        .is_empty());
    assert!(!db
        .store
        .write_directory(directory_write(
            acme,
            t0,
            vec![DirectoryChange::DeleteUser(user.id)],
            vec![]
        ))
        .await
        .unwrap());

    // Tokens: stored as hashes, used only while they exist, never another organization's.
    let token = ScimToken {
        id: Uuid::now_v7().into(),
        organization_id: acme,
        name: ScimTokenName::parse("Okta").unwrap(),
        prefix: "ghsc_abcdefg".to_owned(),
        created_by: alice.id,
        created_at: t0,
        last_used_at: None,
    };
    assert!(db
        .store
        .create_scim_token(token.clone(), TokenHash::of("ghsc_secret"), record())
        .await
        .unwrap());
    assert_eq!(
        db.store.scim_tokens(acme).await.unwrap(),
        vec![token.clone()]
    );
    assert!(db.store.scim_tokens(globex).await.unwrap().is_empty());
    let used = db
        .store
        .use_scim_token(&TokenHash::of("ghsc_secret"), t0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(used.token.id, token.id);
    assert_eq!(used.plan, Plan::Free);
    assert_eq!(
        db.store.scim_tokens(acme).await.unwrap()[0].last_used_at,
        Some(t0)
    );
    assert!(!db
        .store
        .revoke_scim_token(globex, token.id, record())
        .await
        .unwrap());
    assert!(db
        .store
        .revoke_scim_token(acme, token.id, record())
        .await
        .unwrap());
    assert!(db
        .store
        .use_scim_token(&TokenHash::of("ghsc_secret"), t0)
        .await
        .unwrap()
        .is_none());
}

/// Issue 49, point 9, where the data is: no write but a transfer ends or changes the owner's
/// membership, an account deletion re-checks the teams it owns in its transaction, an
/// invitation of an organization gone is accepted by nobody, a custom role deleted is given by
/// no write; and point 4: the SCIM tokens a write names end in it, each with its record.
#[on_both_backends]
async fn the_owner_stays_and_a_deleted_role_is_given_to_nobody(db: Db) {
    use gatehouse_domain::model::{
        custom_permissions, AssignedRole, AuditAction, CustomRole, RoleDescription, RoleKey,
        RoleName,
    };
    use gatehouse_domain::ports::{RoleDeletion, ScimTokenRevocation};

    let t0 = now();
    let alice = db.user("alice@example.com", "Alice", t0).await;
    let bob = db.user("bob@example.com", "Bob", t0).await;
    let acme = db.team(alice.id, "Acme", "acme", t0).await;
    db.join(acme, &bob, Role::Admin, alice.id, t0).await;

    // The owner's membership is neither ended nor changed: a conflict, nothing written.
    let removed = db
        .store
        .remove_member(
            acme,
            alice.id,
            event(EventType::MemberRemoved, Some(acme), Some(alice.id), t0),
            record(),
            vec![],
        )
        .await;
    assert!(matches!(removed, Err(StoreError::Conflict)), "{removed:?}");
    let changed = db
        .store
        .change_role(
            acme,
            alice.id,
            Role::Member.into(),
            t0,
            event(EventType::MemberRoleChanged, Some(acme), None, t0),
            record(),
            vec![],
        )
        .await;
    assert!(matches!(changed, Err(StoreError::Conflict)), "{changed:?}");
    for effect in [
        MemberEffect::Remove { user_id: alice.id },
        MemberEffect::ChangeRole {
            user_id: alice.id,
            role: Role::Member.into(),
        },
    ] {
        let write = directory_write(acme, t0, vec![], vec![effect]);
        assert!(!db.store.write_directory(write).await.unwrap());
    }
    assert_eq!(
        db.store.member(acme, alice.id).await.unwrap().unwrap().role,
        Role::Owner
    );
    assert_eq!(db.events(EventType::MemberRemoved).await, 0);
    assert_eq!(db.events(EventType::MemberRoleChanged).await, 0);
    // A member who is not there is still `false`, as before.
    let carol = db.user("carol@example.com", "Carol", t0).await;
    assert!(!db
        .store
        .remove_member(
            acme,
            carol.id,
            event(EventType::MemberRemoved, Some(acme), Some(carol.id), t0),
            record(),
            vec![],
        )
        .await
        .unwrap());

    // Deleting the account of an owner whose team has another member is refused in the
    // transaction itself (whatever the use case read before).
    let deleted = db
        .store
        .delete_user(alice.id, vec![], record(), vec![])
        .await;
    assert!(matches!(deleted, Err(StoreError::Conflict)), "{deleted:?}");
    assert!(db.store.organization(acme).await.unwrap().is_some());
    assert!(db.store.member(acme, alice.id).await.unwrap().is_some());

    // The owner of a team with only an invitation deletes their account: the team goes, and
    // the invitation is accepted by nobody.
    let lonely = db.team(carol.id, "Lonely", "lonely", t0).await;
    let dave = db.user("dave@example.com", "Dave", t0).await;
    let (invitation, _) = db
        .invite(lonely, "dave@example.com", Role::Member, carol.id, t0)
        .await
        .unwrap();
    db.store
        .delete_user(carol.id, vec![], record(), vec![])
        .await
        .unwrap();
    assert!(!db.accept(invitation, dave.id, lonely, t0).await.unwrap());
    assert!(db.store.member(lonely, dave.id).await.unwrap().is_none());

    // A custom role deleted before it is given: each grant finds it gone and writes nothing.
    let key = RoleKey::parse("auditor").unwrap();
    let permissions = custom_permissions(["organization.read"]).unwrap();
    let role = CustomRole {
        organization_id: acme,
        key: key.clone(),
        name: RoleName::parse("Auditor").unwrap(),
        description: RoleDescription::parse("reads").unwrap(),
        permissions,
        created_at: t0,
        updated_at: t0,
    };
    db.store
        .create_role(
            role.clone(),
            event(EventType::RoleCreated, Some(acme), None, t0),
            record(),
        )
        .await
        .unwrap();
    let auditor = AssignedRole::of(&role);
    assert!(matches!(
        db.store
            .delete_role(
                acme,
                &key,
                event(EventType::RoleDeleted, Some(acme), None, t0),
                record()
            )
            .await
            .unwrap(),
        RoleDeletion::Deleted
    ));
    let given = db
        .store
        .change_role(
            acme,
            bob.id,
            auditor.clone(),
            t0,
            event(EventType::MemberRoleChanged, Some(acme), None, t0),
            record(),
            vec![],
        )
        .await;
    assert!(matches!(given, Err(StoreError::Gone)), "{given:?}");
    let invited = db
        .store
        .create_invitation(
            NewInvitation {
                id: InvitationId::from_uuid(Uuid::now_v7()),
                organization_id: acme,
                email: Email::parse("erin@example.com").unwrap(),
                role: InvitableRole::new(auditor.clone()).unwrap(),
                token_hash: TokenHash::of("erin"),
                invited_by: alice.id,
                invited_at: t0,
                expires_at: NewInvitation::expiry(t0),
                open: OpenInvitation::Kept,
            },
            event(EventType::MemberInvited, Some(acme), None, t0),
            record(),
            mail(),
        )
        .await;
    assert!(matches!(invited, Err(StoreError::Gone)), "{invited:?}");
    let account = ServiceAccount {
        id: Uuid::now_v7().into(),
        organization_id: acme,
        name: ServiceAccountName::parse("Exporter").unwrap(),
        role: auditor.clone(),
        created_by: alice.id,
        created_at: t0,
        updated_at: t0,
    };
    let created = db
        .store
        .create_service_account(
            account,
            event(EventType::ServiceAccountCreated, Some(acme), None, t0),
            record(),
        )
        .await;
    assert!(matches!(created, Err(StoreError::Gone)), "{created:?}");
    let write = directory_write(
        acme,
        t0,
        vec![],
        vec![MemberEffect::ChangeRole {
            user_id: bob.id,
            role: auditor,
        }],
    );
    assert!(!db.store.write_directory(write).await.unwrap());
    assert_eq!(
        db.store.member(acme, bob.id).await.unwrap().unwrap().role,
        Role::Admin
    );
    assert_eq!(db.rows_of("service_accounts", acme).await, 0);

    // Bob's SCIM token ends in the write that makes him a member, with its record; a second
    // revocation of it finds nothing and records nothing.
    let token = ScimToken {
        id: Uuid::now_v7().into(),
        organization_id: acme,
        name: ScimTokenName::parse("Okta").unwrap(),
        prefix: "ghsc_bobbobb".to_owned(),
        created_by: bob.id,
        created_at: t0,
        last_used_at: None,
    };
    assert!(db
        .store
        .create_scim_token(token.clone(), TokenHash::of("ghsc_bob"), record())
        .await
        .unwrap());
    let revocation = || ScimTokenRevocation {
        token_id: token.id,
        audit: gatehouse_domain::model::AuditRecord::new(
            Uuid::now_v7(),
            t0,
            gatehouse_domain::model::AuditActor::System,
            AuditAction::ScimTokenRevoked,
            &gatehouse_domain::model::Origin::system(),
        )
        .in_organization(acme),
    };
    assert!(db
        .store
        .change_role(
            acme,
            bob.id,
            Role::Member.into(),
            t0,
            event(EventType::MemberRoleChanged, Some(acme), None, t0),
            record(),
            vec![revocation()],
        )
        .await
        .unwrap());
    assert!(db.store.scim_tokens(acme).await.unwrap().is_empty());
    assert!(db
        .store
        .remove_member(
            acme,
            bob.id,
            event(EventType::MemberRemoved, Some(acme), Some(bob.id), t0),
            record(),
            vec![revocation()],
        )
        .await
        .unwrap());
    assert_eq!(
        db.count("SELECT count(*) AS n FROM audit_log WHERE action = 'scim_token.revoked'")
            .await,
        1
    );
}
