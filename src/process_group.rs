//! Signals to what `leasekit run`'s command is: its process group, whose id is the command's own
//! pid, and the command itself even if it has moved to another group (`setpgid`), which a
//! signal to the group alone would miss. On release, also every other descendant of `run`:
//! `run` is a child subreaper, so what left the group (`setpgid`, `setsid`) and lost its parent
//! is still `run`'s descendant.

use std::time::{Duration, Instant};

/// How long [`kill_and_wait`] waits for the killed to be gone (zombies count until reaped).
const GONE_WITHIN: Duration = Duration::from_secs(1);

/// Send `signal` to every process in `group` and to its leader, the command (pid = `group`).
pub fn signal(group: i32, signal: i32) {
    // SAFETY: kill(2) with a valid signal; no memory involved.
    unsafe {
        libc::kill(-group, signal);
        libc::kill(group, signal);
    }
}

/// Whether anything is left of `group` or of its leader (EPERM: one is, just not ours to signal).
pub fn alive(group: i32) -> bool {
    let exists = |pid: i32| {
        // SAFETY: kill(2) with signal 0 only checks; no memory involved.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    };
    exists(-group) || exists(group)
}

/// SIGKILL the group, its leader and every other descendant of this process but `spare` (the
/// watchdog), then wait (briefly) until they are gone: a process killed in the middle of a
/// system call (a write to a slow disk) may still finish that call, so their end, not the
/// signal's sending, is what says nothing of them acts any more.
pub fn kill_and_wait(group: i32, spare: u32) {
    let started = Instant::now();
    loop {
        signal(group, libc::SIGKILL);
        let strays = descendants(spare);
        for &pid in &strays {
            // SAFETY: kill(2) and waitpid(2) (null status) on our own descendants.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
            }
        }
        // Reap what of the group has become ours (see `adopt_orphans`): a zombie is dead, but
        // counts as in the group until reaped, and not every init reaps promptly.
        // SAFETY: waitpid(2) with a null status pointer; no memory involved.
        while unsafe { libc::waitpid(-group, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        if (!alive(group) && strays.is_empty()) || started.elapsed() >= GONE_WITHIN {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The live (not zombie) descendants of this process, but `spare` and its own descendants, read
/// from /proc's parent links. Empty where there is no /proc.
fn descendants(spare: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    // (pid, parent) of every live process.
    let links: Vec<(i32, i32)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // pid (comm) state ppid ...: comm may hold spaces and parentheses.
            let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
            let state = rest.next()?;
            let parent = rest.next()?.parse().ok()?;
            (state != "Z").then_some((pid, parent))
        })
        .collect();
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let spare = i32::try_from(spare).unwrap_or(-1);
    let mut found = vec![me];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        let children: Vec<i32> = links
            .iter()
            .filter(|(pid, p)| *p == parent && *pid != spare && !found.contains(pid))
            .map(|(pid, _)| *pid)
            .collect();
        found.extend(children);
        i += 1;
    }
    found.retain(|pid| *pid != me);
    found
}

/// Make this process the parent of its descendants that lose theirs (Linux: a child
/// subreaper), so that [`kill_and_wait`] can find and reap them, whatever group they are in.
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(2) PR_SET_CHILD_SUBREAPER takes a plain integer.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
}
