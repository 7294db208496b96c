//! Acquire+release cycles against a lock service, with many clients on loopback, for comparing
//! leasekit with what users run instead. Every system gets the same client loop, one connection
//! per client, and the same accounting; only the two requests of a cycle differ (see `systems`).
//!
//! A cycle is one acquire attempt and, when it was granted, the release of that lease. Clients
//! run cycles back to back. On distinct resources every attempt is granted; on one contended
//! resource a refused client tries again at once. Printed as one JSON object:
//! `granted_per_s` counts granted cycles (the lock changing hands), `attempts_per_s` every cycle,
//! and the latency percentiles are of cycles. Nothing passes or fails on these figures.
//!
//! `cargo run --release -p loadgen -- --system redis --url redis://127.0.0.1:6379 --clients 16`
//! (bench/versus.py starts the servers and runs every scenario).

mod http;
mod resp;
mod systems;

use clap::{Parser, ValueEnum};
use std::time::{Duration, Instant};
use systems::Session;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum System {
    Leasekit,
    Etcd,
    Redis,
}

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, value_enum)]
    system: System,
    /// leasekit: its base URL; etcd: its client URL (JSON gateway); redis: redis://host:port.
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// All clients on one resource instead of one resource each.
    #[arg(long)]
    contended: bool,
    /// Holders of a resource at once: above 1, a semaphore (see `systems` for each system's).
    #[arg(long, default_value_t = 1)]
    limit: u32,
    /// Acquires wait their turn instead of being refused (leasekit's waitSeconds, etcd's lock
    /// recipe); every cycle is then granted, in order of arrival.
    #[arg(long)]
    wait: bool,
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Cycles in this first part of the run are not counted.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// leasekit only: the API key and its account (`leasekit serve --api-key ACCOUNT:KEY`).
    #[arg(long, default_value = "bench-key-0123456789abcdef")]
    api_key: String,
    #[arg(long, default_value = "bench")]
    tenant: String,
    /// Tells runs apart, so that a rerun against the same server starts on fresh resources.
    #[arg(long, default_value = "run")]
    label: String,
    /// leasekit only: every acquire and release carries a requestId of its own (recorded and
    /// replayable: the path the README tells callers to take).
    #[arg(long)]
    request_ids: bool,
    /// Instead of cycles: acquire this many resources (`LABEL-f0` ...), spread over the clients,
    /// and keep them (they lapse after their ttl; their items stay): a store of that size for
    /// bench/growth.py. Prints how long it took.
    #[arg(long)]
    fill: Option<u64>,
}

/// What one client measured.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    granted: u64,
    errors: u64,
}

async fn client(args: &Args, id: usize, start: Instant) -> Result<Tally, String> {
    let resource = if args.contended {
        format!("{}-hot", args.label)
    } else {
        format!("{}-r{id}", args.label)
    };
    let holder = format!("client-{id}");
    let mut session = Session::connect(args, &holder, id).await?;
    let counted_from = start + Duration::from_secs_f64(args.warmup);
    let end = counted_from + Duration::from_secs_f64(args.seconds);
    let mut tally = Tally::default();
    loop {
        let began = Instant::now();
        if began >= end {
            return Ok(tally);
        }
        let outcome = match session.acquire(&resource).await {
            Ok(Some(token)) => session.release(&resource, token).await.map(|()| true),
            Ok(None) => Ok(false),
            Err(e) => Err(e),
        };
        if began < counted_from {
            continue;
        }
        match outcome {
            Ok(granted) => {
                tally.granted += u64::from(granted);
                let us = began.elapsed().as_micros();
                tally
                    .latencies_us
                    .push(u32::try_from(us).unwrap_or(u32::MAX));
            }
            Err(e) => {
                tally.errors += 1;
                if tally.errors == 1 {
                    eprintln!("loadgen: client {id}: {e}");
                }
            }
        }
    }
}

/// Acquire `LABEL-f{i}` for every `i` below `total` this client is dealt (every `clients`-th).
async fn fill(args: &Args, id: usize, total: u64) -> Result<Tally, String> {
    let holder = format!("filler-{id}");
    let mut session = Session::connect(args, &holder, id).await?;
    let mut tally = Tally::default();
    let mut i = id as u64;
    while i < total {
        match session.acquire(&format!("{}-f{i}", args.label)).await {
            Ok(granted) => tally.granted += u64::from(granted.is_some()),
            Err(e) => {
                tally.errors += 1;
                if tally.errors == 1 {
                    eprintln!("loadgen: filler {id}: {e}");
                }
            }
        }
        i += args.clients as u64;
    }
    Ok(tally)
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1]) / 1000.0
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: &'static Args = Box::leak(Box::new(Args::parse()));
    let start = Instant::now();
    let tasks: Vec<_> = (0..args.clients)
        .map(|id| match args.fill {
            Some(total) => tokio::spawn(fill(args, id, total)),
            None => tokio::spawn(client(args, id, start)),
        })
        .collect();
    let mut all = Tally::default();
    for task in tasks {
        match task.await {
            Ok(Ok(t)) => {
                all.latencies_us.extend(t.latencies_us);
                all.granted += t.granted;
                all.errors += t.errors;
            }
            Ok(Err(e)) => {
                eprintln!("loadgen: {e}");
                return std::process::ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("loadgen: a client failed: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    if let Some(total) = args.fill {
        let report = serde_json::json!({
            "filled": total,
            "granted": all.granted,
            "seconds": start.elapsed().as_secs_f64(),
            "errors": all.errors,
        });
        println!("{report}");
        return std::process::ExitCode::SUCCESS;
    }
    all.latencies_us.sort_unstable();
    let seconds = args.seconds;
    let report = serde_json::json!({
        "system": format!("{:?}", args.system).to_lowercase(),
        "clients": args.clients,
        "contended": args.contended,
        "limit": args.limit,
        "seconds": seconds,
        "granted_per_s": all.granted as f64 / seconds,
        "attempts_per_s": all.latencies_us.len() as f64 / seconds,
        "p50_ms": percentile(&all.latencies_us, 50.0),
        "p99_ms": percentile(&all.latencies_us, 99.0),
        "errors": all.errors,
    });
    println!("{report}");
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_are_nearest_rank_in_milliseconds() {
        let us: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile(&us, 50.0), 50.0);
        assert_eq!(percentile(&us, 99.0), 99.0);
        assert_eq!(percentile(&us, 100.0), 100.0);
        assert_eq!(percentile(&[7000], 99.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }
}
