//! The TCP half of the connector: name resolution and connection, with the SSRF rule applied
//! to the addresses actually connected to.
//!
//! Three checks, so that no path reaches a refused address:
//! - the resolver drops every refused address from a lookup's answer (and fails when none is
//!   left), so the addresses checked are the very ones connected to and a DNS rebinding
//!   between a check and the connection is impossible;
//! - a URL whose host is an IP literal never reaches the resolver (hyper-util connects to it
//!   directly), so [`GuardedConnector`] checks it before connecting;
//! - once connected, the peer address is checked again, in case a future hyper-util finds
//!   another way around the resolver.

use std::{
    future::Future,
    io,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    task::{Context, Poll},
};

use http::Uri;
use hyper_util::{
    client::legacy::connect::{dns::Name, HttpConnector},
    rt::TokioIo,
};
use tokio::net::TcpStream;
use tower_service::Service;

use gatehouse_domain::model::is_public_address;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send + 'static>>;

/// The address a webhook was about to be sent to, refused by the SSRF rule.
#[derive(Debug, thiserror::Error)]
#[error("target address {0} is not allowed (private or loopback)")]
pub(crate) struct RefusedTarget(pub(crate) IpAddr);

impl RefusedTarget {
    fn boxed(ip: IpAddr) -> BoxError {
        Box::new(Self(ip))
    }
}

/// Resolves host names with the system resolver (`getaddrinfo`, through
/// [`tokio::net::lookup_host`]) and drops the refused addresses.
#[derive(Clone, Debug)]
pub(crate) struct CheckedResolver {
    allow_private: bool,
}

impl Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let allow_private = self.allow_private;
        Box::pin(async move {
            // The port is replaced by the URL's (or 443) by the HTTP connector.
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if allow_private {
                return Ok(resolved.into_iter());
            }
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = resolved
                .into_iter()
                .partition(|addr| is_public_address(addr.ip()));
            match (allowed.is_empty(), refused.first()) {
                (false, _) => Ok(allowed.into_iter()),
                (true, Some(first)) => Err(RefusedTarget::boxed(first.ip())),
                (true, None) => Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} resolves to no address", name.as_str()),
                )
                .into()),
            }
        })
    }
}

/// hyper-util's TCP connector on the [`CheckedResolver`], with IP-literal hosts and connected
/// peers checked as well.
#[derive(Clone, Debug)]
pub(crate) struct GuardedConnector {
    inner: HttpConnector<CheckedResolver>,
    allow_private: bool,
}

impl GuardedConnector {
    pub(crate) fn new(allow_private: bool) -> Self {
        let mut inner = HttpConnector::new_with_resolver(CheckedResolver { allow_private });
        // The scheme is https; the TLS layer above takes care of it.
        inner.enforce_http(false);
        inner.set_nodelay(true);
        Self {
            inner,
            allow_private,
        }
    }
}

impl Service<Uri> for GuardedConnector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        if !self.allow_private {
            let literal = uri
                .host()
                .map(|host| host.trim_start_matches('[').trim_end_matches(']'))
                .and_then(|host| host.parse::<IpAddr>().ok());
            if let Some(ip) = literal.filter(|ip| !is_public_address(*ip)) {
                return Box::pin(std::future::ready(Err(RefusedTarget::boxed(ip))));
            }
        }
        let allow_private = self.allow_private;
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            let stream = connecting.await?;
            if !allow_private {
                let peer = stream.inner().peer_addr()?;
                if !is_public_address(peer.ip()) {
                    return Err(RefusedTarget::boxed(peer.ip()));
                }
            }
            Ok(stream)
        })
    }
}
