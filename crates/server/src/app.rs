//! Wiring: configuration in, a running HTTP server out. `main` and the tests both start
//! Gatehouse through [`Application::build`].

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use actix_web::{dev::Server, middleware::from_fn, web, App, HttpServer};
use gatehouse_api::{
    bounded_body, bounded_head, catch_panics, configure, configure_metrics_listener, json_errors,
    request_id, AppState, PanicCount,
};
use gatehouse_delivery::{HttpsSender, SenderConfig};
use gatehouse_dns::HickoryDns;
use gatehouse_domain::{
    model::{Organization, OrganizationId, Plan},
    ports::{
        DnsTxt, PeriodicTask, Ports, PurgePace, RateLimiter, SignInAttempts, StoreError,
        TokenSigner,
    },
    service::{
        AuthSettings, DeliveryEngine, DeliverySettings, MailCourier, OrganizationPorts,
        OrganizationService, PurgeSlice,
    },
};
use gatehouse_store::{Store, StoreOptions};
use tokio::task::JoinHandle;

use gatehouse_crypto::{
    rotate_signing_key, Argon2Hasher, KeyRing, OsRandom, RfcTotp, SecretBox, SystemClock,
    ZxcvbnJudge,
};
use gatehouse_mail::mailer_from_settings;
use gatehouse_metrics::PrometheusMetrics;
use gatehouse_ratelimit::{
    MemoryHeavyLanes, MemoryRateLimiter, MemorySignInAttempts, RedisRateLimiter,
    RedisSignInAttempts,
};
use gatehouse_saml::XmlSecSaml;
use gatehouse_webauthn::WebauthnRs;
use gatehouse_worker::{self as worker, WorkerSettings, Workers};

use crate::{config::Config, connections::ConnectionLimit, secret_key};

/// How often a server re-reads the signing keys, to pick up a rotation done elsewhere.
const KEY_RELOAD_INTERVAL: Duration = Duration::from_secs(60);

/// A built, bound, not yet running server.
pub struct Application {
    server: Server,
    address: SocketAddr,
    public_url: String,
    background: Vec<JoinHandle<()>>,
    /// The webhook workers, unless `GATEHOUSE_WORKER=false`.
    workers: Option<Workers>,
    /// The `GATEHOUSE_METRICS_BIND` listener, when one is configured.
    metrics: Option<(Server, SocketAddr)>,
    /// Set when told to stop: `/readyz` answers `503`.
    stopping: Arc<AtomicBool>,
    /// `GATEHOUSE_DRAIN_SECS` and `GATEHOUSE_SHUTDOWN_TIMEOUT_SECS`.
    drain: Duration,
    shutdown_timeout: Duration,
}

/// Waits for SIGTERM (what orchestrators and `scripts/cluster` send) or SIGINT (Ctrl-C).
async fn stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops this");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// How often the retention purges run (deleted organizations, the audit log, webhook history).
const PURGE_INTERVAL: Duration = Duration::from_secs(3600);
/// The purges' first run waits this long after start: a replica that starts (or restarts in a
/// loop) spends its first minute serving, never purging.
const PURGE_FIRST_AFTER: Duration = Duration::from_secs(60);
/// The pause between two slices of a purge: the writes that queued behind a slice go first.
const PURGE_PAUSE: Duration = Duration::from_millis(10);

/// Runs a purge's slices until one is not full, each sized by how long the last took
/// ([`PurgePace`]), pausing between two; the rows it deleted.
async fn in_slices<F, Fut>(mut slice: F) -> Result<u64, StoreError>
where
    F: FnMut(PurgePace) -> Fut,
    Fut: std::future::Future<Output = Result<PurgeSlice, StoreError>>,
{
    let mut deleted = 0;
    let mut pace = PurgePace::FIRST;
    loop {
        let started = std::time::Instant::now();
        let PurgeSlice { deleted: n, more } = slice(pace).await?;
        pace = pace.after(started.elapsed());
        deleted += n;
        if !more {
            return Ok(deleted);
        }
        tokio::time::sleep(PURGE_PAUSE).await;
    }
}
/// How often password hashing's idle working areas are looked at, and how long unused before
/// they are given back (19 MiB each; see `Argon2Hasher`).
const HASH_MEMORY_CHECK_INTERVAL: Duration = Duration::from_secs(1);
const HASH_MEMORY_IDLE: Duration = Duration::from_secs(3);

/// The store, opened as `serve` and the CLI commands need it.
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let options = StoreOptions {
        max_connections: config.db_pool_size,
        migrate: true,
        statement_timeout: Some(config.statement_timeout),
    };
    Ok(gatehouse_store::open(&config.database_url, &options).await?)
}

/// Every port, wired to its adapter.
pub async fn ports(
    store: Arc<dyn Store>,
    config: &Config,
    clock: Arc<SystemClock>,
    signer: Arc<dyn TokenSigner>,
    cipher: SecretBox,
    public_url: &str,
    hasher: Arc<Argon2Hasher>,
) -> anyhow::Result<Ports> {
    let sender = HttpsSender::new(SenderConfig {
        timeout: config.webhook_timeout,
        ca_file: config.webhook_ca_file.clone(),
        allow_private_targets: config.webhook_allow_private_targets,
        ..SenderConfig::default()
    })?;
    let (rate_limiter, sign_in_attempts): (Arc<dyn RateLimiter>, Arc<dyn SignInAttempts>) =
        match &config.redis_url {
            Some(url) => (
                Arc::new(RedisRateLimiter::connect(&url.0).await?),
                Arc::new(RedisSignInAttempts::connect(&url.0).await?),
            ),
            None => (
                Arc::new(MemoryRateLimiter::default()),
                Arc::new(MemorySignInAttempts::default()),
            ),
        };
    let webauthn = WebauthnRs::for_public_url(public_url);
    if let Some(why) = webauthn.configuration_error() {
        tracing::warn!("security keys (WebAuthn) are unavailable: {why}");
    }
    if config.smtp_url.is_none() && config.mail_dir.is_none() {
        tracing::warn!(
            "no GATEHOUSE_SMTP_URL or GATEHOUSE_MAIL_DIR: mail (invitation links included) goes to the log"
        );
    }
    let dns: Arc<dyn DnsTxt> = Arc::new(match config.dns_resolver {
        Some(address) => HickoryDns::at(address)?,
        None => HickoryDns::system()?,
    });
    let mailer = mailer_from_settings(
        config.smtp_url.as_ref().map(|u| u.0.as_str()),
        config.mail_dir.as_deref(),
        &config.mail_from,
    )?;
    Ok(Ports {
        accounts: store.clone(),
        sessions: store.clone(),
        account_tokens: store.clone(),
        api_keys: store.clone(),
        memberships: store.clone(),
        service_accounts: store.clone(),
        roles: store.clone(),
        organizations: store.clone(),
        members: store.clone(),
        policies: store.clone(),
        branding: store.clone(),
        sso: store.clone(),
        saml: store.clone(),
        saml_protocol: Arc::new(XmlSecSaml::with_concurrency(config.saml_concurrency)),
        domains: store.clone(),
        directory: store.clone(),
        dns,
        mfa: store.clone(),
        totp: Arc::new(RfcTotp),
        webauthn: Arc::new(webauthn),
        applications: store.clone(),
        authorization_codes: store.clone(),
        webhooks: store.clone(),
        delivery_queue: store.clone(),
        operations: store.clone(),
        audit: store.clone(),
        mail_queue: store.clone(),
        health: store,
        clock,
        random: Arc::new(OsRandom),
        hasher,
        judge: Arc::new(ZxcvbnJudge::new(config.password_strength_concurrency)),
        signer,
        mailer,
        rate_limiter,
        heavy: Arc::new(MemoryHeavyLanes::default()),
        sign_in_attempts,
        cipher: Arc::new(cipher),
        sender: Arc::new(sender),
        metrics: Arc::new(PrometheusMetrics::new()?),
    })
}

/// `gatehouse keys rotate`: adds a new signing key and returns its id; the old one stays in
/// the key set until the tokens it signed have expired.
pub async fn rotate_keys(config: &Config) -> anyhow::Result<String> {
    let secret = secret_key::resolve(config)?;
    let store = open_store(config).await?;
    Ok(rotate_signing_key(store.as_ref(), &secret.secret_box(), &SystemClock).await?)
}

/// `gatehouse orgs set-plan`: moves a live organization to another plan, as an operator does.
pub async fn set_plan(
    config: &Config,
    id: OrganizationId,
    plan: Plan,
) -> anyhow::Result<Organization> {
    // Only what moving a plan uses: no signing keys, no mailer, no secret key.
    let organizations = OrganizationService::new(OrganizationPorts {
        organizations: open_store(config).await?,
        clock: Arc::new(SystemClock),
        random: Arc::new(OsRandom),
    });
    organizations
        .set_plan(id, plan)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
}

impl Application {
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let secret = secret_key::resolve(&config)?;
        let store = open_store(&config).await?;
        let listener = std::net::TcpListener::bind(config.bind)?;
        let address = listener.local_addr()?;
        let public_url = config.public_url_for(address);
        let settings = AuthSettings::new(public_url.clone());

        let clock = Arc::new(SystemClock);
        // The hasher computes its one start-up hash on the blocking pool while the key ring
        // loads (or, on a fresh database, generates the first RSA key).
        let hash_concurrency = config.password_hash_concurrency;
        let hasher = tokio::task::spawn_blocking(move || {
            Argon2Hasher::owasp_with_concurrency(hash_concurrency)
        });
        let keys = Arc::new(
            KeyRing::load_or_create(
                store.clone(),
                secret.secret_box(),
                clock.clone(),
                public_url.clone(),
                settings.access_token_ttl,
            )
            .await?,
        );
        let hasher = Arc::new(hasher.await??);
        let ports = ports(
            store.clone(),
            &config,
            clock,
            keys.clone(),
            secret.secret_box(),
            &public_url,
            hasher.clone(),
        )
        .await?;
        let engine = DeliveryEngine::new(
            (&ports).into(),
            DeliverySettings {
                schedule: config.webhook_retry_schedule.clone(),
                ..DeliverySettings::default()
            },
        );
        let courier = MailCourier::new((&ports).into());
        let mut state = AppState::new(
            ports,
            settings,
            config.rate_limits,
            config.trusted_proxies.clone(),
            config.control_token.clone(),
            config.webhook_allow_private_targets,
        );
        state.body_timeout = config.body_timeout;
        let stopping = state.stopping.clone();
        let state = web::Data::new(state);
        crate::connections::raise_open_file_limit();
        let connections = ConnectionLimit::new(
            config.max_connections_per_ip,
            config.trusted_proxies.clone(),
        );
        let purge_organizations = state.organizations.clone();
        let purge_audit = state.control.clone();
        let audit_retention_days = config.audit_retention_days;
        let event_retention_days = config.event_retention_days;
        let state_for_metrics = state.clone();
        let delivery_metrics = state.metrics.clone();
        let panics = web::Data::new(PanicCount::default());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .app_data(panics.clone())
                .wrap(from_fn(bounded_body))
                .wrap(from_fn(bounded_head))
                .wrap(from_fn(json_errors))
                .wrap(from_fn(catch_panics))
                .wrap(from_fn(request_id))
                .configure(configure)
        })
        .on_connect(move |connection, data| connections.on_connect(connection, data))
        // Signals are `run_until_stopped`'s: it drains before it stops the server.
        .disable_signals()
        .shutdown_timeout(config.shutdown_timeout.as_secs())
        .listen(listener)?
        .run();
        let metrics = match config.metrics_bind {
            None => None,
            Some(bind) => {
                let listener = std::net::TcpListener::bind(bind)?;
                let address = listener.local_addr()?;
                let state = state_for_metrics;
                let server = HttpServer::new(move || {
                    App::new()
                        .app_data(state.clone())
                        .configure(configure_metrics_listener)
                })
                .workers(1)
                .disable_signals()
                .listen(listener)?
                .run();
                tracing::info!(%address, "metrics are served at /metrics");
                Some((server, address))
            }
        };

        let reload = tokio::spawn(async move {
            let mut every = tokio::time::interval(KEY_RELOAD_INTERVAL);
            every.tick().await;
            loop {
                every.tick().await;
                if let Err(error) = keys.reload().await {
                    tracing::warn!(%error, "reloading signing keys failed; keeping the current ones");
                }
            }
        });
        // Password hashing's working areas go back to the system a few seconds after the last
        // login that used them.
        let release_hash_memory = tokio::spawn(async move {
            let mut every = tokio::time::interval(HASH_MEMORY_CHECK_INTERVAL);
            loop {
                every.tick().await;
                hasher.release_idle(HASH_MEMORY_IDLE);
            }
        });
        let purge = tokio::spawn(async move {
            let first = tokio::time::Instant::now() + PURGE_FIRST_AFTER;
            let mut every = tokio::time::interval_at(first, PURGE_INTERVAL);
            loop {
                every.tick().await;
                // Once per cluster each hour: the replica whose claim lands first purges.
                match purge_audit
                    .claim_periodic(PeriodicTask::Purges, PURGE_INTERVAL)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(error) => {
                        tracing::warn!(%error, "claiming the hourly purges failed");
                        continue;
                    }
                }
                match in_slices(|pace| purge_organizations.purge_deleted(pace)).await {
                    Ok(0) => {}
                    Ok(count) => tracing::info!(count, "purged deleted organizations (rows)"),
                    Err(error) => tracing::warn!(%error, "purging deleted organizations failed"),
                }
                match in_slices(|pace| purge_audit.purge_audit(audit_retention_days, pace)).await {
                    Ok(0) => {}
                    Ok(count) => tracing::info!(count, "purged audit records past their retention"),
                    Err(error) => tracing::warn!(%error, "purging the audit log failed"),
                }
                match in_slices(|pace| {
                    purge_audit.purge_webhook_history(event_retention_days, pace)
                })
                .await
                {
                    Ok(0) => {}
                    Ok(count) => tracing::info!(
                        count,
                        "purged events and finished deliveries past their retention"
                    ),
                    Err(error) => tracing::warn!(%error, "purging webhook history failed"),
                }
            }
        });
        tracing::info!(
            %address,
            %public_url,
            backend = store.backend().as_str(),
            "gatehouse is listening"
        );
        let workers = config.worker.then(|| {
            worker::spawn(
                engine,
                courier,
                WorkerSettings::new(config.webhook_timeout, config.webhook_endpoint_concurrency)
                    .per_organization(config.webhook_slots_per_organization)
                    .poll_interval(config.webhook_poll_interval),
                delivery_metrics,
                store.outbox_committed(),
                store.mail_queued(),
            )
        });
        if workers.is_none() {
            tracing::info!(
                "GATEHOUSE_WORKER=false: this replica delivers no webhooks and sends no mail"
            );
        }
        Ok(Self {
            server,
            address,
            public_url,
            metrics,
            background: vec![reload, purge, release_hash_memory],
            workers,
            stopping,
            drain: config.drain,
            shutdown_timeout: config.shutdown_timeout,
        })
    }

    /// The address actually bound (the port is the OS's pick when configured as 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    /// The address of the `GATEHOUSE_METRICS_BIND` listener, when there is one.
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|(_, address)| *address)
    }

    /// Serves until the process is told to stop (SIGTERM, SIGINT), then drains: `/readyz`
    /// answers `503` for `GATEHOUSE_DRAIN_SECS` while requests are still served; then no new
    /// connection is accepted, and the requests accepted and the deliveries leased are
    /// finished (for up to `GATEHOUSE_SHUTDOWN_TIMEOUT_SECS` each; unsent deliveries are then
    /// given back) before it returns.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let handles = (
            self.server.handle(),
            self.metrics.as_ref().map(|(server, _)| server.handle()),
        );
        let (stopping, drain) = (self.stopping.clone(), self.drain);
        let told = tokio::spawn(async move {
            stop_signal().await;
            stopping.store(true, Ordering::Relaxed);
            tracing::info!(
                drain_secs = drain.as_secs(),
                "told to stop: not ready; draining"
            );
            tokio::time::sleep(drain).await;
            let (server, metrics) = handles;
            // No new connections; the requests under way finish (the shutdown timeout).
            server.stop(true).await;
            if let Some(metrics) = metrics {
                metrics.stop(true).await;
            }
        });
        let result = match self.metrics {
            Some((metrics, _)) => tokio::try_join!(self.server, metrics).map(|_| ()),
            None => self.server.await,
        };
        told.abort();
        if let Some(workers) = self.workers {
            let stopped = workers.stop(self.shutdown_timeout).await;
            tracing::info!(
                given_back = stopped.given_back,
                "webhook workers stopped; every attempt in flight was recorded or given back"
            );
        }
        for task in self.background {
            task.abort();
        }
        tracing::info!("stopped");
        result
    }
}
