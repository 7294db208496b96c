//! Black-box harness: the real `leasekit` binary, serving on a free loopback port, over HTTP.

#![allow(dead_code)]

pub mod facilitator;
pub mod history;
pub mod proxy;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub const ACME_KEY: &str = "acme-key-0123456789abcdef";
pub const GLOBEX_KEY: &str = "globex-key-0123456789abcdef";
/// acme's key with the admin role (revoke, audit).
pub const ACME_ADMIN_KEY: &str = "acme-admin-key-0123456789abcdef";

pub fn leasekit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_leasekit"))
}

/// A running `leasekit serve`; stopped with SIGTERM when dropped.
pub struct Server {
    child: Child,
    pub url: String,
    pub data_dir: PathBuf,
}

impl Server {
    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Serve on `data_dir` with the two test accounts' keys.
    pub fn start(data_dir: &Path) -> Self {
        Self::start_with(data_dir, &[])
    }

    /// Serve with the two test accounts' keys and `extra` arguments; AWS settings for a
    /// `--dynamodb-endpoint` that ignores credentials.
    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Self {
        Self::spawn(
            data_dir,
            extra,
            "warn,dynoxide=error",
            Stdio::inherit(),
            None,
        )
    }

    /// [`Server::start_with`], its open-file limit (soft and hard) set to `nofile`.
    pub fn start_with_open_files(data_dir: &Path, extra: &[&str], nofile: u64) -> Self {
        Self::spawn(data_dir, extra, "error", Stdio::inherit(), Some(nofile))
    }

    /// Serve with INFO logs written to `log` (for tests that read the logs).
    pub fn start_logged(data_dir: &Path, log: std::fs::File) -> Self {
        Self::start_logged_with(data_dir, &[], log)
    }

    /// Both: `extra` arguments and INFO logs written to `log`.
    pub fn start_logged_with(data_dir: &Path, extra: &[&str], log: std::fs::File) -> Self {
        Self::spawn(
            data_dir,
            extra,
            "info,dynoxide=error",
            Stdio::from(log),
            None,
        )
    }

    fn spawn(
        data_dir: &Path,
        extra: &[&str],
        log_level: &str,
        stderr: Stdio,
        nofile: Option<u64>,
    ) -> Self {
        let mut command = leasekit();
        if let Some(nofile) = nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit(2), async-signal-safe, between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: nofile,
                        rlim_max: nofile,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = command
            .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args([
                "--api-key",
                &format!("acme:{ACME_KEY}"),
                "--api-key",
                &format!("globex:{GLOBEX_KEY}"),
                "--admin-key",
                &format!("acme:{ACME_ADMIN_KEY}"),
            ])
            .args(extra)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("RUST_LOG", log_level)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start leasekit serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the URL");
        let url = line.trim().to_owned();
        assert!(
            url.starts_with("http://127.0.0.1:"),
            "first line is the URL, got {line:?}"
        );
        Self {
            child,
            url,
            data_dir: data_dir.to_owned(),
        }
    }

    /// SIGKILL: no shutdown, nothing flushed or finished.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and wait for a clean exit.
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        sigterm(self.child.id());
        let status = self.child.wait().expect("wait for leasekit");
        assert!(status.success(), "leasekit serve exited with {status}");
    }

    pub fn client(&self, key: Option<&str>) -> Client {
        Client::new(format!("{}/api/v1/lease", self.url), key)
    }
}

/// Send SIGTERM, as a service manager or Ctrl-C would.
pub fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Calls POST /api/v1/lease with an optional API key.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    pub url: String,
    key: Option<String>,
}

impl Client {
    pub fn new(url: String, key: Option<&str>) -> Self {
        Client {
            http: reqwest::Client::new(),
            url,
            key: key.map(str::to_owned),
        }
    }

    /// POST a raw body; answers (status, JSON body).
    pub async fn raw(&self, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(key) = &self.key {
            request = request.header("x-api-key", key);
        }
        let response = request.send().await.expect("HTTP round trip");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")),
        )
    }

    pub async fn call(&self, body: Value) -> (u16, Value) {
        self.raw(body.to_string()).await
    }

    /// A 200 answer's `data`.
    pub async fn data(&self, body: Value) -> Value {
        let (status, answer) = self.call(body).await;
        assert_eq!(status, 200, "{answer}");
        answer["data"].clone()
    }
}

/// A `leasekit serve` on a data dir of its own, removed with the `TempDir`.
pub fn serve() -> (tempfile::TempDir, Server) {
    let dir = tempfile::TempDir::new().unwrap();
    let server = Server::start(dir.path());
    (dir, server)
}

/// The rule ids of an answer's witnesses, in order.
pub fn rule_ids(data: &Value) -> Vec<String> {
    data["witnesses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["ruleId"].as_str().unwrap().to_owned())
        .collect()
}

pub fn acquire(tenant: &str, resource: &str, holder: &str) -> Value {
    json!({"op": "acquire", "tenantId": tenant, "resource": resource, "holder": holder})
}

pub fn get(tenant: &str, resource: &str) -> Value {
    json!({"op": "get", "tenantId": tenant, "resource": resource})
}

/// A DynamoDB endpoint for `--dynamodb-endpoint` tests: `LEASEKIT_TEST_DYNAMODB_ENDPOINT` (moto in
/// CI) if set, else a dynoxide HTTP server in this process, which `stop` shuts down.
pub struct Endpoint {
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), String>>>,
}

impl Endpoint {
    pub async fn start() -> Self {
        if let Ok(url) = std::env::var("LEASEKIT_TEST_DYNAMODB_ENDPOINT") {
            return Self {
                url,
                stop: None,
                task: None,
            };
        }
        Self::dynoxide().await
    }

    /// Always an in-process dynoxide, which the test can stop.
    pub async fn dynoxide() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let db = dynoxide::Database::memory().unwrap();
        let task = tokio::spawn(dynoxide::server::serve_with_shutdown(listener, db, async {
            let _ = stopped.await;
        }));
        Self {
            url,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Shut the endpoint down: from now on every store request fails.
    pub async fn stop(&mut self) {
        if let (Some(stop), Some(task)) = (self.stop.take(), self.task.take()) {
            let _ = stop.send(());
            task.await.unwrap().unwrap();
        }
    }
}

/// A table prefix no other test uses.
pub fn unique_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("t{nanos}-{}-", std::process::id())
}

/// An HTTP answer with the x402 headers decoded.
pub struct Answer {
    pub status: u16,
    pub body: Value,
    /// `PAYMENT-RESPONSE`, decoded.
    pub settlement: Option<Value>,
    /// `PAYMENT-REQUIRED`, decoded.
    pub required: Option<leasekit_core::x402::types::PaymentRequired>,
    pub retry_after: Option<String>,
}

/// POST `body` as JSON to `url` + `path` with extra `headers`.
pub async fn post(url: &str, path: &str, body: &Value, headers: &[(&str, String)]) -> Answer {
    use base64::Engine;
    let mut request = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.expect("HTTP round trip");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().expect("ASCII header").to_owned())
    };
    let decode = |name: &str| {
        header(name).map(|v| {
            base64::engine::general_purpose::STANDARD
                .decode(v)
                .expect("standard base64")
        })
    };
    let settlement = decode("PAYMENT-RESPONSE").map(|b| serde_json::from_slice(&b).expect("JSON"));
    let required =
        decode("PAYMENT-REQUIRED").map(|b| serde_json::from_slice(&b).expect("PaymentRequired"));
    let retry_after = header("retry-after");
    let status = response.status().as_u16();
    Answer {
        status,
        settlement,
        required,
        retry_after,
        body: response.json().await.expect("JSON body"),
    }
}

/// Unix seconds now.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A test wallet from a one-byte seed.
pub fn wallet(seed: u8) -> k256::ecdsa::SigningKey {
    k256::ecdsa::SigningKey::from_slice(&[seed; 32]).expect("a valid secp256k1 key")
}

/// A server with INFO logs in `<its dir>/server.log`, settling with a facilitator in `mode`:
/// the server, its directory and the log's path.
pub async fn logged_with_facilitator(
    mode: facilitator::Mode,
) -> (Server, tempfile::TempDir, PathBuf) {
    let (url, _seen) = facilitator::start(mode).await;
    let dir = tempfile::TempDir::new().expect("a temporary directory");
    let log = dir.path().join("server.log");
    let server = Server::start_logged_with(
        dir.path(),
        &["--facilitator-url", &url],
        std::fs::File::create(&log).expect("the log file"),
    );
    (server, dir, log)
}

/// The ids of the request spans (`request{id=…}`) of the log lines that contain `needle`, in
/// order; panics on such a line outside a request's span.
pub fn span_ids(log: &str, needle: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(needle))
        .map(|l| {
            let (_, rest) = l
                .split_once("request{id=")
                .unwrap_or_else(|| panic!("no span: {l}"));
            rest.split('}').next().unwrap_or_default().to_owned()
        })
        .collect()
}

/// A running `leasekit local-aws` (DynamoDB on the embedded store, in `dir`); killed when dropped.
pub struct LocalAws {
    child: Child,
    pub url: String,
}

impl Drop for LocalAws {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn local_aws(dir: &Path) -> LocalAws {
    let mut child = leasekit()
        .args(["local-aws", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    LocalAws {
        child,
        url: line.trim().to_owned(),
    }
}
