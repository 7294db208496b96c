//! `leasekit acquire|renew|release|get`: the lease API from scripts. The answer's JSON goes to
//! stdout; the exit code says what happened: 0 granted (get: answered), 1 not granted (a rule
//! stopped it: held by another, lapsed, wrong token), 2 an error (see stderr).

use anyhow::Result;
use clap::Args;
use leasekit_client::Client;
use leasekit_core::lease::Op;
use leasekit_core::lease::ops::Field;
use serde_json::json;

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

impl Connection {
    pub fn client(&self) -> Result<Client> {
        Ok(Client::with_api_key(
            &self.url,
            &self.api_key,
            &self.tenant,
        )?)
    }

    pub fn holder(&self) -> String {
        self.holder.clone().unwrap_or_else(default_holder)
    }
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
    /// Makes a retry of this call safe (one is made up otherwise).
    #[arg(long)]
    pub request_id: Option<String>,
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

/// Run one of acquire, renew, release, get; print the answer; the exit code.
pub async fn run(op: Op, call: Call) -> Result<u8> {
    let client = call.connection.client()?;
    let mut body = json!({"op": op.as_str(), "resource": call.resource});
    if op.spec().holder != Field::Unused {
        body["holder"] = json!(call.connection.holder());
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
    let answer = client.send(body).await?;
    println!("{answer}");
    let granted = answer["data"]["granted"].as_bool().unwrap_or(false);
    // A read's answer is what was asked: it succeeded whoever holds the lease.
    Ok(if granted || !op.writes() {
        EXIT_GRANTED
    } else {
        EXIT_NOT_GRANTED
    })
}
