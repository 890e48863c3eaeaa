//! The real `gatehouse` binary on 127.0.0.1 and what the benches read of it: started on a free
//! port and waited for, its resident memory and CPU time from `/proc`, its log's warnings, and
//! the numbers of the tables (`just bench` and `just bench-tenants` both use it).
#![allow(dead_code)]

use std::{
    fmt::Write as _,
    fs,
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use serde_json::{json, Value};

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `gatehouse`; killed when dropped (panics included).
pub struct Server {
    child: Child,
    pub pid: u32,
    pub base: String,
}

impl Server {
    /// Starts `binary` (under `taskset -c cpus` when given) on a free port with only `env` (and
    /// `PATH`), its stderr into `log`, and waits for `/readyz` to answer 200. Returns the server
    /// and the milliseconds from spawn to that answer.
    pub fn start(
        binary: &Path,
        cpus: Option<&str>,
        env: &[(&str, &str)],
        log: &Path,
    ) -> (Self, f64) {
        let addr = free_address();
        // `taskset` execs the server: the pid is the server's.
        let mut command = match cpus {
            Some(cpus) => {
                let mut taskset = Command::new("taskset");
                taskset.arg("-c").arg(cpus).arg(binary);
                taskset
            }
            None => Command::new(binary),
        };
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GATEHOUSE_BIND", addr.to_string())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(log).unwrap());
        let spawned = Instant::now();
        let child = command.spawn().unwrap();
        let mut server = Self {
            pid: child.id(),
            child,
            base: format!("http://{addr}"),
        };
        loop {
            if readyz_ok(addr) {
                let ms = spawned.elapsed().as_secs_f64() * 1000.0;
                return (server, ms);
            }
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "gatehouse exited ({status}) before it was ready:\n{}",
                    tail(log)
                );
            }
            if spawned.elapsed() > READY_TIMEOUT {
                panic!(
                    "gatehouse was not ready within {READY_TIMEOUT:?}:\n{}",
                    tail(log)
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn rss_kb(&self) -> u64 {
        rss_kb(self.pid).unwrap_or(0)
    }

    /// The CPU time the process has used so far (user and system, every thread), in seconds.
    pub fn cpu_secs(&self) -> f64 {
        cpu_secs(self.pid).unwrap_or(0.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on: bound, read, released.
pub fn free_address() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// One plain `GET /readyz` over a fresh connection: did it answer 200?
pub fn readyz_ok(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(100)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request).is_err() {
        return false;
    }
    let mut head = [0_u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

/// The last 30 lines of a log.
pub fn tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<_> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

pub fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

pub fn meminfo_kb(field: &str) -> Option<u64> {
    proc_field_kb(Path::new("/proc/meminfo"), field)
}

/// A `Name:   1234 kB` line of a `/proc` file, in kB.
pub fn proc_field_kb(path: &Path, field: &str) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub fn rss_kb(pid: u32) -> Option<u64> {
    proc_field_kb(&PathBuf::from(format!("/proc/{pid}/status")), "VmRSS")
}

/// `utime + stime` of `/proc/<pid>/stat`, in seconds.
pub fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name, in parentheses, may hold spaces: the fields are counted after it.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Fields 14 and 15 of the whole line (utime, stime) are 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ: 100 on every Linux this runs on.
    Some(ticks as f64 / 100.0)
}

pub fn mb(kb: u64) -> String {
    format!("{:.1} MB", kb as f64 * 1024.0 / 1e6)
}

/// Samples a process's VmRSS every 100 ms on a thread of its own; keeps the highest.
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: JoinHandle<()>,
}

impl RssSampler {
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let thread = std::thread::spawn({
            let (stop, peak) = (stop.clone(), peak.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(kb) = rss_kb(pid) {
                        peak.fetch_max(kb, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        });
        Self { stop, peak, thread }
    }

    /// Stops sampling; the peak in kB.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        self.peak.load(Ordering::Relaxed)
    }
}

/// What the server logged at WARN or above during the run: each message once, with a count.
pub fn server_log_notes(log: &Path) -> Vec<String> {
    let text = fs::read_to_string(log).unwrap_or_default();
    let mut seen: Vec<(String, usize)> = Vec::new();
    for line in text.lines() {
        let entry: Value = serde_json::from_str(line).unwrap_or_else(|_| {
            json!({
                "level": "?", "fields": { "message": line }
            })
        });
        let level = entry["level"].as_str().unwrap_or("?");
        if !matches!(level, "WARN" | "ERROR" | "?") {
            continue;
        }
        let fields = &entry["fields"];
        let mut message = format!("{level} {}", fields["message"].as_str().unwrap_or(""));
        if let Some(error) = fields["error"].as_str() {
            write!(message, " (error: {error})").unwrap();
        }
        match seen.iter_mut().find(|(m, _)| *m == message) {
            Some((_, count)) => *count += 1,
            None => seen.push((message, 1)),
        }
    }
    seen.into_iter()
        .map(|(message, count)| format!("server log, {count}×: `{message}`"))
        .collect()
}

/// POSTs JSON (as a bearer, in an organization) and returns the JSON answer, which must have
/// `status`.
pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    auth: Option<(&str, Option<&str>)>,
    body: &Value,
    status: u16,
) -> Value {
    let mut request = client.post(url).json(body);
    if let Some((token, organization)) = auth {
        request = request.bearer_auth(token);
        if let Some(organization) = organization {
            request = request.header("X-Organization-ID", organization);
        }
    }
    let response = request.send().await.unwrap();
    let actual = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(actual, status, "POST {url}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// One change: `PATCH /users/me` with a new name. Whether it answered 200.
pub async fn rename(client: &reqwest::Client, url: &str, token: &str, name: &str) -> bool {
    let response = client
        .patch(url)
        .bearer_auth(token)
        .json(&json!({ "full_name": name }))
        .send()
        .await;
    matches!(&response, Ok(r) if r.status() == 200)
}

/// The nearest-rank percentile (`p` in 0..=1); NaN for no values.
pub fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = (p * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// A rate with thousands separators: `12,345`; one decimal below 100.
pub fn group(value: f64) -> String {
    if value < 100.0 {
        return format!("{value:.1}");
    }
    let digits = format!("{value:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Milliseconds, with precision that suits their size.
pub fn ms(value: f64) -> String {
    if value.is_nan() {
        "n/a".to_owned()
    } else if value < 10.0 {
        format!("{value:.2} ms")
    } else if value < 100.0 {
        format!("{value:.1} ms")
    } else {
        format!("{value:.0} ms")
    }
}
