//! A real DNS server on loopback, for tests: it answers questions over UDP (truncated past 512
//! bytes, as RFC 1035 says) and TCP for the TXT records tests set (`NXDOMAIN` for any other
//! name). Never enable it in a production build.

use std::{
    collections::HashMap,
    io,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
};

use hickory_resolver::proto::{
    op::{Message, ResponseCode},
    rr::{rdata::TXT, RData, Record, RecordType},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream, UdpSocket},
    task::JoinHandle,
};

/// The largest answer sent over UDP without EDNS; a longer one is truncated, and the resolver
/// asks again over TCP.
const UDP_MAX: usize = 512;

type Zone = Arc<Mutex<HashMap<String, Vec<String>>>>;

/// The server: it answers until dropped.
pub struct TestDnsServer {
    address: SocketAddr,
    zone: Zone,
    tasks: [JoinHandle<()>; 2],
}

impl TestDnsServer {
    /// Binds `127.0.0.1` on a free port (UDP and TCP) and starts answering.
    ///
    /// # Errors
    /// When the sockets cannot be bound.
    pub async fn start() -> io::Result<Self> {
        let tcp = TcpListener::bind("127.0.0.1:0").await?;
        let address = tcp.local_addr()?;
        let udp = UdpSocket::bind(address).await?;
        let zone = Zone::default();
        let tasks = [
            tokio::spawn(serve_udp(udp, zone.clone())),
            tokio::spawn(serve_tcp(tcp, zone.clone())),
        ];
        Ok(Self {
            address,
            zone,
            tasks,
        })
    }

    /// Where it listens (UDP), as `GATEHOUSE_DNS_RESOLVER` names it.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// From now on `name` (without the final dot) has these TXT records, one value each.
    pub fn set_txt(&self, name: &str, values: &[&str]) {
        self.zone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                name.trim_end_matches('.').to_ascii_lowercase(),
                values.iter().map(|v| (*v).to_owned()).collect(),
            );
    }
}

impl TestDnsServer {
    /// Adds one TXT record to `name`, keeping those it has: tests that share a server each
    /// publish their own random value.
    pub fn add_txt(&self, name: &str, value: &str) {
        self.zone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.trim_end_matches('.').to_ascii_lowercase())
            .or_default()
            .push(value.to_owned());
    }
}

impl Drop for TestDnsServer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn serve_udp(socket: UdpSocket, zone: Zone) {
    let mut buffer = [0_u8; 4096];
    loop {
        let Ok((len, peer)) = socket.recv_from(&mut buffer).await else {
            continue;
        };
        let Some(response) = answer(&buffer[..len], &zone) else {
            continue;
        };
        let encoded = match response.to_vec() {
            Ok(encoded) if encoded.len() > UDP_MAX => response.truncate().to_vec(),
            encoded => encoded,
        };
        if let Ok(encoded) = encoded {
            let _ = socket.send_to(&encoded, peer).await;
        }
    }
}

async fn serve_tcp(listener: TcpListener, zone: Zone) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(serve_connection(stream, zone.clone()));
    }
}

/// Questions and answers on one connection, each prefixed by its length (RFC 1035, 4.2.2).
async fn serve_connection(mut stream: TcpStream, zone: Zone) {
    loop {
        let Ok(len) = stream.read_u16().await else {
            return;
        };
        let mut question = vec![0_u8; usize::from(len)];
        if stream.read_exact(&mut question).await.is_err() {
            return;
        }
        let Some(Ok(encoded)) = answer(&question, &zone).map(|response| response.to_vec()) else {
            return;
        };
        let Ok(len) = u16::try_from(encoded.len()) else {
            return;
        };
        if stream.write_u16(len).await.is_err() || stream.write_all(&encoded).await.is_err() {
            return;
        }
    }
}

/// The response to one question; `None` for what is not a DNS message.
fn answer(question: &[u8], zone: &Zone) -> Option<Message> {
    let question = Message::from_vec(question).ok()?;
    let mut response = Message::response(question.metadata.id, question.metadata.op_code);
    response.metadata.authoritative = true;
    response.metadata.recursion_desired = question.metadata.recursion_desired;
    response.metadata.recursion_available = true;
    let mut known = false;
    for query in &question.queries {
        response.add_query(query.clone());
        let name = query.name().to_ascii();
        let key = name.trim_end_matches('.').to_ascii_lowercase();
        let zone = zone.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(values) = zone.get(&key) else {
            continue;
        };
        known = true;
        if query.query_type() == RecordType::TXT {
            for value in values {
                response.add_answer(Record::from_rdata(
                    query.name().clone(),
                    0,
                    RData::TXT(TXT::new(vec![value.clone()])),
                ));
            }
        }
    }
    if !known {
        response.metadata.response_code = ResponseCode::NXDomain;
    }
    Some(response)
}
