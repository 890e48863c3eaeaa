//! Fixtures for the contract tests: a database per test on either backend, domain values
//! built with the domain's own constructors, and raw reads of what the store wrote.

use std::sync::Arc;

use diesel::{sql_types::Text, sqlite::SqliteConnection, QueryableByName};
use diesel_async::{
    sync_connection_wrapper::SyncConnectionWrapper, AsyncConnection, AsyncPgConnection, RunQueryDsl,
};
use gatehouse_domain::{
    model::{
        Amr, ApiKeyName, Application, ApplicationId, ApplicationName, AuditAction, AuditActor,
        AuditRecord, ClientId, Email, EventId, EventType, FullName, KeyHolder, NewApiKey,
        NewApplication, NewEvent, NewOrganization, NewSession, NewUser, OrganizationId,
        OrganizationName, OrganizationType, Origin, PasswordHash, Plan, RedirectUri, RedirectUris,
        SecretToken, Slug, TokenHash, TokenKind, UserId,
    },
    ports::NewAccount,
};
use gatehouse_store::{Backend, Store, StoreOptions};
use gatehouse_testkit::TestDatabase;
use serde_json::json;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// `#[on_both_backends(worker_threads = 4)]` over `async fn name(db: Db)` (or `EmptyDatabase`):
/// the test runs as `name::postgres` and `name::sqlite`, each on a fresh database.
pub(crate) use gatehouse_test_macros::on_both_backends;

/// What keeps a test's database alive: dropping it drops the database.
enum Keep {
    Postgres(#[allow(dead_code)] TestDatabase),
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
}

/// A fresh database with no tables: a new PostgreSQL database, or a SQLite file in a new
/// temporary directory (not yet created).
pub struct EmptyDatabase {
    pub backend: Backend,
    pub url: String,
    _keep: Keep,
}

impl EmptyDatabase {
    /// On a fresh PostgreSQL database.
    pub async fn postgres() -> Self {
        Self::new(Backend::Postgres).await
    }

    /// On a fresh SQLite file.
    pub async fn sqlite() -> Self {
        Self::new(Backend::Sqlite).await
    }

    pub async fn new(backend: Backend) -> Self {
        let (url, keep) = match backend {
            Backend::Postgres => {
                let db = TestDatabase::create().await;
                (db.url().to_owned(), Keep::Postgres(db))
            }
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                (gatehouse_testkit::sqlite_url(&dir), Keep::Sqlite(dir))
            }
        };
        assert_eq!(gatehouse_store::backend_of(&url).unwrap(), backend);
        Self {
            backend,
            url,
            _keep: keep,
        }
    }

    /// The versions of the backend's migrations, oldest first, as diesel names them: the
    /// directory name's date and number, digits only (`2026-11-22-000001_accounts` ->
    /// `20261122000001`).
    pub fn migration_versions(&self) -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../migrations")
            .join(self.backend.as_str());
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap())
            .filter(|entry| entry.path().join("up.sql").is_file())
            .map(|entry| {
                let name = entry.file_name().into_string().unwrap();
                let (version, _) = name.split_once('_').unwrap_or((&name, ""));
                version.replace('-', "")
            })
            .collect();
        names.sort();
        names
    }

    /// The tables the migrations made (diesel's own bookkeeping table aside), by name.
    pub async fn table_names(&self) -> Vec<String> {
        let sql = match self.backend {
            Backend::Postgres => {
                "SELECT table_name::text AS value FROM information_schema.tables \
                 WHERE table_schema = 'public' AND table_name <> '__diesel_schema_migrations' \
                 ORDER BY 1"
            }
            Backend::Sqlite => {
                "SELECT name AS value FROM sqlite_master \
                 WHERE type = 'table' AND name <> '__diesel_schema_migrations' \
                 AND name NOT LIKE 'sqlite%' ORDER BY 1"
            }
        };
        self.strings(sql).await
    }

    /// Runs a query whose only column is a text `value`, on a connection of its own.
    pub async fn strings(&self, sql: &str) -> Vec<String> {
        #[derive(QueryableByName)]
        struct Row {
            #[diesel(sql_type = Text)]
            value: String,
        }
        let rows: Vec<Row> = match self.backend {
            Backend::Postgres => {
                let mut conn = AsyncPgConnection::establish(&self.url).await.unwrap();
                diesel::sql_query(sql).load(&mut conn).await.unwrap()
            }
            Backend::Sqlite => {
                let mut conn = self.sqlite_connection().await;
                diesel::sql_query(sql).load(&mut conn).await.unwrap()
            }
        };
        rows.into_iter().map(|row| row.value).collect()
    }

    /// SQLite's plan for the query (`EXPLAIN QUERY PLAN`): each step's `detail`, in order.
    pub async fn sqlite_plan(&self, sql: &str) -> Vec<String> {
        #[derive(QueryableByName)]
        struct Step {
            #[diesel(sql_type = Text)]
            detail: String,
        }
        assert_eq!(
            self.backend,
            Backend::Sqlite,
            "a SQLite plan of a SQLite database"
        );
        let mut conn = self.sqlite_connection().await;
        let steps: Vec<Step> = diesel::sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
            .load(&mut conn)
            .await
            .unwrap();
        steps.into_iter().map(|step| step.detail).collect()
    }

    /// Runs a query whose only column is an integer `n` and returns the first row's.
    pub async fn count(&self, sql: &str) -> i64 {
        #[derive(QueryableByName)]
        struct Row {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let rows: Vec<Row> = match self.backend {
            Backend::Postgres => {
                let mut conn = AsyncPgConnection::establish(&self.url).await.unwrap();
                diesel::sql_query(sql).load(&mut conn).await.unwrap()
            }
            Backend::Sqlite => {
                let mut conn = self.sqlite_connection().await;
                diesel::sql_query(sql).load(&mut conn).await.unwrap()
            }
        };
        rows.into_iter().next().expect("one row").n
    }

    async fn sqlite_connection(&self) -> SyncConnectionWrapper<SqliteConnection> {
        let path = self.url.strip_prefix("sqlite://").unwrap();
        let mut conn = SyncConnectionWrapper::<SqliteConnection>::establish(path)
            .await
            .unwrap();
        diesel::sql_query("PRAGMA busy_timeout = 5000")
            .execute(&mut conn)
            .await
            .unwrap();
        conn
    }
}

/// A migrated database and the store opened on it.
pub struct Db {
    pub store: Arc<dyn Store>,
    pub backend: Backend,
    /// Declared after `store`, so that the store's pool closes before the database goes.
    database: EmptyDatabase,
}

impl Db {
    /// On a fresh PostgreSQL database.
    pub async fn postgres() -> Self {
        Self::new(Backend::Postgres).await
    }

    /// On a fresh SQLite file.
    pub async fn sqlite() -> Self {
        Self::new(Backend::Sqlite).await
    }

    pub async fn new(backend: Backend) -> Self {
        let database = EmptyDatabase::new(backend).await;
        let store = gatehouse_store::open(&database.url, &StoreOptions::default())
            .await
            .unwrap();
        Self {
            store,
            backend,
            database,
        }
    }

    /// The database's URL, for a connection of the test's own.
    pub fn url(&self) -> &str {
        &self.database.url
    }

    /// Registers an account for the email and returns the user's id.
    pub async fn registered(&self, email: &str) -> UserId {
        let new = account(email, "Someone");
        let id = new.user.id;
        self.store.create_account(new, signed_in()).await.unwrap();
        id
    }

    /// Creates a team owned by `owner` (with the event registration records), then moves it to
    /// `plan` as the operator's `set-plan` does (with `organization.updated`).
    pub async fn team(&self, owner: UserId, slug: &str, plan: Plan) -> OrganizationId {
        let id = OrganizationId::from_uuid(Uuid::now_v7());
        self.store
            .create_organization(
                NewOrganization {
                    id,
                    name: OrganizationName::parse("A Team").unwrap(),
                    slug: Slug::parse(slug).unwrap(),
                    slug_generated: false,
                    kind: OrganizationType::Team,
                    plan: Plan::Free,
                    created_at: now(),
                },
                owner,
                vec![event(EventType::OrganizationCreated, Some(id), Some(owner))],
                signed_in(),
            )
            .await
            .unwrap();
        if plan != Plan::Free {
            let changed = event(EventType::OrganizationUpdated, Some(id), None);
            assert!(self
                .store
                .set_plan(id, plan, now(), changed, signed_in())
                .await
                .unwrap());
        }
        id
    }

    /// See [`EmptyDatabase::sqlite_plan`].
    pub async fn sqlite_plan(&self, sql: &str) -> Vec<String> {
        self.database.sqlite_plan(sql).await
    }

    /// See [`EmptyDatabase::count`].
    pub async fn count(&self, sql: &str) -> i64 {
        self.database.count(sql).await
    }

    /// See [`EmptyDatabase::strings`].
    pub async fn strings(&self, sql: &str) -> Vec<String> {
        self.database.strings(sql).await
    }
}

/// The time, to the microsecond: what PostgreSQL keeps, so that round trips compare equal.
pub fn now() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.nanosecond() / 1_000 * 1_000)
        .expect("a whole number of microseconds is a valid nanosecond")
}

/// What registration hands the store: the user, the personal workspace (with a generated slug,
/// as the domain makes it) and the two events.
pub fn account(email: &str, full_name: &str) -> NewAccount {
    let at = now();
    let user = NewUser {
        id: Uuid::now_v7().into(),
        email: Email::parse(email).unwrap(),
        full_name: FullName::parse(full_name).unwrap(),
        password_hash: Some(PasswordHash::from_phc("$argon2id$fake".into())),
        email_verified: false,
        created_at: at,
    };
    let name = OrganizationName::personal_workspace_of(user.full_name.as_ref());
    let workspace = NewOrganization {
        id: Uuid::now_v7().into(),
        slug: Slug::generate_from(name.as_ref()),
        slug_generated: true,
        name,
        kind: OrganizationType::Personal,
        plan: Plan::Free,
        created_at: at,
    };
    let events = vec![
        event(EventType::UserCreated, None, Some(user.id)),
        NewEvent {
            data: json!({ "id": workspace.id, "slug": workspace.slug }),
            ..event(
                EventType::OrganizationCreated,
                Some(workspace.id),
                Some(user.id),
            )
        },
    ];
    NewAccount {
        user,
        workspace,
        events,
    }
}

pub fn event(
    event_type: EventType,
    organization_id: Option<OrganizationId>,
    user_id: Option<UserId>,
) -> NewEvent {
    NewEvent {
        id: EventId::from(Uuid::now_v7()),
        event_type,
        organization_id,
        user_id,
        data: json!({ "user_id": user_id }),
        occurred_at: now(),
    }
}

/// An audit record of the user's, now, from a test client.
pub fn audited(action: AuditAction, user_id: UserId) -> AuditRecord {
    AuditRecord::new(
        Uuid::now_v7(),
        now(),
        AuditActor::User(user_id),
        action,
        &Origin::new([127, 0, 0, 1].into(), Some("store-test"), Some("req-store")),
    )
}

/// A mail as the domain seals it for the outbox (the bytes stand for its sealed form).
pub fn mail() -> gatehouse_domain::ports::SealedMail {
    gatehouse_domain::ports::SealedMail {
        id: Uuid::now_v7(),
        sealed: b"a sealed mail".to_vec(),
    }
}

/// The audit record of a sign-in, for the store calls that take one.
pub fn signed_in() -> AuditRecord {
    audited(
        AuditAction::LoginSucceeded,
        UserId::from_uuid(Uuid::now_v7()),
    )
}

/// A new session of the user and the hash of its (fresh) refresh token.
pub fn session(
    user_id: UserId,
    created_at: OffsetDateTime,
    ttl: Duration,
) -> (NewSession, TokenHash) {
    let token = secret(TokenKind::Refresh);
    let hash = token.hash();
    let session = NewSession {
        id: Uuid::now_v7().into(),
        user_id,
        refresh_token_hash: hash.clone(),
        created_at,
        expires_at: created_at + ttl,
        grant: None,
        amr: Amr::password(),
        sso_organization_id: None,
        organization_id: None,
        password_checked: None,
    };
    (session, hash)
}

/// A new API key and the hash of its (fresh) secret.
pub fn api_key(
    user_id: UserId,
    organization_id: OrganizationId,
    name: &str,
    created_at: OffsetDateTime,
) -> (NewApiKey, TokenHash) {
    let token = secret(TokenKind::ApiKey);
    let hash = token.hash();
    let key = NewApiKey {
        id: Uuid::now_v7().into(),
        name: ApiKeyName::parse(name).unwrap(),
        prefix: token.display_prefix(),
        key_hash: hash.clone(),
        organization_id,
        holder: KeyHolder::User(user_id),
        created_at,
    };
    (key, hash)
}

fn secret(kind: TokenKind) -> SecretToken {
    SecretToken::new(format!("{}{}", kind.prefix(), Uuid::new_v4().simple()))
}

/// An active application of the organization, named Billing, with one redirect URI
/// (`https://app.example.com/cb`) and no PKCE requirement.
pub async fn application(db: &Db, org: OrganizationId) -> Application {
    let app = Application {
        id: ApplicationId::from_uuid(Uuid::now_v7()),
        organization_id: org,
        name: ApplicationName::parse("Billing").unwrap(),
        client_id: ClientId::generate(Uuid::new_v4()),
        redirect_uris: RedirectUris::new(vec![
            RedirectUri::parse("https://app.example.com/cb").unwrap()
        ])
        .unwrap(),
        is_active: true,
        require_pkce: false,
        created_at: now(),
        updated_at: now(),
    };
    let new = NewApplication {
        application: app.clone(),
        secret_hash: TokenHash::of("ghcs_x"),
    };
    assert!(db
        .store
        .create_application(
            new,
            event(EventType::ApplicationCreated, Some(org), None),
            signed_in()
        )
        .await
        .unwrap());
    app
}
