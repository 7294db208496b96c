//! `leasekit acquire|renew|release|get|check|list|revoke|audit` and `leasekit run` against a
//! real server.

mod support;

use serde_json::Value;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::proxy::{Mode, Proxy};
use support::*;
use tempfile::TempDir;

fn cli(server: &Server, holder: &str) -> Command {
    let mut c = leasekit();
    c.env("LEASEKIT_URL", &server.url)
        .env("LEASEKIT_API_KEY", ACME_KEY)
        .env("LEASEKIT_TENANT", "cli")
        .env("LEASEKIT_HOLDER", holder);
    c
}

/// `command`'s output, once it exited 0 (else its stderr says why).
fn succeeded(command: &mut Command) -> Output {
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    out
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("stdout is JSON: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn script_commands_print_the_answer_and_exit_by_outcome() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let out =
        succeeded(cli(&server, "h1").args(["acquire", "--resource", "deploy:prod", "--ttl", "60"]));
    assert_eq!(json(&out)["data"]["fencingToken"], 1);
    let out = cli(&server, "h2")
        .args(["acquire", "--resource", "deploy:prod"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "held by another");
    assert_eq!(json(&out)["data"]["holder"], "h1");
    let out = cli(&server, "h2")
        .args(["get", "--resource", "deploy:prod"])
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), json(&out)["data"]["holder"].as_str()),
        (Some(0), Some("h1"))
    );
    let out = cli(&server, "h1")
        .args(["renew", "--resource", "deploy:prod", "--token", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = cli(&server, "h1")
        .args(["release", "--resource", "deploy:prod", "--token", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = cli(&server, "h1")
        .args(["release", "--resource", "deploy:prod", "--token", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "nothing to release any more");
    let out = cli(&server, "h1")
        .env("LEASEKIT_API_KEY", "wrong-key-0123456789")
        .args(["get", "--resource", "r"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
}

/// Three `leasekit run` on one resource at once: their commands never overlap, and each gets a
/// larger fencing token than the one before.
#[test]
fn concurrent_runs_never_overlap() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let log = dir.path().join("intervals");
    let script = format!(
        "echo start $LEASE_FENCING_TOKEN $LEASE_HOLDER >> {0}; sleep 0.4; echo end $LEASE_FENCING_TOKEN >> {0}",
        log.display()
    );
    let runs: Vec<_> = (0..3)
        .map(|i| {
            cli(&server, &format!("worker-{i}"))
                .args([
                    "run",
                    "--resource",
                    "nightly-job",
                    "--ttl",
                    "5",
                    "--wait",
                    "30",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut run in runs {
        assert!(run.wait().unwrap().success());
    }
    let lines: Vec<Vec<String>> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    let mut last_token = 0;
    for pair in lines.chunks(2) {
        assert_eq!(
            (pair[0][0].as_str(), pair[1][0].as_str()),
            ("start", "end"),
            "overlap: {lines:?}"
        );
        assert_eq!(
            pair[0][1], pair[1][1],
            "one command's start and end: {lines:?}"
        );
        let token: u64 = pair[0][1].parse().unwrap();
        assert!(token > last_token, "{lines:?}");
        last_token = token;
    }
}

#[test]
fn run_passes_the_exit_code_through_and_gives_up_when_held() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let out = cli(&server, "w")
        .args(["run", "--resource", "r", "--", "sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    // Released after the command: another holder gets it right away, with the next token.
    let out = cli(&server, "other")
        .args(["acquire", "--resource", "r", "--ttl", "60"])
        .output()
        .unwrap();
    assert_eq!(json(&out)["data"]["fencingToken"], 2);
    let out = cli(&server, "w")
        .args(["run", "--resource", "r", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(75), "held by another, no --wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("held by other"), "{stderr}");
    assert!(stderr.contains("--wait"), "no hint of --wait: {stderr}");
}

/// What a first try gets wrong is named: the missing key with its variable, an unreachable
/// server with its URL.
#[test]
fn cli_errors_name_the_key_variable_and_the_url() {
    let out = leasekit()
        .env_remove("LEASEKIT_API_KEY")
        .env("LEASEKIT_URL", "http://127.0.0.1:9")
        .args(["get", "--resource", "r"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("LEASEKIT_API_KEY") && stderr.contains("--api-key"),
        "{stderr}"
    );
    for args in [
        &["get", "--resource", "r"][..],
        &["run", "--resource", "r", "--", "true"],
    ] {
        let out = leasekit()
            .env("LEASEKIT_API_KEY", ACME_KEY)
            .env("LEASEKIT_URL", "http://127.0.0.1:9")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains("http://127.0.0.1:9"), "{args:?}: {stderr}");
        assert!(stderr.contains("LEASEKIT_URL"), "{args:?}: {stderr}");
    }
}

/// `leasekit acquire --wait` waits in the resource's queue: held throughout, it answers when the
/// wait ends, not granted (exit 1), with its place; a later plain acquire sees it ahead.
#[test]
fn acquire_waits_in_the_queue_with_wait() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let out = cli(&server, "owner")
        .args(["acquire", "--resource", "q", "--ttl", "60"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let started = std::time::Instant::now();
    let out = cli(&server, "waiter")
        .args(["acquire", "--resource", "q", "--wait", "1"])
        .output()
        .unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "it waited");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["data"]["queuePosition"], 1);
    let out = cli(&server, "newcomer")
        .args(["acquire", "--resource", "q"])
        .output()
        .unwrap();
    assert_eq!(
        json(&out)["data"]["witnesses"][0]["ruleId"],
        "WAITERS_AHEAD"
    );
}

/// A renewer paused past its deadline (like a long GC pause) finds the lease lapsed: the command
/// is killed at once (the deadline has passed, so there is no grace left) and `run` exits 76.
#[test]
fn a_paused_renewer_stops_the_command() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let mut run = cli(&server, "w")
        .args([
            "run",
            "--resource",
            "r",
            "--ttl",
            "1",
            "--grace",
            "0.2",
            "--",
            "sleep",
            "30",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let pid = run.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    std::thread::sleep(Duration::from_millis(2_000));
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(wait_for(&mut run, Duration::from_secs(10)).code(), Some(76));
}

/// A renewal refused (the lease released behind run's back): the command gets SIGTERM and its
/// --grace to finish, and `run` exits 76.
#[test]
fn a_refused_renewal_terminates_the_command() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let marker = dir.path().join("terminated");
    let script = format!(
        "trap 'echo term > {}; exit 0' TERM; sleep 30 & wait",
        marker.display()
    );
    let mut run = cli(&server, "w")
        .args([
            "run",
            "--resource",
            "r",
            "--ttl",
            "3",
            "--grace",
            "2",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = cli(&server, "w")
        .args(["release", "--resource", "r", "--token", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(wait_for(&mut run, Duration::from_secs(10)).code(), Some(76));
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().trim(),
        "term",
        "the command got SIGTERM"
    );
}

fn wait_for(run: &mut std::process::Child, bound: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = run.try_wait().unwrap() {
            return status;
        }
        assert!(started.elapsed() < bound, "run did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--grace` must leave room in the lease: refused before anything is acquired.
#[test]
fn a_grace_longer_than_the_lease_is_refused() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let out = cli(&server, "w")
        .args([
            "run",
            "--resource",
            "r",
            "--ttl",
            "5",
            "--grace",
            "5",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--grace 5s must be less than"), "{stderr}");
    let out = cli(&server, "w")
        .args(["get", "--resource", "r"])
        .output()
        .unwrap();
    assert_eq!(json(&out)["data"]["granted"], false, "nothing acquired");
}

/// Wall-clock nanoseconds, the clock `date +%s%N` reads.
fn wall_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// The command loop that stamps `file` with the wall clock every 50 ms, until it cannot (the
/// test's directory is gone): a loop a failing test leaves behind ends with the test.
fn stamp_loop(file: &std::path::Path) -> String {
    format!(
        "while date +%s%N >> {}; do sleep 0.05; done",
        file.display()
    )
}

/// `leasekit run --resource r --ttl 3 --grace 1 -- sh -c script`, started from `command`.
fn run_script(mut command: Command, script: &str) -> std::process::Child {
    command
        .args(["run", "--resource", "r", "--ttl", "3", "--grace", "1", "--"])
        .args(["sh", "-c", script])
        .spawn()
        .unwrap()
}

fn stamps(path: &std::path::Path) -> Vec<u128> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// `leasekit run` reaches the service through a proxy that turns bad (`mode`) while the command
/// runs; a second holder polls acquire straight at the server. The command stamps a file every
/// 50 ms; its last stamp must come before the second holder's grant.
///
/// What is compared: each stamp is a `date +%s%N` reading the command takes just before it
/// appends the line; `granted_sent` is the test's reading of the same clock (CLOCK_REALTIME, one
/// machine) taken just before it sends the acquire that was granted, so the grant happened at or
/// after it. `last stamp < granted_sent` therefore says the command read the clock for the last
/// time before anyone else held the lease. It cannot pass falsely by the command merely being
/// quiet: the stamps are read only after `run` has exited and a pause for stragglers, the command
/// runs in a loop with no other way to stop, and a command alive one loop (50 ms) past the grant
/// would have stamped a later time. (The one blind spot is the microseconds between a `date`
/// reading the clock and its line landing; an NTP step during the test would also skew it.)
fn lost_lease_stops_the_command_before_the_next_grant(mode: Mode) {
    stops_before_the_next_grant(mode, "LOOP");
}

/// The same, for a command `shape` with LOOP standing for the stamping loop.
fn stops_before_the_next_grant(mode: Mode, shape: &str) {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let proxy = Proxy::start(&server.url);
    let file = dir.path().join("stamps");
    let script = shape.replace("LOOP", &stamp_loop(&file));
    let mut command = cli(&server, "first");
    command.env("LEASEKIT_URL", &proxy.url);
    let mut run = run_script(command, &script);
    // Alive, with renewals passing through, for a while.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1_500) || stamps(&file).len() < 5 {
        assert!(started.elapsed() < Duration::from_secs(10), "no stamps");
        std::thread::sleep(Duration::from_millis(50));
    }
    proxy.set(mode);
    let switched = Instant::now();
    let granted_sent = second_holder_grant(&server);
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break Some(status);
        }
        if switched.elapsed() > Duration::from_secs(25) {
            // Still running: stop it (run forwards SIGTERM) so the stamps end, then fail below.
            sigterm(run.id());
            run.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_stamped_before(&file, granted_sent, &format!("{mode:?}"));
    assert_eq!(status.and_then(|s| s.code()), Some(76), "{mode:?}");
}

#[test]
fn a_silent_service_stops_the_command_before_the_next_grant() {
    lost_lease_stops_the_command_before_the_next_grant(Mode::Silent);
}

#[test]
fn dropped_connections_stop_the_command_before_the_next_grant() {
    lost_lease_stops_the_command_before_the_next_grant(Mode::Drop);
}

/// SIGTERM ignored (by the shell and, inherited, by each `date` and `sleep`): only the SIGKILL
/// at the deadline stops it, still before the next grant.
#[test]
fn a_command_that_ignores_sigterm_is_killed_at_the_deadline() {
    stops_before_the_next_grant(Mode::Silent, "trap '' TERM; LOOP");
}

/// The stamping loop in a process the command started (and waits for): stopped too, since the
/// signals go to the command's process group.
#[test]
fn what_the_command_started_is_stopped_too() {
    stops_before_the_next_grant(Mode::Silent, "sh -c 'LOOP' & wait");
}

#[test]
fn slow_answers_stop_the_command_before_the_next_grant() {
    // 0.8 of the TTL: a renewal is applied at once but its answer comes too late to count.
    lost_lease_stops_the_command_before_the_next_grant(Mode::Slow(Duration::from_millis(2_400)));
}

/// A `leasekit run` whose command (SHAPE, with LOOP standing for the stamping loop, and PIDFILE
/// for a file to write the command's process-group id to) stamps a file every 50 ms; started
/// straight at the server with a 3 s lease and 1 s grace, and left until it has stamped a while.
struct Stamping {
    run: std::process::Child,
    stamps: std::path::PathBuf,
    group: String,
}

impl Stamping {
    fn start(server: &Server, dir: &std::path::Path, shape: &str) -> Self {
        let stamps = dir.join("stamps");
        let pidfile = dir.join("group");
        let script = shape
            .replace("PIDFILE", &pidfile.display().to_string())
            .replace("LOOP", &stamp_loop(&stamps));
        let run = run_script(cli(server, "first"), &script);
        let started = Instant::now();
        while stamps_in(&stamps) < 5 || !pidfile.exists() {
            assert!(started.elapsed() < Duration::from_secs(10), "no stamps");
            std::thread::sleep(Duration::from_millis(50));
        }
        let group = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
        Self { run, stamps, group }
    }

    /// Whether anything of the command's process group is still alive (zombies are dead).
    fn group_alive(&self) -> bool {
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return false;
        };
        procs.flatten().any(|p| {
            std::fs::read_to_string(p.path().join("stat")).is_ok_and(|stat| {
                // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
                let rest: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or(vec![], |(_, r)| r.split_whitespace().collect());
                rest.len() > 2 && rest[0] != "Z" && rest[2] == self.group
            })
        })
    }
}

impl Drop for Stamping {
    /// Whatever the test found, nothing of it runs on.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.run.id().to_string()])
            .status();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.group)])
            .stderr(std::process::Stdio::null())
            .status();
        let _ = self.run.kill();
        let _ = self.run.wait();
    }
}

fn stamps_in(path: &std::path::Path) -> usize {
    stamps(path).len()
}

/// A second holder polls acquire straight at the server until granted: the wall-clock reading
/// taken just before the granting acquire was sent.
fn second_holder_grant(server: &Server) -> u128 {
    let started = Instant::now();
    loop {
        let sent = wall_nanos();
        let out = cli(server, "second")
            .args(["acquire", "--resource", "r", "--ttl", "30"])
            .output()
            .unwrap();
        if out.status.code() == Some(0) {
            return sent;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the second holder never got the lease"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The command's last stamp (read after a pause for stragglers) came before `granted_sent`.
fn assert_stamped_before(stamps_file: &std::path::Path, granted_sent: u128, what: &str) {
    std::thread::sleep(Duration::from_millis(300));
    let stamps = stamps(stamps_file);
    assert!(stamps.len() >= 5, "the command ran: {stamps:?}");
    let last = *stamps.last().unwrap();
    eprintln!(
        "{what}: last stamp {} ms before the granting acquire was sent",
        granted_sent.saturating_sub(last) / 1_000_000
    );
    assert!(
        last < granted_sent,
        "{what}: the command stamped {} ms after the second holder's granting acquire was sent",
        (last - granted_sent) / 1_000_000
    );
}

/// `leasekit run` stopped (SIGSTOP, as a debugger or an overloaded host might) while its command
/// runs on in its own process group: the watchdog still kills the command (which ignores
/// SIGTERM) before the lease can go to anyone else.
#[test]
fn a_stopped_run_still_stops_the_command_before_the_next_grant() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let mut cmd = Stamping::start(&server, dir.path(), "echo $$ > PIDFILE; trap '' TERM; LOOP");
    while_run_is_stopped(&mut cmd, |cmd| {
        let granted_sent = second_holder_grant(&server);
        assert_stamped_before(&cmd.stamps, granted_sent, "run stopped");
        assert!(!cmd.group_alive(), "the command's group is gone");
    });
}

/// `leasekit run` killed (SIGKILL: no handler, no cleanup) while its command runs: the watchdog
/// still kills the command before the lease can go to anyone else, and nothing of it is left.
#[test]
fn a_killed_run_still_stops_the_command_before_the_next_grant() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let mut cmd = Stamping::start(&server, dir.path(), "echo $$ > PIDFILE; trap '' TERM; LOOP");
    cmd.run.kill().unwrap();
    cmd.run.wait().unwrap();
    let granted_sent = second_holder_grant(&server);
    assert_stamped_before(&cmd.stamps, granted_sent, "run killed");
    assert!(!cmd.group_alive(), "the command's group is gone");
    let count = stamps_in(&cmd.stamps);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(stamps_in(&cmd.stamps), count, "no stamps after the end");
}

/// The command exits 0 but leaves a loop running in the background, in its process group: that
/// is killed before the lease is released, so it is dead before the next grant.
#[test]
fn what_the_command_leaves_running_is_killed_before_the_release() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let mut cmd = Stamping::start(
        &server,
        dir.path(),
        "echo $$ > PIDFILE; LOOP & sleep 1; exit 0",
    );
    assert_eq!(
        wait_for(&mut cmd.run, Duration::from_secs(10)).code(),
        Some(0)
    );
    let granted_sent = second_holder_grant(&server);
    assert_stamped_before(&cmd.stamps, granted_sent, "background loop");
    assert!(!cmd.group_alive(), "the command's group is gone");
}

/// Stop `leasekit run` (SIGSTOP) while `check` runs, then let it go on: it finds its lease lost.
fn while_run_is_stopped(cmd: &mut Stamping, check: impl FnOnce(&Stamping)) {
    let pid = cmd.run.id().to_string();
    let kill = |signal: &str| {
        assert!(
            Command::new("kill")
                .args([signal, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    kill("-STOP");
    check(cmd);
    kill("-CONT");
    let status = wait_for(&mut cmd.run, Duration::from_secs(10));
    assert_ne!(status.code(), Some(0), "the lease was lost: {status}");
}

/// Whether process `pid` is alive (a zombie is not).
fn pid_alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

/// The command leaves its own process group (it joins a child's, so a signal to its original
/// group reaches nobody) and `leasekit run` is stopped: the watchdog still stops the command
/// itself before the next grant.
#[test]
fn a_command_that_leaves_its_group_is_still_stopped_before_the_next_grant() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    // The child makes a group of its own and lives 8 s at most; the command joins that group,
    // then becomes the stamping loop (same pid), ignoring SIGTERM.
    let shape = r#"echo $$ > PIDFILE; exec python3 -c 'import os, sys, time
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    time.sleep(8)
    os._exit(0)
time.sleep(0.2)
os.setpgid(0, pid)
os.execvp("sh", ["sh", "-c", sys.argv[1]])' "trap '' TERM; LOOP""#;
    let mut cmd = Stamping::start(&server, dir.path(), shape);
    while_run_is_stopped(&mut cmd, |cmd| {
        let granted_sent = second_holder_grant(&server);
        assert_stamped_before(
            &cmd.stamps,
            granted_sent,
            "command out of its group, run stopped",
        );
        assert!(!pid_alive(&cmd.group), "the command itself is dead");
    });
}

/// The command starts a loop in a session of its own (`setsid`: out of its process group) and
/// exits 0: `run` still kills the loop (its descendant, adopted as a child subreaper) before it
/// releases the lease.
#[test]
fn what_the_command_starts_outside_its_group_is_killed_before_the_release() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let mut cmd = Stamping::start(
        &server,
        dir.path(),
        "echo $$ > PIDFILE; setsid timeout 15 sh -c 'LOOP' & sleep 1; exit 0",
    );
    assert_eq!(
        wait_for(&mut cmd.run, Duration::from_secs(10)).code(),
        Some(0)
    );
    let granted_sent = second_holder_grant(&server);
    assert_stamped_before(&cmd.stamps, granted_sent, "loop in its own session");
}

/// The coordination ops from scripts: a permit of a semaphore (--limit), a set (several
/// --resource, a --token each to release it), and check (exit 0 current, 1 not).
#[test]
fn script_commands_take_permits_sets_and_checks() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let run = |holder: &str, args: &[&str]| {
        let out = cli(&server, holder).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (
            out.status.code(),
            if out.stdout.is_empty() {
                Value::Null
            } else {
                json(&out)
            },
            stderr,
        )
    };
    for (holder, token) in [("h1", 1), ("h2", 2)] {
        let (code, answer, err) = run(holder, &["acquire", "--resource", "pool", "--limit", "2"]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(answer["data"]["fencingToken"], token);
    }
    let (code, answer, _) = run("h3", &["acquire", "--resource", "pool", "--limit", "2"]);
    assert_eq!(
        (code, answer["data"]["holders"].as_array().unwrap().len()),
        (Some(1), 2)
    );
    // The holder (LEASEKIT_HOLDER) is part of a check: token 2 is h2's, not h3's.
    let (code, _, _) = run("h3", &["check", "--resource", "pool", "--token", "2"]);
    assert_eq!(code, Some(1), "not h3's");
    let (code, answer, _) = run("h2", &["check", "--resource", "pool", "--token", "2"]);
    assert_eq!(
        (code, answer["data"]["current"].clone()),
        (Some(0), Value::Bool(true))
    );
    let (code, _, _) = run("h2", &["check", "--resource", "pool", "--token", "3"]);
    assert_eq!(code, Some(1), "not current");
    // A check names a holder only when told to.
    let mut check = cli(&server, "h1");
    check.env_remove("LEASEKIT_HOLDER");
    let out = check
        .args(["check", "--resource", "pool", "--token", "1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, answer, err) = run("h1", &["acquire", "--resource", "a", "--resource", "b"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(answer["data"]["leases"].as_array().unwrap().len(), 2);
    let (code, _, _) = run("h2", &["acquire", "--resource", "b", "--resource", "c"]);
    assert_eq!(code, Some(1), "b is held");
    let release = [
        "release",
        "--resource",
        "a",
        "--resource",
        "b",
        "--token",
        "1",
        "--token",
        "1",
    ];
    let (code, answer, err) = run("h1", &release);
    assert_eq!(
        (code, answer["data"]["granted"].clone()),
        (Some(0), Value::Bool(true)),
        "{err}"
    );
    let (code, _, err) = run(
        "h1",
        &[
            "release",
            "--resource",
            "a",
            "--resource",
            "b",
            "--token",
            "1",
        ],
    );
    assert_eq!(code, Some(2), "a token for each resource: {err}");
}

/// Four `leasekit run --limit 2` on one resource: at most two commands run at once, and two do.
#[test]
fn runs_with_a_limit_hold_one_permit_each() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let log = dir.path().join("events");
    let script = format!(
        "echo start >> {0}; sleep 0.8; echo end >> {0}",
        log.display()
    );
    let runs: Vec<_> = (0..4)
        .map(|i| {
            cli(&server, &format!("worker-{i}"))
                .args([
                    "run",
                    "--resource",
                    "pool",
                    "--limit",
                    "2",
                    "--ttl",
                    "5",
                    "--wait",
                    "30",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut run in runs {
        assert!(run.wait().unwrap().success());
    }
    let (mut running, mut most) = (0i32, 0);
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        running += if line == "start" { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(most, 2, "at most two at once, and two did run together");
}

/// `leasekit keys create --admin`, then `list`, `revoke` and `audit` from a script: the
/// plain key may list but not revoke (exit 2, the 403 on stderr), the admin key revokes (exit 0;
/// 1 when nothing was live) and reads the audit.
#[test]
fn list_revoke_and_audit_from_the_command_line() {
    let dir = TempDir::new().unwrap();
    let created = leasekit()
        .args([
            "keys",
            "create",
            "--account",
            "acme",
            "--admin",
            "--data-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let admin_key = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    assert!(String::from_utf8_lossy(&created.stderr).contains("admin key"));
    let server = Server::start(dir.path());
    let out = cli(&server, "worker-7")
        .args(["acquire", "--resource", "deploy:prod", "--ttl", "60"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = cli(&server, "worker-7")
        .args(["list", "--prefix", "deploy:"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = json(&out);
    assert_eq!(page["data"]["leases"][0]["resource"], "deploy:prod");
    assert_eq!(page["data"]["nextCursor"], Value::Null);
    let revoke = ["revoke", "--resource", "deploy:prod", "--reason", "wedged"];
    let out = cli(&server, "worker-7").args(revoke).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "no admin role");
    assert!(String::from_utf8_lossy(&out.stderr).contains("FORBIDDEN"));
    // The operator's own LEASEKIT_HOLDER is exported: a revoke without --holder still ends
    // every permit (it used to send the operator's name, and end nothing).
    let admin = |args: &[&str]| {
        cli(&server, "operator")
            .env("LEASEKIT_API_KEY", &admin_key)
            .args(args)
            .output()
            .unwrap()
    };
    let out = admin(&revoke);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out)["data"]["revoked"][0]["holder"], "worker-7");
    let out = admin(&revoke);
    assert_eq!(out.status.code(), Some(1), "nothing left to revoke");
    // --holder on the command line narrows it.
    let out = cli(&server, "worker-9")
        .args(["acquire", "--resource", "deploy:prod", "--ttl", "60"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = admin(&[
        "revoke",
        "--resource",
        "deploy:prod",
        "--reason",
        "x",
        "--holder",
        "worker-8",
    ]);
    assert_eq!(out.status.code(), Some(1), "worker-8 holds nothing");
    let out = admin(&[
        "revoke",
        "--resource",
        "deploy:prod",
        "--reason",
        "y",
        "--holder",
        "worker-9",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let out = admin(&["audit", "--resource", "deploy:prod"]);
    assert_eq!(out.status.code(), Some(0));
    let reasons: Vec<Value> = json(&out)["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].clone())
        .collect();
    assert_eq!(
        reasons,
        ["y", "wedged"],
        "newest first; a revoke of nothing is no entry"
    );
}

/// `args` run on a pseudo-terminal (util-linux `script`), as a person at a shell runs them:
/// the exit code and what the terminal showed (line ends as written, without the `\r`s).
fn on_a_terminal(server: &Server, args: &str) -> (Option<i32>, String) {
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_leasekit"));
    let out = Command::new("script")
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .env("LEASEKIT_URL", &server.url)
        .env("LEASEKIT_API_KEY", ACME_KEY)
        .env("LEASEKIT_TENANT", "cli")
        .env("LEASEKIT_HOLDER", "h1")
        .output()
        .expect("util-linux script");
    let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    (out.status.code(), shown)
}

#[test]
fn a_terminal_gets_a_short_text_view_and_json_when_it_asks() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let (code, shown) = on_a_terminal(&server, "acquire --resource deploy:prod --ttl 3600");
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.starts_with("granted: deploy:prod\nholder   h1\ntoken    1\nexpires  "),
        "{shown}"
    );
    // Just sent: an hour, less the moment it took.
    assert!(
        shown.contains("(in 59 min 5") || shown.contains("(in 1 h)\n"),
        "{shown}"
    );
    let (code, shown) = on_a_terminal(&server, "list");
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.starts_with("RESOURCE     HOLDER  TOKEN  EXPIRES"),
        "{shown}"
    );
    assert!(
        shown.contains("\ndeploy:prod  h1      1      in 59 min 5")
            || shown.contains("\ndeploy:prod  h1      1      in 1 h"),
        "{shown}"
    );
    let (code, shown) = on_a_terminal(&server, "check --resource deploy:prod --token 2");
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        shown.starts_with("not current: deploy:prod\n  TOKEN_NOT_CURRENT: "),
        "{shown}"
    );
    // --json: the whole signed answer, as scripts get it.
    let (code, shown) = on_a_terminal(&server, "get --resource deploy:prod --json");
    assert_eq!(code, Some(0), "{shown}");
    let answer: Value = serde_json::from_str(shown.trim()).expect("JSON on the terminal");
    assert_eq!(answer["data"]["holder"], "h1");
    assert!(answer["_provenance"]["credential"].is_object());
}

/// What others chose reaches a person's terminal inert (the attack of the third session of
/// 2026-12-05): another holder's name in `leasekit run`'s refusal, and a server's words in an
/// error, used to be printed raw, escape sequences and fake lines included.
#[test]
fn what_others_say_reaches_the_terminal_inert() {
    let hostile = "evil\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{9b}31m\u{202e}\nleasekit: fake line";
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    succeeded(cli(&server, hostile).args(["acquire", "--resource", "run1", "--ttl", "120"]));
    let out = cli(&server, "me")
        .args(["run", "--resource", "run1", "--", "true"])
        .output()
        .unwrap();
    let said = String::from_utf8(out.stderr).unwrap();
    assert!(said.contains(r"is held by evil\u{1b}]0;PWNED"), "{said}");
    assert!(
        !said
            .chars()
            .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
        "{said:?}"
    );
    assert!(!said.contains("\nleasekit: fake line"), "{said}");

    // A server (or whatever answers at --url) that says hostile things in an error.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming().take(1) {
            let mut stream = stream.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0; 4096];
            while !String::from_utf8_lossy(&seen).contains("\"op\"") {
                let n = stream.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            let body =
                serde_json::json!({"error": hostile, "code": format!("BAD{hostile}")}).to_string();
            let reply = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(reply.as_bytes()).unwrap();
        }
    });
    let out = leasekit()
        .env("LEASEKIT_URL", &url)
        .env("LEASEKIT_API_KEY", ACME_KEY)
        .args(["get", "--resource", "r"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8(out.stderr).unwrap();
    assert!(said.contains(r"\u{1b}]0;PWNED"), "{said}");
    assert!(
        !said
            .chars()
            .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
        "{said:?}"
    );
    assert_eq!(said.trim_end().lines().count(), 1, "{said}");
}

/// `leasekit watch` prints the resource as it stands, then one JSON line per change of its
/// holders (a renew that only moves the expiry is none), and stops after `--changes`.
#[test]
fn watch_prints_a_line_per_change() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let watcher = cli(&server, "w")
        .args(["watch", "--resource", "leader", "--changes", "3"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    succeeded(cli(&server, "n1").args([
        "acquire",
        "--resource",
        "leader",
        "--ttl",
        "60",
        "--value",
        "10.0.0.7",
    ]));
    std::thread::sleep(std::time::Duration::from_millis(300));
    succeeded(cli(&server, "n1").args(["renew", "--resource", "leader", "--token", "1"]));
    std::thread::sleep(std::time::Duration::from_millis(300));
    succeeded(cli(&server, "n1").args(["release", "--resource", "leader", "--token", "1"]));
    let out = watcher.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let holders: Vec<Option<&str>> = lines.iter().map(|l| l["holder"].as_str()).collect();
    assert_eq!(holders, [None, Some("n1"), None], "{lines:?}");
    assert_eq!(lines[1]["value"], "10.0.0.7");
    assert!(
        lines
            .iter()
            .all(|l| l["op"] == "watch" && l["changed"] == true)
    );
}

/// `leasekit elect` runs its command while leader, with the leader's value: a second candidate
/// waits (until elected, by default) and leads once the first command has exited, with a larger
/// token; an observer sees each leader in turn, never two at once.
#[test]
fn elect_runs_the_command_while_leader_and_the_next_candidate_waits() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let watcher = cli(&server, "w")
        .args(["watch", "--resource", "office", "--changes", "4"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let said = |name: &str| dir.path().join(name);
    let candidate = |holder: &str, file: &std::path::Path| {
        cli(&server, holder)
            .args(["elect", "--resource", "office", "--ttl", "5"])
            .args(["--value", &format!("{holder}.internal:8080"), "--"])
            .args([
                "sh",
                "-c",
                "echo \"$LEASE_VALUE $LEASE_FENCING_TOKEN\" > \"$0\"; sleep 1",
            ])
            .arg(file)
            .spawn()
            .unwrap()
    };
    let mut a = candidate("a", &said("a"));
    std::thread::sleep(Duration::from_millis(300));
    let mut b = candidate("b", &said("b"));
    assert_eq!(wait_for(&mut a, Duration::from_secs(10)).code(), Some(0));
    assert_eq!(wait_for(&mut b, Duration::from_secs(10)).code(), Some(0));
    let read = |name: &str| std::fs::read_to_string(said(name)).unwrap();
    assert_eq!(read("a").trim(), "a.internal:8080 1");
    assert_eq!(read("b").trim(), "b.internal:8080 2");

    let out = watcher.wait_with_output().unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let leaders: Vec<(Option<&str>, Option<&str>)> = lines
        .iter()
        .map(|l| (l["holder"].as_str(), l["value"].as_str()))
        .collect();
    // b's acquire may land in the instant between a's release and the observer's next read:
    // then "nobody" between them is a state nobody could see, and is not shown.
    let nobody = (None, None);
    let a_leads = (Some("a"), Some("a.internal:8080"));
    let b_leads = (Some("b"), Some("b.internal:8080"));
    leaders
        .iter()
        .for_each(|l| assert!([nobody, a_leads, b_leads].contains(l), "{lines:?}"));
    let order: Vec<_> = leaders.iter().filter(|l| **l != nobody).collect();
    assert_eq!(order, [&a_leads, &b_leads], "{lines:?}");
    assert!(
        lines
            .iter()
            .all(|l| l["holders"].as_array().unwrap().len() <= 1)
    );
}

/// elect says it is elect: a candidate told not to wait gives up naming itself and the holder.
#[test]
fn elect_names_itself_when_it_gives_up() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    succeeded(cli(&server, "a").args(["acquire", "--resource", "office", "--ttl", "60"]));
    let out = cli(&server, "b")
        .args(["elect", "--resource", "office", "--wait", "0", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(75));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("leasekit elect: office is held by a"),
        "{stderr}"
    );
}

/// A leader is one holder: elect refuses --limit.
#[test]
fn elect_takes_no_limit() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let out = cli(&server, "a")
        .args([
            "elect",
            "--resource",
            "office",
            "--limit",
            "2",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--limit"), "{stderr}");
}

/// `leasekit run --done` (docs/adr/0012): a command that exits 0 leaves the resource finished
/// with its result, and the next run does not run its command (exit 77, saying who finished
/// it); a failing command leaves it open for another try.
#[test]
fn run_done_finishes_the_resource_only_when_the_command_succeeds() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    // A result the service would refuse is refused before anything runs (the attack of
    // 2026-12-06: the command ran, then the lease was left held for its whole TTL).
    let marker = dir.path().join("ran-with-a-long-result");
    let long = "é".repeat(513);
    let refused = cli(&server, "w1")
        .args([
            "run",
            "--resource",
            "task:1",
            "--done",
            "--result",
            &long,
            "--",
            "touch",
        ])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("1026 bytes"));
    assert!(!marker.exists());
    let failed = cli(&server, "w1")
        .args(["run", "--resource", "task:1", "--done", "--", "false"])
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(1));
    let got = json(&succeeded(cli(&server, "w1").args([
        "get",
        "--resource",
        "task:1",
    ])));
    assert_eq!(got["data"]["done"], Value::Null, "a failure leaves it open");
    succeeded(cli(&server, "w1").args([
        "run",
        "--resource",
        "task:1",
        "--done",
        "--result",
        "sent INV-1009",
        "--",
        "true",
    ]));
    let got = json(&succeeded(cli(&server, "w1").args([
        "get",
        "--resource",
        "task:1",
    ])));
    assert_eq!(got["data"]["done"]["holder"], "w1", "{got}");
    assert_eq!(got["data"]["done"]["result"], "sent INV-1009");
    let marker = dir.path().join("ran-again");
    let again = cli(&server, "w2")
        .args(["run", "--resource", "task:1", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(77), "{stderr}");
    assert!(
        stderr.contains("finished") && stderr.contains("w1"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the command did not run");
}

/// `leasekit run --candidates a,b,c` runs the command on the first free one, named in
/// LEASE_RESOURCE; with none free it exits 75, with all finished 77.
#[test]
fn run_candidates_takes_the_first_free_one() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    succeeded(cli(&server, "other").args(["acquire", "--resource", "q:a", "--ttl", "60"]));
    let run_on_next = || {
        let out = succeeded(cli(&server, "w1").args([
            "run",
            "--candidates",
            "q:a,q:b,q:c",
            "--done",
            "--",
            "sh",
            "-c",
            "echo $LEASE_RESOURCE",
        ]));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(run_on_next(), "q:b");
    assert_eq!(run_on_next(), "q:c");
    let none = cli(&server, "w1")
        .args(["run", "--candidates", "q:a,q:b,q:c", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(75), "q:a is held");
    let all_done = cli(&server, "w1")
        .args(["run", "--candidates", "q:b,q:c", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(all_done.status.code(), Some(77));
}
