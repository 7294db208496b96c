//! `leasekit run --resource R [--ttl 30] [--wait 0] [--grace G] [--done] -- CMD ARGS...`: `flock`,
//! across machines. `--candidates a,b,c` instead of `--resource` runs CMD on the first of them
//! that is free; `--done` marks the resource finished when CMD exits 0 (docs/adr/0012).
//!
//! Acquire the lease (waiting up to `--wait` seconds in the resource's first-come-first-served
//! queue if someone else holds it; with backoff on a server that has no queue), run
//! CMD with `LEASE_FENCING_TOKEN`, `LEASE_RESOURCE` and `LEASE_HOLDER` in its environment, renew
//! it while CMD runs, release it when CMD exits, and exit with CMD's code. CMD runs in its own
//! process group, so that stopping it stops what it started too.
//!
//! CMD is gone before anyone else can hold the lease: see [`TIMING`] (also in `--help`), even
//! when `run` is stopped or killed (the watchdog, src/watchdog.rs). Anything the command leaves
//! running in its process group is killed before the lease is released; processes that leave
//! the group, e.g. with setsid, are not tracked.

use crate::client::Connection;
use crate::process_group;
use crate::watchdog::Watchdog;
use anyhow::{Context, Result, bail};
use clap::Args;
use leasekit_client::{Ask, Claim, Client, Guard, safety_margin};
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// The lease was not obtained within `--wait`.
pub const EXIT_NOT_ACQUIRED: u8 = 75;
/// The lease was lost while CMD ran; CMD was stopped.
pub const EXIT_LEASE_LOST: u8 = 76;
/// The resource is finished (every candidate that is not held is): CMD did not run.
pub const EXIT_FINISHED: u8 = 77;

/// `--grace` when not given: this, or half the usable lease time if that is less.
const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// The arithmetic, for `--help` (the README's "Guard a command" says the same).
pub const TIMING: &str = "\
Timing. With T = --ttl and G = --grace, and S = when the last granted acquire or renew was
sent (the server handled it later, so its lease lasts at least until S + T):
  U = T - (T/100 + 0.25 s)   the usable lease time; the margin covers clocks running at
                             different rates, late timers and the time to stop CMD
  S + (U - G)/3              the next renewal is sent; retried, each call bounded by the
                             time left, until S + U
  S + U - G                  no renewal granted yet: SIGTERM to CMD's process group
                             (at once, if a renewal is refused)
  S + U                      SIGKILL (at the latest G after the SIGTERM)
So CMD is gone before the server could give the lease to anyone else (S + T at the
earliest). G must be less than U; default: 10 s, or U/2 if that is less.
Example: T = 30, G = 10: U = 29.45 s; renewals every 6.5 s; with none getting through,
SIGTERM 19.45 s and SIGKILL 29.45 s after the last one was sent.
This holds even if `leasekit run` is stopped (SIGSTOP, Ctrl-Z) or killed: a watchdog
process it starts before CMD (own process group; SIGINT, SIGTERM, SIGHUP ignored) learns
every deadline and sends the SIGTERM (up to 0.1 s after run would) and the SIGKILL itself
if run has not. Anything CMD leaves running in its process group is killed before the
lease is released. Not covered: processes that leave the group (setsid), and the watchdog
itself stopped or killed (a SIGSTOP to the whole session, kill -9 of everything).";

#[derive(Args)]
#[command(after_long_help = TIMING)]
pub struct RunArgs {
    #[command(flatten)]
    connection: Connection,
    /// The resource to hold while CMD runs.
    #[arg(long, required_unless_present = "candidates")]
    resource: Option<String>,
    /// Instead of --resource: run CMD on the first of these (2-50, comma separated, in order)
    /// that can be granted now; LEASE_RESOURCE names it. Exit 75 when none is free.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["resource", "wait"], num_args = 1)]
    candidates: Option<Vec<String>>,
    /// When CMD exits 0, release the resource as finished: nobody is granted it again until
    /// the mark ends (--keep-done) or it is reopened, and every acquire is told who finished it
    /// and --result. A failing CMD leaves it open for another try.
    #[arg(long)]
    done: bool,
    /// With --done: what the work produced (0-1024 bytes), shown to every later acquire.
    #[arg(long, requires = "done", value_parser = result)]
    result: Option<String>,
    /// With --done: seconds the resource stays finished (default a week).
    #[arg(long, requires = "done", value_parser = clap::value_parser!(u64).range(1..=7_776_000))]
    keep_done: Option<u64>,
    /// Hold one of this many permits (a semaphore: up to N commands at once); default 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    limit: u32,
    /// Lease length in seconds (renewed while CMD runs).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3600))]
    ttl: u32,
    /// Seconds to wait for the lease when someone else holds it, in its fair queue (0: give up at
    /// once). Default: 0 for run; for elect, until elected.
    #[arg(long)]
    wait: Option<u64>,
    /// The permit's value while CMD runs (0-1024 bytes; a leader's address): shown to get,
    /// watch and list, and given to CMD as LEASE_VALUE.
    #[arg(long)]
    value: Option<String>,
    /// Seconds from SIGTERM to SIGKILL when the lease is being lost (decimals allowed). Must be
    /// less than the usable lease time; default: 10, or half the usable lease time if less.
    #[arg(long, value_parser = seconds)]
    grace: Option<Duration>,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true, num_args = 1.., value_name = "CMD")]
    command: Vec<String>,
    /// Which command this is (run or elect), for what it says.
    #[arg(skip = "run")]
    name: &'static str,
}

/// A `--result`: at most 1024 bytes of UTF-8, refused before anything runs (it used to be sent
/// only once CMD had run, and refused then: the attack of 2026-12-06).
fn result(s: &str) -> Result<String, String> {
    match s.len() {
        0..=1024 => Ok(s.to_owned()),
        n => Err(format!(
            "{n} bytes: a result is at most 1024 bytes of UTF-8"
        )),
    }
}

fn seconds(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|f| Duration::try_from_secs_f64(f).ok())
        .ok_or_else(|| format!("{s:?} is not a number of seconds (e.g. 10 or 2.5)"))
}

/// The grace to use: `--grace` if it leaves room in the lease, else an error naming it.
fn grace(given: Option<Duration>, ttl: Duration) -> Result<Duration> {
    let usable = ttl - safety_margin(ttl);
    match given {
        None => Ok(DEFAULT_GRACE.min(usable / 2)),
        Some(grace) if grace < usable => Ok(grace),
        Some(grace) => bail!(
            "--grace {grace:?} must be less than the usable lease time: {usable:?} of --ttl {} \
             (the last 1% of the TTL plus 0.25 s is a safety margin); lower --grace or raise --ttl",
            ttl.as_secs()
        ),
    }
}

/// `leasekit elect`: run with one permit, waiting until elected unless `--wait` says otherwise.
pub async fn elect(mut args: RunArgs) -> Result<u8> {
    if args.limit != 1 {
        bail!(
            "--limit {}: a leader is the one holder (elect takes no --limit)",
            args.limit
        );
    }
    if args.candidates.is_some() || args.done {
        bail!("elect leads one --resource until stopped (no --candidates, no --done)");
    }
    args.wait.get_or_insert(leasekit_client::FOREVER.as_secs());
    args.name = "elect";
    run(args).await
}

pub async fn run(args: RunArgs) -> Result<u8> {
    let ttl = Duration::from_secs(u64::from(args.ttl));
    let grace = grace(args.grace, ttl)?;
    let client = args.connection.client()?;
    let holder = args.connection.holder();
    let mut terminate = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut interrupt = signal(tokio::signal::unix::SignalKind::interrupt())?;
    let (resource, mut guard) = match acquire(&client, &args, &holder, ttl, grace).await? {
        Acquired::Held(resource, guard) => (resource, guard),
        Acquired::NotNow => return Ok(EXIT_NOT_ACQUIRED),
        Acquired::Finished => return Ok(EXIT_FINISHED),
    };
    let mut renewals = guard.renewals();
    process_group::adopt_orphans();
    // Armed before the command exists, so that nothing of it ever runs unwatched.
    let watchdog = Watchdog::start(guard.deadline(), grace)?;
    let mut command = tokio::process::Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env("LEASE_FENCING_TOKEN", guard.fencing_token().to_string())
        .env("LEASE_RESOURCE", &resource)
        .env("LEASE_HOLDER", &holder)
        .env("LEASE_VALUE", args.value.as_deref().unwrap_or(""))
        .process_group(0);
    let fd = watchdog.fd();
    // SAFETY: getpid(2) and write(2), both async-signal-safe, on a stack buffer, between fork and
    // exec. The command names its own group to the watchdog before it runs: were `run` killed
    // right after the fork, the watchdog still knows what to stop. (Should the watchdog already
    // be gone, the write fails or SIGPIPE ends the child: no command runs unwatched.)
    unsafe {
        command.pre_exec(move || {
            let mut buf = [0u8; 24];
            let line = crate::watchdog::group_line(libc::getpid().unsigned_abs(), &mut buf);
            if libc::write(fd, line.as_ptr().cast(), line.len()) != line.len() as isize {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {}", args.command[0]))?;
    // The group's id is the child's pid; kept, since the child forgets it once it is reaped.
    let running = Running {
        group: child.id().and_then(|p| i32::try_from(p).ok()),
        watchdog,
    };
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.context("waiting for the command")?;
                // What it left running in its group goes too, before anyone else can hold the
                // lease.
                drop(running);
                if !guard.is_held() {
                    // `run` was not scheduled in time (stopped, say): the watchdog stopped it.
                    eprintln!("leasekit {}: lease on {resource} lost; the command ended: {status}", args.name);
                    return Ok(EXIT_LEASE_LOST);
                }
                if args.done && status.success() {
                    let keep = args.keep_done.map(Duration::from_secs);
                    if let Err(e) = guard.done(args.result.as_deref(), keep).await {
                        let e = crate::inert::inert(&e.to_string());
                        eprintln!("leasekit {}: {resource} was not marked finished: {e}", args.name);
                        return Ok(EXIT_LEASE_LOST);
                    }
                } else if let Err(e) = guard.release().await {
                    let e = crate::inert::inert(&e.to_string());
                    eprintln!("leasekit {}: release failed, the lease will lapse by itself: {e}", args.name);
                }
                return Ok(exit_code(status));
            }
            lost = guard.expiring(grace) => {
                let lost = crate::inert::inert(&format!("{lost:?}"));
                eprintln!("leasekit {}: lease on {resource} lost ({lost}); stopping the command", args.name);
                let kill_at = Instant::from_std(guard.deadline()).min(Instant::now() + grace);
                running.watchdog.stopping();
                stop(&mut child, running.group, kill_at).await;
                return Ok(EXIT_LEASE_LOST);
            }
            Some(deadline) = renewals.next() => running.watchdog.arm(deadline, grace),
            _ = terminate.recv() => signal_group(running.group, libc::SIGTERM),
            _ = interrupt.recv() => signal_group(running.group, libc::SIGINT),
        }
    }
}

/// The command's process group while `run` answers for it. Dropped (on every way out of `run`,
/// errors too), nothing of the group is left, and then the watchdog is disarmed.
struct Running {
    group: Option<i32>,
    watchdog: Watchdog,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(group) = self.group {
            process_group::kill_and_wait(group, self.watchdog.pid());
        }
    }
}

fn signal(kind: tokio::signal::unix::SignalKind) -> Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind).context("installing a signal handler")
}

/// What `run` got to run CMD under.
enum Acquired {
    /// The resource (a candidate: the one won) and the guard that keeps it.
    Held(String, Box<Guard>),
    /// Someone else holds it past `--wait` (every candidate is held, or waited for).
    NotNow,
    /// It is finished (every candidate not held is).
    Finished,
}

/// The guard (waited for in the server's fair queue up to `--wait`; a server without one is
/// asked again with backoff), or why there is none: each said on stderr.
async fn acquire(
    client: &Client,
    args: &RunArgs,
    holder: &str,
    ttl: Duration,
    grace: Duration,
) -> Result<Acquired> {
    if let Some(candidates) = &args.candidates {
        return claim(client, args, candidates, holder, ttl).await;
    }
    let Some(resource) = &args.resource else {
        bail!("--resource or --candidates names what to hold");
    };
    let waited = args.wait.unwrap_or(0);
    let mut ask = Ask::new(resource, holder, ttl, args.limit);
    if let Some(value) = &args.value {
        ask = ask.with_value(value);
    }
    match client
        .guard_asked(&ask, grace, Duration::from_secs(waited))
        .await
    {
        Ok(guard) => Ok(Acquired::Held(resource.clone(), Box::new(guard))),
        Err(leasekit_client::Error::Finished(done)) => {
            say_finished(args.name, resource, &done);
            Ok(Acquired::Finished)
        }
        Err(leasekit_client::Error::Held { holder, .. }) => {
            // Another holder's name: any string they chose.
            let holder = crate::inert::inert(&holder);
            match waited {
                0 => eprintln!(
                    "leasekit {}: {resource} is held by {holder} (--wait SECONDS waits for it, \
                     first come first served)",
                    args.name
                ),
                wait => eprintln!(
                    "leasekit {}: {resource} is held by {holder}, still after waiting {wait} s",
                    args.name
                ),
            }
            Ok(Acquired::NotNow)
        }
        Err(e) => Err(anyhow::Error::from(e).context(format!(
            "acquiring {resource} at {} (--url or LEASEKIT_URL)",
            args.connection.url
        ))),
    }
}

/// The first of `candidates` that is free now, held with `--limit` 1.
async fn claim(
    client: &Client,
    args: &RunArgs,
    candidates: &[String],
    holder: &str,
    ttl: Duration,
) -> Result<Acquired> {
    if args.limit != 1 {
        bail!("--candidates takes one permit of the first free one (no --limit)");
    }
    let names: Vec<&str> = candidates.iter().map(String::as_str).collect();
    let claimed = client.claim_next(&names, holder, ttl).await.map_err(|e| {
        anyhow::Error::from(e).context(format!(
            "claiming one of {} at {} (--url or LEASEKIT_URL)",
            candidates.join(","),
            args.connection.url
        ))
    })?;
    match claimed {
        Claim::Won { resource, guard } => Ok(Acquired::Held(resource, guard)),
        Claim::NoneFree { finished, busy } if busy.is_empty() => {
            for (resource, done) in &finished {
                say_finished(args.name, resource, done);
            }
            Ok(Acquired::Finished)
        }
        Claim::NoneFree { finished, busy } => {
            eprintln!(
                "leasekit {}: none of the candidates is free now: held or waited for: {}; finished: {}",
                args.name,
                busy.join(","),
                finished.len()
            );
            Ok(Acquired::NotNow)
        }
    }
}

/// `resource` is finished: by whom, and its result (any string they chose).
fn say_finished(name: &str, resource: &str, done: &leasekit_client::Done) {
    let by = crate::inert::inert(&done.holder);
    let result = crate::inert::inert(done.result.as_deref().unwrap_or(""));
    eprintln!(
        "leasekit {name}: {resource} is finished: done by {by} with token {} at {} ({result}); \
         not run again",
        done.fencing_token, done.done_at
    );
}

/// Send `signal` to the command's process group (the command and what it started).
fn signal_group(group: Option<i32>, signal: i32) {
    if let Some(group) = group {
        process_group::signal(group, signal);
    }
}

/// SIGTERM, then SIGKILL at `kill_at` if the command has not exited (what it left in its group
/// is killed when `Running` is dropped).
async fn stop(child: &mut tokio::process::Child, group: Option<i32>, kill_at: Instant) {
    signal_group(group, libc::SIGTERM);
    if timeout_at(kill_at, child.wait()).await.is_err() {
        signal_group(group, libc::SIGKILL);
        let _ = child.wait().await;
    }
}

/// The command's exit code, or 128 + the signal that ended it (as shells report it).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_must_leave_room_in_the_lease() {
        let ttl = Duration::from_secs(3);
        // usable = 3 - (0.03 + 0.25) = 2.72 s
        assert_eq!(grace(None, ttl).unwrap(), Duration::from_millis(1_360));
        assert_eq!(
            grace(None, Duration::from_secs(30)).unwrap(),
            Duration::from_secs(10)
        );
        assert_eq!(
            grace(Some(Duration::from_secs(2)), ttl).unwrap(),
            Duration::from_secs(2)
        );
        let too_long = grace(Some(Duration::from_millis(2_720)), ttl).unwrap_err();
        assert!(too_long.to_string().contains("--grace 2.72s"), "{too_long}");
        assert!(
            too_long.to_string().contains("2.72s of --ttl 3"),
            "{too_long}"
        );
    }

    #[test]
    fn grace_is_seconds_with_decimals() {
        assert_eq!(seconds("2.5").unwrap(), Duration::from_millis(2_500));
        assert_eq!(seconds("0").unwrap(), Duration::ZERO);
        assert!(seconds("-1").is_err());
        assert!(seconds("soon").is_err());
    }
}
