//! Gatehouse's metrics, kept by the `prometheus` crate in a registry of their own (no global
//! registry: two servers in one process, as in the tests, count apart) and rendered in the
//! Prometheus text format.
//!
//! The families, every one prefixed `gatehouse_` (`docs/operations.md` lists them with their
//! meaning):
//! - `http_requests_total{method, route, status}` and `http_request_duration_seconds{method, route}`
//! - `sign_ins_total{method, outcome}`
//! - `webhook_deliveries_total{outcome}` and `webhook_delivery_latency_seconds` (commit to receipt)
//! - `webhook_deliveries_pending`
//! - `mail_queued`
//! - `store_connections{pool, state}` (`max`, `in_use`, `waiting`)
//! - `rate_limited_total{caller}`
//!
//! Every label value comes from a closed set ([`gatehouse_domain::ports::Metrics`] says which),
//! and the series of the closed sets are made at start, so that a scrape shows each family at
//! zero before anything happened.

use std::time::Duration;

use gatehouse_domain::ports::{
    DeliveryOutcome, Gauges, Metrics, RateLimitedSpender, SignInMethod, SignInOutcome,
};
use prometheus::{
    core::Collector, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

/// The HTTP methods that become a label as they are; any other is `OTHER`.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE",
];

/// Request latency buckets, in seconds: from half a millisecond (a cached read) to ten
/// seconds (a slow store).
const REQUEST_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Commit-to-receipt buckets, in seconds: from a millisecond to the retry schedule's hours.
const DELIVERY_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0, 300.0, 3600.0,
    86400.0,
];

/// The metrics of one server.
pub struct PrometheusMetrics {
    registry: Registry,
    requests: IntCounterVec,
    request_seconds: HistogramVec,
    sign_ins: IntCounterVec,
    deliveries: IntCounterVec,
    delivery_seconds: Histogram,
    pending: IntGauge,
    mail_queued: IntGauge,
    pools: IntGaugeVec,
    rate_limited: IntCounterVec,
}

/// Why the registry could not be built: a programming error (a duplicate or malformed name),
/// reported at start.
#[derive(Debug, thiserror::Error)]
#[error("building the metrics registry failed: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

fn registered<C: Collector + Clone + 'static>(
    registry: &Registry,
    collector: C,
) -> Result<C, prometheus::Error> {
    registry.register(Box::new(collector.clone()))?;
    Ok(collector)
}

impl PrometheusMetrics {
    /// A registry with every family, each closed-set series at zero.
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new_custom(Some("gatehouse".to_owned()), None)?;
        let requests = registered(
            &registry,
            IntCounterVec::new(
                Opts::new("http_requests_total", "HTTP requests answered"),
                &["method", "route", "status"],
            )?,
        )?;
        let request_seconds = registered(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "http_request_duration_seconds",
                    "Time from a request's arrival to its answer",
                )
                .buckets(REQUEST_BUCKETS.to_vec()),
                &["method", "route"],
            )?,
        )?;
        let sign_ins = registered(
            &registry,
            IntCounterVec::new(
                Opts::new("sign_ins_total", "Sign-in attempts by method and outcome"),
                &["method", "outcome"],
            )?,
        )?;
        let deliveries = registered(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "webhook_deliveries_total",
                    "Webhook delivery attempts recorded, by outcome",
                ),
                &["outcome"],
            )?,
        )?;
        let delivery_seconds = registered(
            &registry,
            Histogram::with_opts(
                HistogramOpts::new(
                    "webhook_delivery_latency_seconds",
                    "Time from the change's commit to the receiver's 2xx, for delivered webhooks",
                )
                .buckets(DELIVERY_BUCKETS.to_vec()),
            )?,
        )?;
        let pending = registered(
            &registry,
            IntGauge::new(
                "webhook_deliveries_pending",
                "Deliveries with an attempt still to come (due now or waiting for a retry)",
            )?,
        )?;
        let mail_queued = registered(
            &registry,
            IntGauge::new(
                "mail_queued",
                "Mails in the outbox not yet sent (due now or waiting for a retry)",
            )?,
        )?;
        let pools = registered(
            &registry,
            IntGaugeVec::new(
                Opts::new(
                    "store_connections",
                    "The store's connection pools: max, in_use and waiting (callers queued for a connection)",
                ),
                &["pool", "state"],
            )?,
        )?;
        let rate_limited = registered(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "rate_limited_total",
                    "Requests refused with 429 by the per-plan rate limit",
                ),
                &["caller"],
            )?,
        )?;
        for method in SignInMethod::ALL {
            for outcome in SignInOutcome::ALL {
                sign_ins.with_label_values(&[method.as_str(), outcome.as_str()]);
            }
        }
        for outcome in DeliveryOutcome::ALL {
            deliveries.with_label_values(&[outcome.as_str()]);
        }
        for caller in [
            RateLimitedSpender::Anonymous,
            RateLimitedSpender::Authenticated,
        ] {
            rate_limited.with_label_values(&[caller.as_str()]);
        }
        Ok(Self {
            registry,
            requests,
            request_seconds,
            sign_ins,
            deliveries,
            delivery_seconds,
            pending,
            mail_queued,
            pools,
            rate_limited,
        })
    }
}

/// The method as a label: a standard one as it is, anything else `OTHER`.
fn method_label(method: &str) -> &'static str {
    METHODS
        .into_iter()
        .find(|known| *known == method)
        .unwrap_or("OTHER")
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Metrics for PrometheusMetrics {
    fn request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let method = method_label(method);
        self.requests
            .with_label_values(&[method, route, &status.to_string()])
            .inc();
        self.request_seconds
            .with_label_values(&[method, route])
            .observe(elapsed.as_secs_f64());
    }

    fn sign_in(&self, method: SignInMethod, outcome: SignInOutcome) {
        self.sign_ins
            .with_label_values(&[method.as_str(), outcome.as_str()])
            .inc();
    }

    fn delivery(&self, outcome: DeliveryOutcome, since_commit: Option<Duration>) {
        self.deliveries.with_label_values(&[outcome.as_str()]).inc();
        if let Some(latency) = since_commit {
            self.delivery_seconds.observe(latency.as_secs_f64());
        }
    }

    fn rate_limited(&self, caller: RateLimitedSpender) {
        self.rate_limited
            .with_label_values(&[caller.as_str()])
            .inc();
    }

    fn render(&self, gauges: &Gauges) -> String {
        self.pending.set(clamp(gauges.pending_deliveries));
        self.mail_queued.set(clamp(gauges.queued_mail));
        for pool in &gauges.pools {
            for (state, value) in [
                ("max", pool.max),
                ("in_use", pool.in_use),
                ("waiting", pool.waiting),
            ] {
                self.pools
                    .with_label_values(&[pool.pool, state])
                    .set(clamp(value));
            }
        }
        match TextEncoder::new().encode_to_string(&self.registry.gather()) {
            Ok(text) => text,
            Err(error) => {
                tracing::error!(%error, "rendering the metrics failed");
                String::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::ports::PoolUse;

    use super::*;

    #[test]
    fn every_family_is_there_before_anything_happened() -> Result<(), MetricsError> {
        let metrics = PrometheusMetrics::new()?;
        let text = metrics.render(&Gauges::default());
        for family in [
            "gatehouse_sign_ins_total",
            "gatehouse_webhook_deliveries_total",
            "gatehouse_webhook_delivery_latency_seconds",
            "gatehouse_webhook_deliveries_pending",
            "gatehouse_mail_queued",
            "gatehouse_rate_limited_total",
        ] {
            assert!(
                text.contains(&format!("# TYPE {family} ")),
                "{family} in {text}"
            );
        }
        Ok(())
    }

    #[test]
    fn an_unknown_method_does_not_become_a_label() -> Result<(), MetricsError> {
        let metrics = PrometheusMetrics::new()?;
        metrics.request("BREW", "unmatched", 404, Duration::from_millis(1));
        metrics.request("GET", "/healthz", 200, Duration::from_millis(1));
        let text = metrics.render(&Gauges {
            pending_deliveries: 3,
            queued_mail: 1,
            pools: vec![PoolUse {
                pool: "primary",
                max: 10,
                in_use: 2,
                waiting: 0,
            }],
        });
        assert!(text.contains(
            r#"gatehouse_http_requests_total{method="OTHER",route="unmatched",status="404"} 1"#
        ));
        assert!(!text.contains("BREW"));
        assert!(text.contains("gatehouse_webhook_deliveries_pending 3"));
        assert!(text.contains("gatehouse_mail_queued 1"));
        assert!(text.contains(r#"gatehouse_store_connections{pool="primary",state="max"} 10"#));
        Ok(())
    }
}
