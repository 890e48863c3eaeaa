use gatehouse_domain::{
    model::RateLimits,
    ports::Ports,
    service::{
        ApiKeyService, AuthService, AuthSettings, MemberService, OrganizationService,
        RateLimitService, WebhookService,
    },
};

/// What every handler can reach: the use cases and the ports the extractors need.
#[derive(Clone)]
pub struct AppState {
    pub ports: Ports,
    pub auth: AuthService,
    pub api_keys: ApiKeyService,
    pub organizations: OrganizationService,
    pub members: MemberService,
    pub rate_limits: RateLimitService,
    pub webhooks: WebhookService,
}

impl AppState {
    pub fn new(ports: Ports, settings: AuthSettings, limits: RateLimits) -> Self {
        Self {
            members: MemberService::new(ports.clone(), settings.issuer.clone()),
            auth: AuthService::new(ports.clone(), settings),
            api_keys: ApiKeyService::new(ports.clone()),
            organizations: OrganizationService::new(ports.clone()),
            rate_limits: RateLimitService::new(ports.clone(), limits),
            webhooks: WebhookService::new(ports.clone()),
            ports,
        }
    }
}
