//! The [`DnsTxt`] port over `hickory-resolver`: the TXT records that prove an organization
//! holds a domain (`_gatehouse-challenge.{domain}`).
//!
//! Which server is asked is `GATEHOUSE_DNS_RESOLVER` (`host:port`), or the system's resolver
//! (`/etc/resolv.conf`). Nothing is cached: an administrator who just published the record
//! and asks again is answered from the DNS, not from a remembered "no such name".
//!
//! With the `test-server` feature, [`test_server`] is a real DNS server on loopback that
//! answers the TXT records a test sets.

use std::{net::SocketAddr, time::Duration};

use async_trait::async_trait;
use gatehouse_domain::ports::{DnsError, DnsTxt};
use hickory_resolver::{
    config::{ConnectionConfig, NameServerConfig, ResolverConfig},
    net::runtime::TokioRuntimeProvider,
    proto::rr::RData,
    TokioResolver,
};

#[cfg(feature = "test-server")]
pub mod test_server;

/// How long one question waits for its answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Why the resolver could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("the DNS resolver could not be set up: {0}")]
pub struct DnsSetupError(String);

/// TXT lookups through `hickory-resolver`.
pub struct HickoryDns {
    resolver: TokioResolver,
}

impl HickoryDns {
    /// Asks the system's resolver, as `/etc/resolv.conf` names it.
    ///
    /// # Errors
    /// When the system's configuration cannot be read.
    pub fn system() -> Result<Self, DnsSetupError> {
        let mut builder =
            TokioResolver::builder_tokio().map_err(|e| DnsSetupError(e.to_string()))?;
        Self::tune(builder.options_mut());
        builder
            .build()
            .map(|resolver| Self { resolver })
            .map_err(|e| DnsSetupError(e.to_string()))
    }

    /// Asks the server at `address` only (UDP, then TCP for a truncated answer).
    ///
    /// # Errors
    /// When the resolver cannot be built.
    pub fn at(address: SocketAddr) -> Result<Self, DnsSetupError> {
        let connections = [ConnectionConfig::udp(), ConnectionConfig::tcp()]
            .into_iter()
            .map(|mut connection| {
                connection.port = address.port();
                connection
            })
            .collect();
        let server = NameServerConfig::new(address.ip(), true, connections);
        let config = ResolverConfig::from_parts(None, Vec::new(), vec![server]);
        let mut builder =
            TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
        Self::tune(builder.options_mut());
        builder
            .build()
            .map(|resolver| Self { resolver })
            .map_err(|e| DnsSetupError(e.to_string()))
    }

    /// No cache, a bounded wait.
    fn tune(options: &mut hickory_resolver::config::ResolverOpts) {
        options.cache_size = 0;
        options.timeout = TIMEOUT;
        options.attempts = 2;
    }
}

#[async_trait]
impl DnsTxt for HickoryDns {
    async fn txt_records(&self, name: &str) -> Result<Vec<String>, DnsError> {
        // Fully qualified: no search domain is tried.
        let fqdn = format!("{}.", name.trim_end_matches('.'));
        match self.resolver.txt_lookup(fqdn).await {
            Ok(lookup) => Ok(lookup
                .answers()
                .iter()
                .filter_map(|record| match &record.data {
                    // A record's strings are one value, split only by the 255-byte limit.
                    RData::TXT(txt) => Some(
                        txt.txt_data
                            .iter()
                            .map(|part| String::from_utf8_lossy(part))
                            .collect::<String>(),
                    ),
                    _ => None,
                })
                .collect()),
            Err(e) if e.is_no_records_found() => Ok(Vec::new()),
            Err(e) => {
                tracing::warn!(error = %e, name, "DNS lookup failed");
                Err(DnsError(Box::new(e)))
            }
        }
    }
}
