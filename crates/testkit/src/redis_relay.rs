//! A TCP relay to Redis that a test breaks: behind it, the code under test finds Redis
//! unreachable while Redis itself keeps running for the other tests.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, Mutex, PoisonError,
};

use tokio::{
    net::{TcpListener, TcpStream},
    task::{JoinHandle, JoinSet},
};

/// A relay to the Redis server at `upstream`, on a port of 127.0.0.1 of its own.
pub struct RedisRelay {
    /// Where the code under test connects: `redis://127.0.0.1:{port}`.
    pub url: String,
    accepting: JoinHandle<()>,
    silent: Arc<AtomicBool>,
    links: Arc<Mutex<JoinSet<()>>>,
}

impl RedisRelay {
    /// Starts relaying to the Redis server at `upstream` (a `redis://` URL).
    ///
    /// # Panics
    /// When `upstream` is no URL with a host, or no port of 127.0.0.1 is free.
    pub async fn start(upstream: &str) -> Self {
        let address = match url::Url::parse(upstream) {
            Ok(url) => url
                .host_str()
                .map(|host| (host.to_owned(), url.port().unwrap_or(6379))),
            Err(_) => None,
        };
        let Some((host, port)) = address else {
            panic!("not a Redis URL with a host: {upstream}");
        };
        let upstream = format!("{host}:{port}");
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(error) => panic!("no port of 127.0.0.1 for the Redis relay: {error}"),
        };
        let url = match listener.local_addr() {
            Ok(address) => format!("redis://{address}"),
            Err(error) => panic!("the Redis relay has no address: {error}"),
        };
        let links = Arc::new(Mutex::new(JoinSet::new()));
        let silent = Arc::new(AtomicBool::new(false));
        let (spawned, quiet) = (links.clone(), silent.clone());
        let accepting = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut client, _)) = listener.accept().await {
                if quiet.load(Ordering::SeqCst) {
                    held.push(client);
                    continue;
                }
                let upstream = upstream.clone();
                spawned
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .spawn(async move {
                        if let Ok(mut redis) = TcpStream::connect(&upstream).await {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut redis).await;
                        }
                    });
            }
        });
        Self {
            url,
            accepting,
            silent,
            links,
        }
    }

    /// Redis goes away as a stopped server does: open connections drop, new ones are refused.
    pub fn cut(&self) {
        self.accepting.abort();
        self.drop_links();
    }

    /// Redis goes away as an unreachable host does: open connections drop, new ones are
    /// accepted and never answered, so that every command waits for its timeout.
    pub fn silence(&self) {
        self.silent.store(true, Ordering::SeqCst);
        self.drop_links();
    }

    fn drop_links(&self) {
        self.links
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .abort_all();
    }
}
