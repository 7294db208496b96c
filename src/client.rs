//! `leasekit acquire|renew|release|get|check|revoke|list|audit`: the lease API from scripts and
//! terminals. The answer's JSON goes to stdout (a short text view instead when stdout is a
//! terminal, unless `--json`); the exit code says what happened: 0 the answer's status is pass (granted; get:
//! answered; check: current), 1 fail (a rule stopped it: held by another, lapsed, wrong token,
//! not current), 2 an error (see stderr).
//!
//! `--resource` given several times names a set (all or nothing); renew and release of a set
//! take a `--token` for each `--resource`, in the same order.

use crate::text_view;
use anyhow::{Context, Result};
use clap::Args;
use leasekit_client::Client;
use leasekit_core::clock::now_ms;
use leasekit_core::lease::Op;
use leasekit_core::lease::ops::Field;
use serde_json::{Value, json};

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
    pub api_key: Option<String>,
    /// Tenant id inside your account.
    #[arg(long, env = "LEASEKIT_TENANT", default_value = "default")]
    pub tenant: String,
    /// Your worker id (default: host name and process id).
    #[arg(long, env = "LEASEKIT_HOLDER")]
    pub holder: Option<String>,
}

impl Connection {
    pub fn client(&self) -> Result<Client> {
        let Some(key) = &self.api_key else {
            anyhow::bail!(
                "no API key: pass --api-key or set LEASEKIT_API_KEY (make one with \
                 `leasekit keys create --account NAME` on the server's data dir)"
            );
        };
        Client::with_api_key(&self.url, key, &self.tenant)
            .with_context(|| format!("--url {} (LEASEKIT_URL)", self.url))
    }

    /// `body` sent with `client`; a failure names the URL it was sent to.
    pub async fn send(&self, client: &Client, body: Value) -> Result<Value> {
        client.send(body).await.with_context(|| {
            format!(
                "calling {}/api/v1/lease (--url or LEASEKIT_URL)",
                self.url.trim_end_matches('/')
            )
        })
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
    /// The resource, e.g. deploy:prod; several (2-50) for a set, all or nothing.
    #[arg(long)]
    pub resource: Vec<String>,
    /// Lease length in seconds (acquire, renew).
    #[arg(long)]
    pub ttl: Option<u32>,
    /// Fencing token (renew, release, check); one for each --resource of a set.
    #[arg(long)]
    pub token: Vec<u64>,
    /// Holders allowed at once (acquire; 1-64, default 1): a semaphore, a token each.
    #[arg(long)]
    pub limit: Option<u32>,
    /// Seconds to wait in the resource's queue if it is held (acquire of one resource; 0-20).
    #[arg(long)]
    pub wait: Option<u32>,
    /// Why (revoke; 1-200 characters, kept in the audit entry).
    #[arg(long)]
    pub reason: Option<String>,
    /// Makes a retry of this call safe (one is made up otherwise).
    #[arg(long)]
    pub request_id: Option<String>,
    /// acquire: in this session (from `leasekit session open`), instead of --ttl: the permit
    /// lives as long as the session. get: show the session instead of a resource. revoke: end
    /// the session and every permit in it (an admin key).
    #[arg(long)]
    pub session: Option<String>,
    /// The holder's note kept with its permit (acquire, renew; 0-1024 bytes): a leader's address.
    #[arg(long)]
    pub value: Option<String>,
    /// Print the whole signed JSON answer on a terminal too (it always goes to pipes and files).
    #[arg(long)]
    pub json: bool,
}

/// `leasekit session ...`: one heartbeat for many holds (docs/adr/0010).
#[derive(clap::Subcommand)]
pub enum SessionCommand {
    /// Open a session (--ttl, default 30 s): prints it; its id is data.session.id.
    Open(SessionCall),
    /// Keep a session alive for --ttl more seconds (default: its own), every permit in it too.
    /// Exit 1: it has ended (its permits are free), or is another holder's.
    Keepalive(SessionCall),
    /// Close a session: every permit in it ends now, its waiters are served.
    Close(SessionCall),
    /// Show a session and its permits (exit 1: ended or unknown).
    Get(SessionCall),
}

/// One call on a session.
#[derive(Args)]
pub struct SessionCall {
    #[command(flatten)]
    pub connection: Connection,
    /// The session's id (keepalive, close, get).
    #[arg(long)]
    pub session: Option<String>,
    /// Seconds (open: its length, default 30; keepalive: from now, default its own).
    #[arg(long)]
    pub ttl: Option<u32>,
    /// Makes a retry of this call safe.
    #[arg(long)]
    pub request_id: Option<String>,
    /// Print the whole signed JSON answer on a terminal too (it always goes to pipes and files).
    #[arg(long)]
    pub json: bool,
}

/// Run one session command; print the answer; exit 0 when it did what was asked (get: the
/// session lives), 1 when not.
pub async fn session(command: SessionCommand) -> Result<u8> {
    let (op, call) = match command {
        SessionCommand::Open(call) => (Op::Open, call),
        SessionCommand::Keepalive(call) => (Op::Keepalive, call),
        SessionCommand::Close(call) => (Op::Close, call),
        SessionCommand::Get(call) => (Op::Get, call),
    };
    let client = call.connection.client()?;
    let mut body = json!({"op": op.as_str()});
    if op.spec().holder == Field::Required {
        body["holder"] = json!(call.connection.holder());
    }
    match (&call.session, op) {
        (None, Op::Open) => {}
        (Some(_), Op::Open) => anyhow::bail!("open makes a new session: no --session"),
        (Some(id), _) => body["session"] = json!(id),
        (None, _) => anyhow::bail!("--session is required (the id open printed)"),
    }
    if let Some(ttl) = call.ttl {
        body["ttlSeconds"] = json!(ttl);
    }
    if let Some(id) = &call.request_id {
        body["requestId"] = json!(id);
    }
    let answer = call.connection.send(&client, body).await?;
    show(&answer, call.json, |a| {
        text_view::answer(op, &[], a, now_ms())
    });
    Ok(if answer["data"]["granted"] == true {
        EXIT_GRANTED
    } else {
        EXIT_NOT_GRANTED
    })
}

/// One page of `list` or `audit`.
#[derive(Args)]
pub struct Page {
    #[command(flatten)]
    pub connection: Connection,
    /// list: only resources whose names start with this.
    #[arg(long)]
    pub prefix: Option<String>,
    /// audit: only this resource's entries.
    #[arg(long)]
    pub resource: Option<String>,
    /// The nextCursor of the page before.
    #[arg(long)]
    pub cursor: Option<String>,
    /// Entries per page (1-100, default 50).
    #[arg(long)]
    pub page_size: Option<u32>,
    /// Print the whole signed JSON answer on a terminal too (it always goes to pipes and files).
    #[arg(long)]
    pub json: bool,
}

/// Print `answer`: as `view` has it for a person at a terminal, as JSON with `--json` or to
/// pipes and files. JSON on a terminal has what a terminal would act on escaped (the same value).
fn show(answer: &Value, json: bool, view: impl FnOnce(&Value) -> String) {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    match (terminal, json) {
        (true, false) => print!("{}", view(answer)),
        (true, true) => println!("{}", crate::inert::inert_json(&answer.to_string())),
        (false, _) => println!("{answer}"),
    }
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

/// The request body of `call` for `op`: what the op table says the op takes, the service
/// checks the rest (a 400 naming the field).
fn body(op: Op, call: &Call) -> Result<serde_json::Value> {
    let spec = op.spec();
    let mut body = json!({"op": op.as_str()});
    match (call.resource.as_slice(), call.token.as_slice()) {
        // get and revoke of a session name no resource.
        ([], _) if matches!(op, Op::Get | Op::Revoke) && call.session.is_some() => {}
        ([], _) => anyhow::bail!("--resource is required"),
        ([one], tokens) => {
            body["resource"] = json!(one);
            if let [token] = tokens {
                body["token"] = json!(token);
            } else if !tokens.is_empty() {
                anyhow::bail!("one --token for one --resource");
            }
        }
        (set, []) if op == Op::Acquire => body["resources"] = json!(set),
        (set, tokens) if set.len() == tokens.len() && spec.token == Field::Required => {
            let leases: Vec<_> = set
                .iter()
                .zip(tokens)
                .map(|(resource, token)| json!({"resource": resource, "token": token}))
                .collect();
            body["leases"] = json!(leases);
        }
        _ => anyhow::bail!(
            "a set: acquire takes several --resource; renew and release a --token for each"
        ),
    }
    // A holder the op requires defaults to this process; one it may take is sent if given.
    match spec.holder {
        Field::Required => body["holder"] = json!(call.connection.holder()),
        Field::Optional => {
            if let Some(holder) = &call.connection.holder {
                body["holder"] = json!(holder);
            }
        }
        Field::Ignored | Field::Unused => {}
    }
    if let Some(ttl) = call.ttl {
        body["ttlSeconds"] = json!(ttl);
    }
    if let Some(limit) = call.limit {
        body["limit"] = json!(limit);
    }
    if let Some(wait) = call.wait {
        body["waitSeconds"] = json!(wait);
    }
    if let Some(reason) = &call.reason {
        body["reason"] = json!(reason);
    }
    if let Some(id) = &call.request_id {
        body["requestId"] = json!(id);
    }
    if let Some(session) = &call.session {
        body["session"] = json!(session);
    }
    if let Some(value) = &call.value {
        body["value"] = json!(value);
    }
    Ok(body)
}

/// Print one page of list or audit (`data.nextCursor` continues it).
pub async fn page(op: Op, page: Page) -> Result<u8> {
    let client = page.connection.client()?;
    let mut body = json!({"op": op.as_str()});
    for (name, value) in [
        ("prefix", &page.prefix),
        ("resource", &page.resource),
        ("cursor", &page.cursor),
    ] {
        if let Some(value) = value {
            body[name] = json!(value);
        }
    }
    if let Some(size) = page.page_size {
        body["pageSize"] = json!(size);
    }
    let answer = page.connection.send(&client, body).await?;
    show(&answer, page.json, |a| text_view::page(op, a, now_ms()));
    Ok(EXIT_GRANTED)
}

/// Run one of acquire, renew, release, get, check; print the answer; the exit code.
pub async fn run(op: Op, call: Call) -> Result<u8> {
    let client = call.connection.client()?;
    let answer = call.connection.send(&client, body(op, &call)?).await?;
    show(&answer, call.json, |a| {
        text_view::answer(op, &call.resource, a, now_ms())
    });
    // pass: granted, answered (get) or current (check).
    Ok(if answer["data"]["status"] == "pass" {
        EXIT_GRANTED
    } else {
        EXIT_NOT_GRANTED
    })
}

/// `leasekit watch`: one line per change of a resource.
#[derive(Args)]
pub struct Watch {
    #[command(flatten)]
    pub connection: Connection,
    /// The resource to watch.
    #[arg(long)]
    pub resource: String,
    /// Stop after this many lines (the first is the resource as it stands).
    #[arg(long)]
    pub changes: Option<u64>,
}

/// Print the resource as it stands, then again each time its state changes (holders, tokens,
/// values; a renew that only moves an expiry is no change): one JSON line each, the signed
/// answer's `data`, from watches of up to 20 s chained on their `stateTag`. Runs until
/// interrupted, or `--changes` lines.
pub async fn watch(args: Watch) -> Result<u8> {
    let client = args.connection.client()?;
    let mut tag: Option<String> = None;
    let mut printed = 0;
    while args.changes.is_none_or(|most| printed < most) {
        let mut body = json!({"op": "watch", "resource": args.resource, "waitSeconds": 20});
        if let Some(tag) = &tag {
            body["stateTag"] = json!(tag);
        }
        let answer = args.connection.send(&client, body).await?;
        let data = &answer["data"];
        if data["changed"] == true {
            println!("{data}");
            printed += 1;
        }
        tag = data["stateTag"].as_str().map(str::to_owned);
    }
    Ok(EXIT_GRANTED)
}
