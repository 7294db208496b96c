//! Sessions with real agents (issue #43): 8 agent processes, each holding 10 resources in a
//! session it keeps alive with `leasekit session keepalive`, and a waiter on every resource.
//! Half the agents are killed with SIGKILL at random moments (their whole process group, so no
//! call of theirs finishes after); the others close their sessions. Then:
//! - no resource has two holders: a waiter is granted only after the agent's session ended (its
//!   grant, in server time, is past the end the agent's last keepalive was told; a live agent's
//!   only after its close);
//! - every dead agent's resources reach their waiters within the session's ttl + 1 s of the kill;
//! - tokens never repeat: each waiter's token is one above the agent's.

mod support;

use leasekit_core::clock::parse_iso8601;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use support::{ACME_KEY, Server};

const AGENTS: usize = 8;
const EACH: usize = 10;
const TTL_S: u64 = 3;
const TENANT: &str = "agents";

/// An agent: opens a session, acquires its resources in it, says so, and keeps it alive for TTL
/// seconds every half second, writing each end it is told. Its calls are the CLI's, as a script's would be.
const AGENT: &str = r#"#!/usr/bin/env bash
set -u
log=$1; shift
# Long enough to take its resources one call at a time, however loaded the machine; from the
# first keepalive on, the session's ttl is $TTL.
out=$("$LEASEKIT_BIN" session open --ttl 60) || { echo "failed open" >> "$log"; exit 2; }
session=$(printf '%s' "$out" | sed -nE 's/.*"session":\{"id":"([a-z2-7]{26})".*/\1/p')
echo "session $session" >> "$log"
for resource in "$@"; do
  out=$("$LEASEKIT_BIN" acquire --resource "$resource" --session "$session") || { echo "failed $out" >> "$log"; exit 3; }
  token=$(printf '%s' "$out" | sed -nE 's/^[^}]*"fencingToken":([0-9]+).*/\1/p')
  echo "held $resource $token" >> "$log"
done
echo "ready" >> "$log"
while true; do
  out=$("$LEASEKIT_BIN" session keepalive --session "$session" --ttl "$TTL") || { echo "failed $out" >> "$log"; exit 4; }
  end=$(printf '%s' "$out" | sed -nE 's/.*"session":\{[^}]*"expiresAt":"([^"]+)".*/\1/p')
  echo "alive $end" >> "$log"
  sleep 0.5
done
"#;

struct Agent {
    name: String,
    child: Child,
    log: std::path::PathBuf,
    resources: Vec<String>,
}

impl Agent {
    /// SIGKILL to its whole process group: the script and any call it has running.
    fn kill(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// Whatever happens to the test, no agent outlives it.
impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

/// What an agent's log says: its session, its tokens by resource, the ends it was told.
#[derive(Default, Debug)]
struct Said {
    session: String,
    tokens: HashMap<String, u64>,
    ends: Vec<i64>,
    ready: bool,
}

fn said(log: &std::path::Path) -> Said {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut said = Said::default();
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["session", id] => said.session = (*id).to_owned(),
            ["held", resource, token] => {
                said.tokens
                    .insert((*resource).to_owned(), token.parse().unwrap());
            }
            ["ready"] => said.ready = true,
            ["alive", end] => said.ends.push(parse_iso8601(end).unwrap()),
            _ => {}
        }
    }
    said
}

/// A cheap random number, seeded from the clock: the seed is printed, to run a case again.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agents_killed_at_random_lose_every_hold_at_their_sessions_end_and_never_share_one() {
    let dir = tempfile::TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let script = dir.path().join("agent.sh");
    std::fs::write(&script, AGENT).unwrap();
    let seed = std::env::var("SESSION_AGENTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| (u64::from(std::process::id()) * 2_654_435_761) | 1);
    println!("seed {seed} (SESSION_AGENTS_SEED={seed} runs this case again)");
    let mut random = Random(seed);

    let mut agents: Vec<Agent> = (0..AGENTS)
        .map(|i| {
            let name = format!("agent-{i}");
            let resources: Vec<String> = (0..EACH).map(|j| format!("task-{i}-{j}")).collect();
            let log = dir.path().join(format!("{name}.log"));
            let child = Command::new("bash")
                .arg(&script)
                .arg(&log)
                .args(&resources)
                .env("LEASEKIT_BIN", env!("CARGO_BIN_EXE_leasekit"))
                .env("LEASEKIT_URL", &server.url)
                .env("LEASEKIT_API_KEY", ACME_KEY)
                .env("LEASEKIT_TENANT", TENANT)
                .env("LEASEKIT_HOLDER", &name)
                .env("TTL", TTL_S.to_string())
                // Its own process group: a kill ends the script and any call it has running.
                .process_group(0)
                .spawn()
                .expect("start an agent");
            Agent {
                name,
                child,
                log,
                resources,
            }
        })
        .collect();
    let started = Instant::now();
    // Ready: its resources taken, and its session kept alive once on the short ttl.
    let ready = |a: &Agent| {
        let said = said(&a.log);
        said.ready && !said.ends.is_empty()
    };
    while !agents.iter().all(ready) {
        if started.elapsed() > Duration::from_secs(60) {
            let logs: Vec<String> = agents
                .iter()
                .map(|a| std::fs::read_to_string(&a.log).unwrap_or_default())
                .collect();
            panic!("agents not ready: {logs:#?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A waiter on every resource: granted once the holder's session has ended.
    let client = server.client(Some(ACME_KEY));
    let waiters: Vec<_> = agents
        .iter()
        .flat_map(|a| a.resources.clone())
        .map(|resource| {
            let client = client.clone();
            tokio::spawn(async move {
                loop {
                    let body = json!({"op": "acquire", "tenantId": TENANT, "resource": resource,
                        "holder": "waiter", "ttlSeconds": 60, "waitSeconds": 20});
                    let data = client.data(body).await;
                    if data["granted"] == true {
                        return (resource, Instant::now(), data);
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    println!("{} waiters", agents.len() * EACH);

    // Kill half of them, at random moments over 3 s; close the others' sessions after.
    let mut order: Vec<usize> = (0..AGENTS).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, random.below(i as u64 + 1) as usize);
    }
    let killed: Vec<usize> = order[..AGENTS / 2].to_vec();
    let mut kills: Vec<(usize, u64)> = killed.iter().map(|&i| (i, random.below(3_000))).collect();
    kills.sort_by_key(|(_, at)| *at);
    let mut killed_at: HashMap<usize, Instant> = HashMap::new();
    let base = Instant::now();
    for (i, at) in kills {
        let due = base + Duration::from_millis(at);
        tokio::time::sleep_until(due.into()).await;
        agents[i].kill();
        killed_at.insert(i, Instant::now());
        println!("killed {} at {at} ms", agents[i].name);
    }
    tokio::time::sleep(Duration::from_secs(TTL_S + 2)).await;
    let mut closed_at: HashMap<usize, Instant> = HashMap::new();
    for (i, agent) in agents.iter_mut().enumerate() {
        if killed.contains(&i) {
            continue;
        }
        agent.kill();
        closed_at.insert(i, Instant::now());
        let session = said(&agent.log).session;
        let body =
            json!({"op": "close", "tenantId": TENANT, "session": session, "holder": agent.name});
        let closed = client.data(body).await;
        assert_eq!(closed["granted"], true, "{closed}");
    }

    let mut grants: HashMap<String, (Instant, Value)> = HashMap::new();
    for waiter in waiters {
        let (resource, at, data) = tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("every waiter is served")
            .unwrap();
        grants.insert(resource, (at, data));
    }
    let mut slowest = Duration::ZERO;
    for (i, agent) in agents.iter().enumerate() {
        let said = said(&agent.log);
        let last_end = *said.ends.iter().max().unwrap_or(&0);
        for resource in &agent.resources {
            let (at, data) = &grants[resource];
            let token = data["fencingToken"].as_u64().unwrap();
            assert_eq!(
                token,
                said.tokens[resource] + 1,
                "{resource}: the waiter's token is the next one"
            );
            let granted_at = parse_iso8601(data["expiresAt"].as_str().unwrap()).unwrap() - 60_000;
            match killed_at.get(&i) {
                Some(killed) => {
                    assert!(
                        granted_at >= last_end,
                        "{resource}: granted at {granted_at} while {}'s session lived until {last_end}",
                        agent.name
                    );
                    let after = at.duration_since(*killed);
                    slowest = slowest.max(after);
                    assert!(
                        after <= Duration::from_secs(TTL_S + 1),
                        "{resource}: served {after:?} after its holder was killed"
                    );
                }
                None => assert!(
                    *at >= closed_at[&i],
                    "{resource}: granted before {}'s session was closed",
                    agent.name
                ),
            }
        }
    }
    println!(
        "{} agents killed, {} closed; a dead agent's resources reached their waiters at most {slowest:?} after the kill (ttl {TTL_S} s)",
        killed.len(),
        AGENTS - killed.len()
    );
    server.stop();
}
