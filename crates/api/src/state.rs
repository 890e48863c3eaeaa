use gatehouse_domain::{
    model::{IpRange, RateLimits},
    ports::Ports,
    service::{
        ApiKeyService, ApplicationService, AuthService, AuthSettings, BrandingService,
        MemberService, OAuthService, OrganizationService, PolicyService, RateLimitService,
        SsoService, WebhookService,
    },
};

/// What every handler can reach: the use cases and the ports the extractors need.
#[derive(Clone)]
pub struct AppState {
    pub ports: Ports,
    pub auth: AuthService,
    pub api_keys: ApiKeyService,
    pub applications: ApplicationService,
    pub organizations: OrganizationService,
    pub members: MemberService,
    pub rate_limits: RateLimitService,
    pub webhooks: WebhookService,
    pub policies: PolicyService,
    pub branding: BrandingService,
    pub sso: SsoService,
    pub oauth: OAuthService,
    /// Whether the hosted pages' cookies are `Secure`: the public URL is https.
    pub secure_cookies: bool,
    /// `GATEHOUSE_TRUSTED_PROXIES`: peers whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpRange>,
}

impl AppState {
    pub fn new(
        ports: Ports,
        settings: AuthSettings,
        limits: RateLimits,
        trusted_proxies: Vec<IpRange>,
    ) -> Self {
        Self {
            policies: PolicyService::new(ports.clone()),
            branding: BrandingService::new(ports.clone()),
            sso: SsoService::new(ports.clone(), settings.issuer.clone()),
            trusted_proxies,
            secure_cookies: settings.issuer.starts_with("https://"),
            members: MemberService::new(ports.clone(), settings.issuer.clone()),
            oauth: OAuthService::new(
                ports.clone(),
                AuthService::new(ports.clone(), settings.clone()),
            ),
            auth: AuthService::new(ports.clone(), settings),
            api_keys: ApiKeyService::new(ports.clone()),
            applications: ApplicationService::new(ports.clone()),
            organizations: OrganizationService::new(ports.clone()),
            rate_limits: RateLimitService::new(ports.clone(), limits),
            webhooks: WebhookService::new(ports.clone()),
            ports,
        }
    }
}
