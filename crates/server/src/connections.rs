//! What one client address may hold of the server's connections, and the open-file limit they
//! all share.

use std::{
    collections::HashMap,
    net::{IpAddr, Shutdown},
    sync::{Arc, Mutex},
};

use actix_web::{dev::Extensions, rt::net::TcpStream};
use gatehouse_domain::model::IpRange;

/// Open connections per client address, bounded: `GATEHOUSE_MAX_CONNECTIONS_PER_IP`.
///
/// Counted as connections are accepted ([`ConnectionLimit::on_connect`], given to actix-web's
/// `HttpServer::on_connect`); one past the bound is shut down at once, before a byte of it is
/// read. The count of a connection goes when the connection does, however it ends: its
/// [`Held`] lives in the connection's data, which actix-web drops with the connection.
/// Trusted proxies (`GATEHOUSE_TRUSTED_PROXIES`) are not bounded: all their clients come
/// through them.
#[derive(Clone)]
pub struct ConnectionLimit {
    per_address: usize,
    trusted: Arc<Vec<IpRange>>,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One counted connection; the count goes down when it is dropped.
struct Held {
    address: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

impl ConnectionLimit {
    /// At most `per_address` open connections from one address, except from `trusted`.
    pub fn new(per_address: usize, trusted: Vec<IpRange>) -> Self {
        Self {
            per_address,
            trusted: Arc::new(trusted),
            open: Arc::default(),
        }
    }

    /// Counts a connection just accepted; shuts it down when its address holds its bound of
    /// open connections already.
    pub fn on_connect(&self, connection: &dyn std::any::Any, data: &mut Extensions) {
        let Some(stream) = connection.downcast_ref::<TcpStream>() else {
            return;
        };
        let Ok(peer) = stream.peer_addr() else {
            return;
        };
        let address = peer.ip().to_canonical();
        if self.trusted.iter().any(|range| range.contains(address)) {
            return;
        }
        let admitted = {
            let mut open = self
                .open
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let count = open.entry(address).or_insert(0);
            *count += 1;
            *count <= self.per_address
        };
        // Counted either way: the connection's data is dropped with it, and the count with it.
        data.insert(Held {
            address,
            open: self.open.clone(),
        });
        if !admitted {
            tracing::debug!(%address, "connection closed at accept: too many open from its address");
            let _ = socket2::SockRef::from(stream).shutdown(Shutdown::Both);
        }
    }
}

/// Raises the process's open-file limit (soft) to its hard limit, so that the connection bound
/// per address, not the default of 1,024 files, is what turns a crowd away; says so in the log.
pub fn raise_open_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::info!(
            open_files = limit,
            "open-file limit raised to the hard limit"
        ),
        Err(error) => tracing::warn!(%error, "the open-file limit could not be raised"),
    }
}
