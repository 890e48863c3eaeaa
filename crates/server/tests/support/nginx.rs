//! nginx in front of replicas of the binary, as `scripts/cluster` runs it:
//! `deploy/nginx/gatehouse.conf.template` filled in, under a prefix of its own. Used by the
//! cluster test (`tests/cluster.rs`) and `just bench-cluster` (`benches/cluster.rs`).
// Each program that includes this uses part of it.
#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// nginx, as `scripts/cluster` runs it: `deploy/nginx/gatehouse.conf.template` filled in.
pub struct Nginx {
    child: Child,
    binary: PathBuf,
    prefix: tempfile::TempDir,
    listen: String,
}

impl Nginx {
    /// Where nginx is installed, if it is.
    pub fn find() -> Option<PathBuf> {
        ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
            .iter()
            .map(PathBuf::from)
            .find(|path| path.is_file())
    }

    pub fn binary() -> PathBuf {
        Self::find().unwrap_or_else(|| {
            panic!(
                "the cluster test and `just bench-cluster` need nginx, the cluster's load \
                 balancer: install it (on Debian: apt-get install nginx; scripts/test does)"
            )
        })
    }

    /// Starts nginx on a free port of 127.0.0.1 in front of `upstreams` (a replica's port on
    /// 127.0.0.1, and whether it is in: `false` marks it `down`), and waits until it accepts.
    pub fn start(upstreams: &[(u16, bool)]) -> Self {
        let prefix = tempfile::tempdir().expect("nginx: cannot make its prefix directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("nginx: cannot find a free port on 127.0.0.1")
            .local_addr()
            .expect("nginx: the free port has no address")
            .port();
        let listen = format!("127.0.0.1:{port}");
        let nginx = Self::write_config(prefix.path(), &listen, upstreams);
        let binary = Self::binary();
        let child = Command::new(&binary)
            .arg("-p")
            .arg(prefix.path())
            .arg("-c")
            .arg(&nginx)
            .arg("-e")
            .arg(prefix.path().join("error.log"))
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
        let started = Self {
            child,
            binary,
            prefix,
            listen,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(&started.listen).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not start: {}",
                started.error_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        started
    }

    fn write_config(prefix: &Path, listen: &str, upstreams: &[(u16, bool)]) -> PathBuf {
        let template_path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/nginx/gatehouse.conf.template");
        let template = std::fs::read_to_string(&template_path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", template_path.display()));
        let servers: Vec<String> = upstreams
            .iter()
            .map(|(port, up)| format!("server 127.0.0.1:{port}{};", if *up { "" } else { " down" }))
            .collect();
        let config = template
            .replace("@LISTEN@", listen)
            .replace("@UPSTREAM_SERVERS@", &servers.join("\n        "))
            .replace("@PREFIX@", &prefix.display().to_string());
        let path = prefix.join("nginx.conf");
        std::fs::write(&path, config)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path
    }

    /// Rewrites the upstreams and reloads, gracefully: old workers finish their requests.
    pub fn reload(&self, upstreams: &[(u16, bool)]) {
        let config = Self::write_config(self.prefix.path(), &self.listen, upstreams);
        let status = Command::new(&self.binary)
            .arg("-p")
            .arg(self.prefix.path())
            .arg("-c")
            .arg(&config)
            .arg("-e")
            .arg(self.prefix.path().join("error.log"))
            .args(["-s", "reload"])
            .status()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        assert!(
            status.success(),
            "nginx -s reload failed: {}",
            self.error_log()
        );
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }

    /// The master process's id (its workers are its children).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its access log: a line per request, with the replica that answered (`upstream=`).
    pub fn access_log(&self) -> PathBuf {
        self.prefix.path().join("access.log")
    }

    /// What nginx wrote to its error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    /// Stops nginx with SIGTERM, which its master passes on to its workers (SIGKILL would
    /// leave them running); SIGKILL only if it is still there after 5 s.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
