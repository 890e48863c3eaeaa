use gatehouse_domain::{
    ports::Ports,
    service::{ApiKeyService, AuthService, AuthSettings},
};

/// What every handler can reach: the use cases and the ports the extractors need.
#[derive(Clone)]
pub struct AppState {
    pub ports: Ports,
    pub auth: AuthService,
    pub api_keys: ApiKeyService,
}

impl AppState {
    pub fn new(ports: Ports, settings: AuthSettings) -> Self {
        Self {
            auth: AuthService::new(ports.clone(), settings),
            api_keys: ApiKeyService::new(ports.clone()),
            ports,
        }
    }
}
