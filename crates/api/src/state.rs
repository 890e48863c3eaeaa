use std::sync::Arc;

use gatehouse_domain::{
    model::{IpRange, OperatorToken, RateLimits},
    ports::{Clock, HealthStore, Metrics, Ports, Random, TokenSigner},
    service::{
        ApiKeyService, ApplicationService, AuditLogService, AuthService, AuthSettings,
        Authenticator, BrandingService, ControlService, DirectoryService, DomainService,
        EmailLinkService, IamService, InvitationLinkService, InvitationMails, MemberService,
        MfaService, OAuthService, OrganizationService, OwnershipService, PolicyService,
        RateLimitService, SamlService, SsoService, WebhookService,
    },
};

/// `GATEHOUSE_BODY_TIMEOUT_SECS` by default: how long a request body may take to arrive.
pub const DEFAULT_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What every handler can reach: the use cases, each with only the ports it uses, and the few
/// ports a handler uses itself (the clock, randomness, the metrics, the readiness check, the
/// public signing keys). Nothing else of the outside world: a handler calls a use case.
#[derive(Clone)]
pub struct AppState {
    /// The clock, for the handlers that stamp or compare times.
    pub clock: Arc<dyn Clock>,
    /// Randomness: the pages' anti-forgery tokens.
    pub random: Arc<dyn Random>,
    /// Where sign-ins and rate-limited requests are counted, and the metrics page rendered.
    pub metrics: Arc<dyn Metrics>,
    /// The store's readiness, for `/readyz`.
    pub health: Arc<dyn HealthStore>,
    /// The signing keys, for `/.well-known/jwks.json`.
    pub signer: Arc<dyn TokenSigner>,
    /// Checks credentials (access tokens, API keys, SCIM tokens) and whether the caller may act
    /// in an organization: what the extractors use.
    pub authenticator: Authenticator,
    /// Registration, password sign-in, refresh, logout, passwords and the caller's profile.
    pub auth: AuthService,
    /// The caller's own API keys (`/api/v1/api-keys`).
    pub api_keys: ApiKeyService,
    /// An organization's OAuth clients (`/api/v1/organizations/{id}/applications`).
    pub applications: ApplicationService,
    /// Organizations: list, create, read, change, delete.
    pub organizations: OrganizationService,
    /// Members, invitations and the organization's users (`/api/v1/iam/users`).
    pub members: MemberService,
    /// The page of an invitation's mailed link.
    pub invitations: InvitationLinkService,
    /// Handing a team organization to another member.
    pub ownership: OwnershipService,
    /// Service accounts and their keys, every key of an organization, custom roles.
    pub iam: IamService,
    /// Directory sync: SCIM tokens, the group-to-role map, and the SCIM endpoints themselves.
    pub directory: DirectoryService,
    /// `GATEHOUSE_PUBLIC_URL`: the base of each organization's SCIM address.
    pub public_url: String,
    /// The per-plan request limits the routes' gates apply (`access.rs`).
    pub rate_limits: RateLimitService,
    /// Webhook endpoints, the delivery log, retries and test pings.
    pub webhooks: WebhookService,
    /// An organization's security policies (password, MFA, session, IP allowlist).
    pub policies: PolicyService,
    /// An organization's branding (logos, colors, sign-in page, email).
    pub branding: BrandingService,
    /// An organization's SAML configuration (`/api/v1/sso/configurations`).
    pub sso: SsoService,
    /// An organization's email domains and their DNS verification.
    pub domains: DomainService,
    /// SAML sign-in itself: home realm discovery, the request to the identity provider, the
    /// assertion consumer.
    pub saml: SamlService,
    /// The caller's second factors, recovery codes, and the second step of a sign-in.
    pub mfa: MfaService,
    /// The mailed links: sign-in links, password resets, email verification.
    pub links: EmailLinkService,
    /// The OAuth 2.0 and OpenID Connect provider (`/oauth/*`, discovery, consent).
    pub oauth: OAuthService,
    /// Whether the hosted pages' cookies are `Secure`: the public URL is https.
    pub secure_cookies: bool,
    /// `GATEHOUSE_TRUSTED_PROXIES`: peers whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpRange>,
    /// The control plane (`/control/*`): billing events posted in, stored events, dead letters
    /// and their replay, every organization's audit log, the metrics' gauges.
    pub control: ControlService,
    /// An organization's own audit log (`/api/v1/organizations/{id}/audit-log`).
    pub audit_log: AuditLogService,
    /// `GATEHOUSE_CONTROL_TOKEN`; `None`: the control plane is off.
    pub control_token: Option<OperatorToken>,
    /// `GATEHOUSE_BODY_TIMEOUT_SECS`: how long a request body may take to arrive
    /// ([`bounded_body`](crate::bounded_body)).
    pub body_timeout: std::time::Duration,
    /// Set when the replica has been told to stop: `/readyz` answers `503` from then on, so
    /// that a load balancer takes it out while it drains.
    pub stopping: Arc<std::sync::atomic::AtomicBool>,
}

impl AppState {
    /// Builds every use case from `ports`. `settings` carries the issuer (the public URL) and
    /// token lifetimes; `limits` the per-plan rate limits; `trusted_proxies` and
    /// `control_token` come from their settings; `webhook_private_targets` lets webhook
    /// endpoints name private addresses (development and tests). The body timeout starts at
    /// [`DEFAULT_BODY_TIMEOUT`](crate::DEFAULT_BODY_TIMEOUT).
    pub fn new(
        ports: Ports,
        settings: AuthSettings,
        limits: RateLimits,
        trusted_proxies: Vec<IpRange>,
        control_token: Option<OperatorToken>,
        webhook_private_targets: bool,
    ) -> Self {
        let auth = AuthService::new((&ports).into(), settings.clone());
        let members = MemberService::new((&ports).into(), settings.issuer.clone());
        let authenticator = Authenticator::new((&ports).into(), &settings.issuer);
        Self {
            policies: PolicyService::new((&ports).into()),
            branding: BrandingService::new((&ports).into()),
            domains: DomainService::new((&ports).into()),
            sso: SsoService::new((&ports).into(), settings.issuer.clone()),
            directory: DirectoryService::new(
                (&ports).into(),
                auth.clone(),
                InvitationMails::new((&ports).into(), settings.issuer.clone()),
            ),
            invitations: InvitationLinkService::new(auth.clone(), members.clone()),
            members,
            public_url: settings.issuer.clone(),
            iam: IamService::new((&ports).into()),
            ownership: OwnershipService::new((&ports).into(), auth.clone()),
            oauth: OAuthService::new((&ports).into(), auth.clone(), authenticator.clone()),
            saml: SamlService::new((&ports).into(), auth.clone(), settings.issuer.clone()),
            mfa: MfaService::new((&ports).into(), auth.clone()),
            links: EmailLinkService::new((&ports).into(), auth.clone(), settings.issuer.clone()),
            api_keys: ApiKeyService::new((&ports).into(), authenticator.clone()),
            applications: ApplicationService::new((&ports).into()),
            organizations: OrganizationService::new((&ports).into()),
            rate_limits: RateLimitService::new((&ports).into(), limits),
            webhooks: WebhookService::new((&ports).into())
                .allowing_private_targets(webhook_private_targets),
            control: ControlService::new((&ports).into()),
            audit_log: AuditLogService::new((&ports).into()),
            authenticator,
            control_token,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            stopping: Arc::default(),
            trusted_proxies,
            secure_cookies: settings.issuer.starts_with("https://"),
            auth,
            clock: ports.clock.clone(),
            random: ports.random.clone(),
            metrics: ports.metrics.clone(),
            health: ports.health.clone(),
            signer: ports.signer.clone(),
        }
    }
}
