//! `leasekit watchdog` (hidden): stops `leasekit run`'s command at the lease deadlines when `run`
//! itself cannot, because it is stopped (SIGSTOP, Ctrl-Z), killed, or not being scheduled.
//!
//! `run` starts it before the command, in a process group of its own (so signals to `run`'s job
//! or to the command's group do not reach it) and with SIGINT, SIGTERM, SIGHUP and SIGQUIT
//! ignored, and tells it over its stdin, one line each:
//! - `arm TERM KILL`: the deadlines, absolute nanoseconds on [`now`]'s clock, which every process
//!   on the machine reads alike; sent before the command starts and after every granted renewal;
//! - `group PGID`: the command's process group, written by the command itself after `setpgid`
//!   and before `exec`, so there is no moment when the command runs and the watchdog cannot
//!   name it;
//! - `stopping`: `run` sent SIGTERM itself; only the SIGKILL is left to do;
//! - `disarm`: `run` made sure the group is gone; exit quietly.
//!
//! It sends SIGTERM to the group at TERM and SIGKILL at KILL unless a later `arm` moves them
//! (not after its SIGTERM: the stop is then under way), and exits after the SIGKILL, on
//! `disarm`, when the group is gone, or at KILL when it never learnt a group. At the end of its
//! stdin (`run` died) it keeps to the last deadlines. Its signals reach the group and the command
//! itself (whose pid is the group's id), should the command have moved to another group. Not
//! covered: the watchdog itself stopped (or the whole session), and, while `run` is stopped or
//! dead, the command's children that left its group (`setpgid`, `setsid`); `run` kills those too
//! when it releases.

use std::io::{BufRead, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::process::ExitCode;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// The longest the watchdog sleeps between looks at the clock: its waits run on the monotonic
/// clock, which stops while the machine is suspended, and [`now`] does not; after a resume it
/// notices within this.
const POLL: Duration = Duration::from_millis(100);

/// The watchdog's SIGTERM comes this long after `run`'s own (at most a quarter of the grace), so
/// that a `run` on time sends `stopping` first and the command gets one SIGTERM, not two.
const TERM_LAG: Duration = Duration::from_millis(100);

/// Nanoseconds since boot, counting time suspended (CLOCK_BOOTTIME), as the server's clock does.
pub fn now() -> u64 {
    #[cfg(target_os = "linux")]
    const CLOCK: libc::clockid_t = libc::CLOCK_BOOTTIME;
    #[cfg(not(target_os = "linux"))]
    const CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes one timespec we own; the clock id is valid.
    unsafe { libc::clock_gettime(CLOCK, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// `at` (the guard's monotonic clock) on [`now`]'s clock. Read in this order, `now` is taken no
/// later than `Instant::now()`, so the answer errs early, never late.
pub fn nanos_at(at: std::time::Instant) -> u64 {
    let base = now();
    let here = std::time::Instant::now();
    match at.checked_duration_since(here) {
        Some(ahead) => base.saturating_add(u64::try_from(ahead.as_nanos()).unwrap_or(u64::MAX)),
        None => base.saturating_sub(u64::try_from((here - at).as_nanos()).unwrap_or(u64::MAX)),
    }
}

/// One line from `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    Arm { term_at: u64, kill_at: u64 },
    Group(i32),
    Stopping,
    Disarm,
}

impl Msg {
    pub fn parse(line: &str) -> Option<Msg> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["arm", term, kill] => Some(Msg::Arm {
                term_at: term.parse().ok()?,
                kill_at: kill.parse().ok()?,
            }),
            ["group", group] => group.parse().ok().filter(|g| *g > 1).map(Msg::Group),
            ["stopping"] => Some(Msg::Stopping),
            ["disarm"] => Some(Msg::Disarm),
            _ => None,
        }
    }
}

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Term(i32),
    /// SIGKILL, then exit.
    Kill(i32),
    /// Nothing left to do.
    Exit,
}

/// The watchdog's state: pure, so the rules can be tested without processes.
#[derive(Debug, Default)]
pub struct WatchState {
    deadlines: Option<(u64, u64)>,
    group: Option<i32>,
    termed: bool,
}

impl WatchState {
    pub fn apply(&mut self, msg: Msg) -> Option<Action> {
        match msg {
            Msg::Arm { term_at, kill_at } if !self.termed => {
                self.deadlines = Some((term_at, kill_at));
            }
            Msg::Arm { .. } => {}
            Msg::Group(group) => self.group = Some(group),
            Msg::Stopping => self.termed = true,
            Msg::Disarm => return Some(Action::Exit),
        }
        None
    }

    /// What is due at `now`, if anything.
    pub fn due(&mut self, now: u64) -> Option<Action> {
        let (term_at, kill_at) = self.deadlines?;
        match self.group {
            None if now >= kill_at => Some(Action::Exit),
            None => None,
            Some(group) if now >= kill_at => Some(Action::Kill(group)),
            Some(group) if now >= term_at && !self.termed => {
                self.termed = true;
                Some(Action::Term(group))
            }
            Some(_) => None,
        }
    }

    /// When something is next due.
    pub fn next_at(&self) -> Option<u64> {
        let (term_at, kill_at) = self.deadlines?;
        Some(if self.termed || self.group.is_none() {
            kill_at
        } else {
            term_at
        })
    }

    pub fn group(&self) -> Option<i32> {
        self.group
    }

    pub fn armed(&self) -> bool {
        self.deadlines.is_some()
    }
}

/// The watchdog process.
pub fn main() -> ExitCode {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            match Msg::parse(&line) {
                Some(msg) if tx.send(msg).is_ok() => {}
                Some(_) => break,
                None => eprintln!("leasekit watchdog: ignoring {line:?}"),
            }
        }
        // Dropping `tx` tells the main loop: no more messages (`run` is gone).
    });
    let mut messages = Some(rx);
    let mut plan = WatchState::default();
    loop {
        if plan
            .group()
            .is_some_and(|g| !crate::process_group::alive(g))
        {
            return ExitCode::SUCCESS;
        }
        let now = now();
        match plan.due(now) {
            Some(Action::Term(group)) => {
                eprintln!(
                    "leasekit watchdog: lease deadline near and `leasekit run` has not acted; \
                     SIGTERM to process group {group}"
                );
                crate::process_group::signal(group, libc::SIGTERM);
            }
            Some(Action::Kill(group)) => {
                eprintln!("leasekit watchdog: lease deadline; SIGKILL to process group {group}");
                crate::process_group::signal(group, libc::SIGKILL);
                return ExitCode::SUCCESS;
            }
            Some(Action::Exit) => return ExitCode::SUCCESS,
            None => {}
        }
        let wait = plan
            .next_at()
            .map_or(POLL, |at| Duration::from_nanos(at.saturating_sub(now)))
            .min(POLL);
        let Some(rx) = &messages else {
            std::thread::sleep(wait);
            continue;
        };
        match rx.recv_timeout(wait) {
            Ok(msg) => {
                if plan.apply(msg) == Some(Action::Exit) {
                    return ExitCode::SUCCESS;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) if !plan.armed() => return ExitCode::SUCCESS,
            Err(RecvTimeoutError::Disconnected) => messages = None,
        }
    }
}

/// `run`'s end of a watchdog: its process and the pipe to its stdin.
pub struct Watchdog {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
}

impl Watchdog {
    /// Start the watchdog (this same binary), armed for `deadline` with `grace`.
    pub fn start(deadline: std::time::Instant, grace: Duration) -> anyhow::Result<Watchdog> {
        use anyhow::Context;
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe().context("finding leasekit's own binary")?;
        let mut command = Command::new(exe);
        command
            .arg("watchdog")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0);
        // SAFETY: only signal(2), async-signal-safe, between fork and exec. Ignored signals stay
        // ignored across exec, so there is no moment when these could end the watchdog.
        unsafe {
            command.pre_exec(|| {
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                Ok(())
            });
        }
        let mut child = command.spawn().context("starting the watchdog")?;
        let stdin = child.stdin.take().context("the watchdog's stdin")?;
        // Never block `run` on a watchdog that is not reading (stopped): a message that does
        // not fit is dropped, with a warning, and the watchdog keeps the deadlines it has.
        // SAFETY: fcntl(2) on a pipe fd we own.
        unsafe {
            let fd = stdin.as_raw_fd();
            libc::fcntl(
                fd,
                libc::F_SETFL,
                libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
            );
        }
        let watchdog = Watchdog { child, stdin };
        watchdog
            .send(&arm_line(deadline, grace))
            .context("arming the watchdog")?;
        Ok(watchdog)
    }

    /// The watchdog's pid (spared when `run` kills what is left of the command).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The pipe's fd, for the command to write `group PGID` to before it execs.
    pub fn fd(&self) -> RawFd {
        self.stdin.as_raw_fd()
    }

    /// The lease now lasts until `deadline`.
    pub fn arm(&self, deadline: std::time::Instant, grace: Duration) {
        warn(self.send(&arm_line(deadline, grace)));
    }

    /// `run` sends SIGTERM itself now.
    pub fn stopping(&self) {
        warn(self.send("stopping\n"));
    }

    fn send(&self, line: &str) -> std::io::Result<()> {
        // One write of a line well under PIPE_BUF: atomic, never interleaved with the command's.
        (&self.stdin).write_all(line.as_bytes())
    }
}

fn warn(sent: std::io::Result<()>) {
    if let Err(e) = sent {
        eprintln!("leasekit run: cannot reach the watchdog: {e}");
    }
}

impl Drop for Watchdog {
    /// Disarm: only once the group is gone (see `run`), so this is safe to do on any exit. The
    /// watchdog exits at once; reaped if it does so promptly (a stopped one is left to init).
    fn drop(&mut self) {
        let _ = self.send("disarm\n");
        for _ in 0..50 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn arm_line(deadline: std::time::Instant, grace: Duration) -> String {
    let kill_at = nanos_at(deadline);
    let lag = TERM_LAG.min(grace / 4);
    let term_at = nanos_at(deadline.checked_sub(grace).unwrap_or(deadline) + lag);
    format!("arm {term_at} {kill_at}\n")
}

/// `group PGID\n` for `pid` into `buf`, without allocating (it runs between fork and exec).
pub fn group_line(pid: u32, buf: &mut [u8; 24]) -> &[u8] {
    let mut digits = [0u8; 10];
    let mut n = pid;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf[..6].copy_from_slice(b"group ");
    for i in 0..len {
        buf[6 + i] = digits[len - 1 - i];
    }
    buf[6 + len] = b'\n';
    &buf[..7 + len]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn armed(term_at: u64, kill_at: u64, group: Option<i32>) -> WatchState {
        let mut plan = WatchState::default();
        plan.apply(Msg::Arm { term_at, kill_at });
        if let Some(g) = group {
            plan.apply(Msg::Group(g));
        }
        plan
    }

    #[test]
    fn terms_then_kills_the_group_at_the_deadlines() {
        let mut plan = armed(10, 20, Some(42));
        assert_eq!(plan.due(9), None);
        assert_eq!(plan.next_at(), Some(10));
        assert_eq!(plan.due(10), Some(Action::Term(42)));
        assert_eq!(plan.due(15), None, "one SIGTERM");
        assert_eq!(plan.next_at(), Some(20));
        assert_eq!(plan.due(20), Some(Action::Kill(42)));
    }

    #[test]
    fn a_renewal_moves_the_deadlines_until_the_sigterm() {
        let mut plan = armed(10, 20, Some(42));
        plan.apply(Msg::Arm {
            term_at: 30,
            kill_at: 40,
        });
        assert_eq!(plan.due(25), None);
        assert_eq!(plan.due(30), Some(Action::Term(42)));
        plan.apply(Msg::Arm {
            term_at: 50,
            kill_at: 60,
        });
        assert_eq!(
            plan.due(40),
            Some(Action::Kill(42)),
            "the stop is under way"
        );
    }

    #[test]
    fn after_runs_own_sigterm_only_the_sigkill_is_left() {
        let mut plan = armed(10, 20, Some(42));
        plan.apply(Msg::Stopping);
        assert_eq!(plan.due(15), None);
        assert_eq!(plan.due(20), Some(Action::Kill(42)));
    }

    #[test]
    fn nothing_to_kill_means_exit_at_the_deadline_or_on_disarm() {
        let mut plan = armed(10, 20, None);
        assert_eq!(plan.due(15), None);
        assert_eq!(plan.due(20), Some(Action::Exit));
        assert_eq!(WatchState::default().due(u64::MAX), None, "not armed yet");
        assert_eq!(
            armed(10, 20, Some(42)).apply(Msg::Disarm),
            Some(Action::Exit)
        );
    }

    #[test]
    fn lines_round_trip() {
        let mut buf = [0u8; 24];
        assert_eq!(group_line(4_194_304, &mut buf), b"group 4194304\n");
        assert_eq!(group_line(7, &mut buf), b"group 7\n");
        assert_eq!(Msg::parse("group 4194304"), Some(Msg::Group(4_194_304)));
        assert_eq!(Msg::parse("group 1"), None, "never init");
        assert_eq!(Msg::parse("group -5"), None);
        assert_eq!(
            Msg::parse("arm 5 6"),
            Some(Msg::Arm {
                term_at: 5,
                kill_at: 6
            })
        );
        assert_eq!(Msg::parse("arm 5"), None);
        assert_eq!(Msg::parse("disarm"), Some(Msg::Disarm));
    }

    #[test]
    fn deadlines_convert_to_the_shared_clock_erring_early() {
        let at = std::time::Instant::now() + Duration::from_secs(5);
        let before = now();
        let n = nanos_at(at);
        let after = now();
        assert!(n <= after + 5_000_000_000, "never late");
        assert!(n + 50_000_000 >= before + 5_000_000_000, "barely early");
    }
}
