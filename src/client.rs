//! `leasekit acquire|renew|release|get`: the lease API from scripts. The answer's JSON goes to
//! stdout; the exit code says what happened: 0 granted (get: answered), 1 not granted (a rule
//! stopped it: held by another, lapsed, wrong token), 2 an error (see stderr).

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};
use shared::json_http::JsonHttp;
use std::time::Duration;

pub const EXIT_GRANTED: u8 = 0;
pub const EXIT_NOT_GRANTED: u8 = 1;

/// Where and who: flags or the LEASEKIT_* environment.
#[derive(Args, Clone)]
pub struct Connection {
    /// Base URL of the service.
    #[arg(long, env = "LEASEKIT_URL", default_value = "http://127.0.0.1:3000")]
    pub url: String,
    /// API key (X-API-KEY).
    #[arg(long, env = "LEASEKIT_API_KEY", hide_env_values = true)]
    pub api_key: String,
    /// Tenant id inside your account.
    #[arg(long, env = "LEASEKIT_TENANT", default_value = "default")]
    pub tenant: String,
    /// Your worker id (default: host name and process id).
    #[arg(long, env = "LEASEKIT_HOLDER")]
    pub holder: Option<String>,
}

/// One call to POST /api/v1/lease.
#[derive(Args)]
pub struct Call {
    #[command(flatten)]
    pub connection: Connection,
    /// The resource, e.g. deploy:prod.
    #[arg(long)]
    pub resource: String,
    /// Lease length in seconds (acquire, renew).
    #[arg(long)]
    pub ttl: Option<u32>,
    /// Fencing token (renew, release).
    #[arg(long)]
    pub token: Option<u64>,
    /// Makes a retry of this call safe.
    #[arg(long)]
    pub request_id: Option<String>,
}

/// A client of the lease API for one connection.
pub struct LeaseClient {
    http: JsonHttp,
    url: String,
    api_key: String,
    pub tenant: String,
    pub holder: String,
}

/// The default holder: host name and process id.
pub fn default_holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

impl LeaseClient {
    pub fn new(connection: &Connection) -> Result<Self> {
        Ok(Self {
            http: JsonHttp::new(Duration::from_secs(10)).map_err(|e| anyhow::anyhow!("{e}"))?,
            url: format!("{}/api/v1/lease", connection.url.trim_end_matches('/')),
            api_key: connection.api_key.clone(),
            tenant: connection.tenant.clone(),
            holder: connection.holder.clone().unwrap_or_else(default_holder),
        })
    }

    /// POST one lease op; the answer's `data` (a 200), or an error naming what the service said.
    pub async fn call(&self, mut body: Value) -> Result<Value> {
        body["tenantId"] = json!(self.tenant);
        let answer = self
            .http
            .post(&self.url, &[("x-api-key", self.api_key.as_str())], &body)
            .await
            .with_context(|| format!("calling {}", self.url))?;
        if answer.status != 200 {
            let message = answer.body["error"].as_str().unwrap_or("no error message");
            let code = answer.body["code"].as_str().unwrap_or("?");
            bail!("the service answered {} {code}: {message}", answer.status);
        }
        Ok(answer.body)
    }
}

/// Run one of acquire, renew, release, get; print the answer; the exit code.
pub async fn run(op: &str, call: Call) -> Result<u8> {
    let client = LeaseClient::new(&call.connection)?;
    let mut body = json!({"op": op, "resource": call.resource});
    if op != "get" {
        body["holder"] = json!(client.holder);
    }
    for (field, value) in [
        ("ttlSeconds", call.ttl.map(u64::from)),
        ("token", call.token),
    ] {
        if let Some(v) = value {
            body[field] = json!(v);
        }
    }
    if let Some(id) = call.request_id {
        body["requestId"] = json!(id);
    }
    let answer = client.call(body).await?;
    println!("{answer}");
    let granted = answer["data"]["granted"].as_bool().unwrap_or(false);
    Ok(if granted || op == "get" {
        EXIT_GRANTED
    } else {
        EXIT_NOT_GRANTED
    })
}
