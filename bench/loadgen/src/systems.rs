//! The two requests of a cycle, for each system, each in the form its users would pick.
//!
//! - leasekit: `POST /api/v1/lease` acquire, then release with the fencing token (API key).
//! - etcd (v3 JSON gateway): one lease per client, granted once; acquire is a transaction that
//!   puts the key under that lease if the key does not exist, and the revision it committed at is
//!   the fencing token; release is a transaction that deletes the key if it was created at that
//!   revision.
//! - Redis: acquire is a script that refuses if the key exists, else INCRs the resource's token
//!   counter and SETs the key to `holder token` with PX; release is a script that DELs the key if
//!   it still holds `holder token`. One round trip each, atomic, as scripts are.
//!
//! With `--limit N` (a semaphore, N holders at once), each in its nearest equivalent:
//! - leasekit: the same calls with `limit`; each permit has its own fencing token.
//! - Waiting (`--wait`): leasekit's acquire with `waitSeconds`; etcd's lock recipe (`/v3/lock/lock`
//!   under the client's lease, `/v3/lock/unlock`), the lock's revision as the token; Redis has
//!   none.
//! - etcd has no semaphore; its users keep N slot keys: an acquire tries the slots one
//!   transaction each (create if absent, under the client's lease), from a slot of its own, until
//!   one is taken or all N refused; the token is the revision, unique per grant.
//! - Redis: the expirable-permit pattern (Redisson's `PermitExpirableSemaphore`, redis-semaphore):
//!   one script drops lapsed permits from a sorted set scored by expiry, refuses when `limit` are
//!   left, else adds `holder token` with a token from INCR; release is a ZREM of that member.

use crate::{Args, System, http, resp};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hyper::body::Bytes;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const TTL_SECONDS: u32 = 30;

const REDIS_ACQUIRE: &str = "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end \
local t = redis.call('INCR', KEYS[2]) \
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. t, 'PX', ARGV[2]) \
return t";

const REDIS_SEMAPHORE_ACQUIRE: &str = "local now = redis.call('TIME') \
local ms = now[1] * 1000 + math.floor(now[2] / 1000) \
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms) \
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end \
local t = redis.call('INCR', KEYS[2]) \
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[1] .. ' ' .. t) \
return t";

const REDIS_SEMAPHORE_RELEASE: &str = "return redis.call('ZREM', KEYS[1], ARGV[1])";

const REDIS_RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
return redis.call('DEL', KEYS[1]) end return 0";

pub enum Session {
    Leasekit {
        conn: http::Connection,
        tenant: String,
        holder: String,
        limit: u32,
        /// `--wait`: each acquire waits in the resource's queue (waitSeconds) until granted.
        wait: bool,
        /// `--request-ids`: the run's label and the calls made so far, which name each call's
        /// requestId.
        request_ids: Option<(String, u64)>,
    },
    Etcd {
        conn: http::Connection,
        lease: String,
        holder: String,
        slots: Slots,
        /// `--wait`: etcd's lock recipe (its v3lock service: a key under the lock's prefix,
        /// granted when every older key is gone, first come first served), and the key it holds.
        wait: Option<String>,
    },
    Redis {
        conn: resp::Connection,
        acquire: Vec<u8>,
        release: Vec<u8>,
        holder: String,
        limit: u32,
    },
}

/// etcd's slot keys of a semaphore: how many, where this client starts, the one it holds.
pub struct Slots {
    limit: usize,
    first: usize,
    held: usize,
}

impl Slots {
    /// The key of `slot` of `resource` (limit 1: the lock's one key).
    fn key(&self, resource: &str, slot: usize) -> String {
        if self.limit == 1 {
            BASE64.encode(format!("lock/{resource}"))
        } else {
            BASE64.encode(format!("lock/{resource}/{slot}"))
        }
    }
}

/// The fields of an answer that a cycle needs, read as the types below name them; the rest is
/// skipped, not built. A client that wants two fields reads two fields: built whole as a
/// `serde_json::Value`, leasekit's signed answer (2.5 KB) cost this load generator 40% more CPU
/// per cycle than etcd's answers did, on the cores it shares with the server (BENCHMARKS.md).
/// A status other than 2xx is an error, with the answer.
fn read<T: DeserializeOwned>(what: &str, (status, bytes): (u16, Bytes)) -> Result<T, String> {
    let text = || String::from_utf8_lossy(&bytes).into_owned();
    if !(200..300).contains(&status) {
        return Err(format!("{what}: {status} {}", text()));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("{what}: {status}, {e}: {}", text()))
}

#[derive(Deserialize)]
struct LeasekitAnswer {
    data: LeasekitData,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeasekitData {
    granted: bool,
    fencing_token: Option<u64>,
}

#[derive(Deserialize)]
struct EtcdLease {
    #[serde(rename = "ID")]
    id: String,
}

#[derive(Deserialize)]
struct EtcdTxn {
    header: EtcdHeader,
    /// proto3 JSON leaves out false.
    #[serde(default)]
    succeeded: bool,
}

#[derive(Deserialize)]
struct EtcdLocked {
    header: EtcdHeader,
    key: String,
}

#[derive(Deserialize)]
struct EtcdHeader {
    revision: EtcdInt,
}

/// etcd's gateway sends 64-bit integers as strings.
#[derive(Deserialize)]
#[serde(untagged)]
enum EtcdInt {
    Text(String),
    Number(u64),
}

impl EtcdInt {
    fn get(&self) -> Result<u64, String> {
        match self {
            Self::Text(text) => text.parse().map_err(|_| format!("not an integer: {text}")),
            Self::Number(n) => Ok(*n),
        }
    }
}

impl Session {
    pub async fn connect(args: &Args, holder: &str, id: usize) -> Result<Self, String> {
        let holder = holder.to_owned();
        Ok(match args.system {
            System::Leasekit => Self::Leasekit {
                conn: http::Connection::open(&args.url, vec![("x-api-key", args.api_key.clone())])
                    .await?,
                tenant: args.tenant.clone(),
                holder,
                limit: args.limit.max(1),
                wait: args.wait,
                request_ids: args.request_ids.then(|| (args.label.clone(), 0)),
            },
            System::Etcd => {
                let mut conn = http::Connection::open(&args.url, Vec::new()).await?;
                let granted = conn
                    .post("/v3/lease/grant", &json!({"TTL": TTL_SECONDS * 20}))
                    .await?;
                let lease = read::<EtcdLease>("etcd lease grant", granted)?.id;
                let limit = args.limit.max(1) as usize;
                if args.wait && limit > 1 {
                    return Err(
                        "etcd's lock recipe has no semaphore: --wait takes --limit 1".into(),
                    );
                }
                Self::Etcd {
                    conn,
                    lease,
                    holder,
                    slots: Slots {
                        limit,
                        first: id % limit,
                        held: 0,
                    },
                    wait: args.wait.then(String::new),
                }
            }
            System::Redis if args.wait => {
                return Err("Redis has no waiting lock: its nearest is the retry loop".into());
            }
            System::Redis => {
                let mut conn = resp::Connection::open(&args.url).await?;
                let mut load = async |script: &str| match conn
                    .command(&[b"SCRIPT", b"LOAD", script.as_bytes()])
                    .await?
                {
                    resp::Reply::Bulk(Some(sha)) => Ok(sha),
                    other => Err(format!("SCRIPT LOAD: {other:?}")),
                };
                let (acquire, release) = match args.limit {
                    0 | 1 => (REDIS_ACQUIRE, REDIS_RELEASE),
                    _ => (REDIS_SEMAPHORE_ACQUIRE, REDIS_SEMAPHORE_RELEASE),
                };
                let acquire = load(acquire).await?;
                let release = load(release).await?;
                Self::Redis {
                    conn,
                    acquire,
                    release,
                    holder,
                    limit: args.limit,
                }
            }
        })
    }

    /// The fencing token if granted; `None` if someone else holds the resource.
    pub async fn acquire(&mut self, resource: &str) -> Result<Option<u64>, String> {
        match self {
            Self::Leasekit {
                conn,
                tenant,
                holder,
                limit,
                wait,
                request_ids,
            } => {
                let mut body = json!({"op": "acquire", "tenantId": tenant, "resource": resource,
                    "holder": holder, "ttlSeconds": TTL_SECONDS, "limit": limit});
                if *wait {
                    body["waitSeconds"] = json!(20);
                }
                name_call(&mut body, holder, request_ids);
                let answer = leasekit(conn, &body).await?;
                match (answer.granted, answer.fencing_token) {
                    (true, Some(token)) => Ok(Some(token)),
                    (true, None) => Err("leasekit: granted without a fencingToken".into()),
                    (false, _) => Ok(None),
                }
            }
            Self::Etcd {
                conn,
                lease,
                wait: Some(held),
                ..
            } => {
                let name = BASE64.encode(format!("lock/{resource}"));
                let body = json!({"name": name, "lease": lease});
                let locked: EtcdLocked =
                    read("etcd lock", conn.post("/v3/lock/lock", &body).await?)?;
                *held = locked.key;
                Ok(Some(locked.header.revision.get()?))
            }
            Self::Etcd {
                conn,
                lease,
                holder,
                slots,
                wait: None,
            } => {
                for i in 0..slots.limit {
                    let slot = (slots.first + i) % slots.limit;
                    let key = slots.key(resource, slot);
                    let body = json!({
                        "compare": [{"key": key, "target": "CREATE", "create_revision": "0"}],
                        "success": [{"request_put": {"key": key, "value": BASE64.encode(&*holder), "lease": lease}}],
                    });
                    let answer: EtcdTxn = read("etcd txn", conn.post("/v3/kv/txn", &body).await?)?;
                    if answer.succeeded {
                        slots.held = slot;
                        return Ok(Some(answer.header.revision.get()?));
                    }
                }
                Ok(None)
            }
            Self::Redis {
                conn,
                acquire,
                holder,
                limit,
                ..
            } => {
                let ttl_ms = (TTL_SECONDS * 1000).to_string();
                let token_key = format!("{resource}:token");
                let limit = limit.to_string();
                let reply = conn
                    .command(&[
                        b"EVALSHA",
                        acquire,
                        b"2",
                        resource.as_bytes(),
                        token_key.as_bytes(),
                        holder.as_bytes(),
                        ttl_ms.as_bytes(),
                        limit.as_bytes(),
                    ])
                    .await?;
                match reply {
                    resp::Reply::Integer(0) => Ok(None),
                    resp::Reply::Integer(t) => Ok(Some(t.unsigned_abs())),
                    other => Err(format!("acquire: {other:?}")),
                }
            }
        }
    }

    pub async fn release(&mut self, resource: &str, token: u64) -> Result<(), String> {
        let released = match self {
            Self::Leasekit {
                conn,
                tenant,
                holder,
                request_ids,
                ..
            } => {
                let mut body = json!({"op": "release", "tenantId": tenant, "resource": resource,
                    "holder": holder, "token": token});
                name_call(&mut body, holder, request_ids);
                leasekit(conn, &body).await?.granted
            }
            Self::Etcd {
                conn,
                wait: Some(held),
                ..
            } => {
                let (status, _) = conn.post("/v3/lock/unlock", &json!({"key": held})).await?;
                status == 200
            }
            Self::Etcd { conn, slots, .. } => {
                let key = slots.key(resource, slots.held);
                let body = json!({
                    "compare": [{"key": key, "target": "CREATE", "create_revision": token.to_string()}],
                    "success": [{"request_delete_range": {"key": key}}],
                });
                read::<EtcdTxn>("etcd txn", conn.post("/v3/kv/txn", &body).await?)?.succeeded
            }
            Self::Redis {
                conn,
                release,
                holder,
                ..
            } => {
                let value = format!("{holder} {token}");
                let reply = conn
                    .command(&[
                        b"EVALSHA",
                        release,
                        b"1",
                        resource.as_bytes(),
                        value.as_bytes(),
                    ])
                    .await?;
                reply == resp::Reply::Integer(1)
            }
        };
        if released {
            Ok(())
        } else {
            Err(format!("release of {resource} (token {token}) refused"))
        }
    }
}

/// With `--request-ids`, a requestId for the call `body`: the run's label, the holder, and the
/// holder's count of calls, so that no two calls of any run share one.
fn name_call(body: &mut Value, holder: &str, request_ids: &mut Option<(String, u64)>) {
    if let Some((label, calls)) = request_ids {
        *calls += 1;
        body["requestId"] = json!(format!("{label}-{holder}-{calls}"));
    }
}

async fn leasekit(conn: &mut http::Connection, body: &Value) -> Result<LeasekitData, String> {
    let answer: LeasekitAnswer = read("leasekit", conn.post("/api/v1/lease", body).await?)?;
    Ok(answer.data)
}
