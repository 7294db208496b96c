//! Signals to a whole process group (`leasekit run`'s command and what it started).

use std::time::{Duration, Instant};

/// How long [`kill_and_wait`] waits for the killed to be gone (zombies count until reaped).
const GONE_WITHIN: Duration = Duration::from_secs(1);

/// Send `signal` to every process in `group`.
pub fn signal(group: i32, signal: i32) {
    // SAFETY: kill(2) with a negative pid and a valid signal; no memory involved.
    unsafe { libc::kill(-group, signal) };
}

/// Whether any process is left in `group` (EPERM: one is, just not ours to signal).
pub fn alive(group: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks; no memory involved.
    let r = unsafe { libc::kill(-group, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// SIGKILL the group, then wait (briefly) until it is gone: a process killed in the middle of a
/// system call (a write to a slow disk) may still finish that call, so the group's end, not the
/// signal's sending, is what says nothing of it acts any more.
pub fn kill_and_wait(group: i32) {
    signal(group, libc::SIGKILL);
    let started = Instant::now();
    loop {
        // Reap what of the group has become ours (see `adopt_orphans`): a zombie is dead, but
        // counts as in the group until reaped, and not every init reaps promptly.
        // SAFETY: waitpid(2) with a null status pointer; no memory involved.
        while unsafe { libc::waitpid(-group, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        if !alive(group) || started.elapsed() >= GONE_WITHIN {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Make this process the parent of its descendants that lose theirs (Linux: a child
/// subreaper), so that [`kill_and_wait`] can reap them and see the group gone at once.
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(2) PR_SET_CHILD_SUBREAPER takes a plain integer.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
}
