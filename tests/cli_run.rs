//! `leasekit acquire|renew|release|get` and `leasekit run` against a real server.

mod support;

use serde_json::Value;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
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

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("stdout is JSON: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn script_commands_print_the_answer_and_exit_by_outcome() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let out = cli(&server, "h1")
        .args(["acquire", "--resource", "deploy:prod", "--ttl", "60"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    assert!(String::from_utf8_lossy(&out.stderr).contains("held by other"));
}

/// A renewer paused past the TTL (like a long GC pause) finds the lease lapsed: the command is
/// stopped and `run` exits 76.
#[test]
fn a_lost_lease_stops_the_command() {
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
            "1",
            "--grace",
            "5",
            "--",
            "sh",
            "-c",
            &script,
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
    let started = Instant::now();
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "run did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(76));
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().trim(),
        "term",
        "the command got SIGTERM"
    );
}
