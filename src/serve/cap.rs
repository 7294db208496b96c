//! Who gives way at `--max-connections` (see `connections`): pure policy, no I/O. Each open
//! connection is seen as its owner (the account of its last request whose key checked out; the
//! keyless caller's otherwise) and what it could give up now; [`choose`] picks the one that
//! gives, [`Grace`] says how long a connection may keep what it is doing first.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What an open connection could give up at the cap, cheapest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Give {
    /// No request in flight (for its [`Grace`] at least): closed, nothing is lost.
    Quiet,
    /// A request whose body has been arriving for its grace or longer (a trickle is slowest
    /// first): closed, the request is not carried out.
    SlowBody,
    /// A call that is waiting: its wait ends now and it is answered with what it had come to (a
    /// grant that came first included), then the connection closes.
    Wait,
    /// A call being carried out: its answer closes the connection. Nothing is lost (the caller
    /// opens another for its next call), but the slot is free only once the answer is sent. An
    /// account whose every connection always has a call in flight, one after the other, gave
    /// nothing else, and shut every other caller out for as long as it kept on (the attack of
    /// 2026-12-07).
    AfterAnswer,
}

/// What the cap sees of one open connection.
pub(super) struct Seen {
    pub(super) owner: Option<Arc<str>>,
    pub(super) gives: Option<(Give, Instant)>,
}

/// Which connection gives up its slot at the cap (an index of `seen`), pure: one of the account
/// with the most connections open (the keyless caller's count as one account's; with a tie, any
/// of those), the cheapest it can give, the longest it could. `None` if that account has nothing
/// to give now: no other account pays for it (the attack's round 2: a smaller account's waits
/// were cut while the biggest kept its connections busy); its connections become quiet soon.
pub(super) fn choose(seen: &[Seen]) -> Option<usize> {
    let mut open: HashMap<Option<&str>, usize> = HashMap::new();
    for s in seen {
        *open.entry(s.owner.as_deref()).or_default() += 1;
    }
    let most = open.values().copied().max()?;
    seen.iter()
        .enumerate()
        .filter(|(_, s)| open[&s.owner.as_deref()] == most)
        .filter_map(|(i, s)| {
            let (give, since) = s.gives?;
            Some((std::cmp::Reverse(give), std::cmp::Reverse(since), i))
        })
        .max()
        .map(|(.., i)| i)
}

/// How long a connection must have been at something before it may give way at the cap.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grace {
    /// Reading a request head (or connected, nothing sent yet), or receiving its body: an honest
    /// caller sends a request at once and whole (64 KiB at most), so a tenth of a second. A
    /// flood of trickled heads or bodies then cycles through the cap fast: with a second each,
    /// the cap took in a connection a second per slot, the listen queue overflowed, and a keyed
    /// caller's connect was dropped and retried for 7-20 s (the attack of 2026-12-05, round 2).
    pub(super) head: Duration,
    /// Idle between requests: a second, so that a keep-alive caller between two requests keeps
    /// its connection (closing it races the caller's next request, which then fails). A tenth of
    /// a second once the newcomer has waited a second: a caller that keeps its connections in
    /// use with a request every so often cannot hold them (the attack's round 2: a request every
    /// 0.4 s on each of 64 connections kept everyone else out).
    pub(super) idle: Duration,
}

impl Grace {
    /// For a newcomer that has waited `waited` for its slot, on a server whose request heads
    /// have `header_timeout` (no grace is longer).
    pub(super) fn after(header_timeout: Duration, waited: Duration) -> Self {
        let short = header_timeout.min(Duration::from_millis(100));
        let long = header_timeout.min(Duration::from_secs(1));
        Self {
            head: short,
            idle: if waited >= long { short } else { long },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default --header-timeout.
    const HEADER: Duration = Duration::from_secs(5);

    #[test]
    fn a_head_has_a_tenth_of_a_second_and_an_idle_connection_a_second_until_the_newcomer_waited_one()
     {
        let fresh = Grace::after(HEADER, Duration::ZERO);
        assert_eq!(fresh.head, Duration::from_millis(100));
        assert_eq!(fresh.idle, Duration::from_secs(1));
        let pressed = Grace::after(HEADER, Duration::from_secs(1));
        assert_eq!(pressed.idle, Duration::from_millis(100));
        // Never longer than the header timeout itself.
        assert_eq!(
            Grace::after(Duration::from_millis(50), Duration::ZERO).idle,
            Duration::from_millis(50)
        );
    }

    fn seen(owner: Option<&str>, gives: Option<(Give, Instant)>) -> Seen {
        Seen {
            owner: owner.map(Arc::from),
            gives,
        }
    }

    #[test]
    fn the_account_with_the_most_connections_gives_way_first() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(5);
        let connections = [
            // b: one idle connection, idle the longest.
            seen(Some("b"), Some((Give::Quiet, t0))),
            // a: three, two of them waiting calls, one busy.
            seen(Some("a"), Some((Give::Wait, later))),
            seen(Some("a"), Some((Give::Wait, t0))),
            seen(Some("a"), None),
        ];
        // a's oldest wait, though b has an idle connection: a has more.
        assert_eq!(choose(&connections), Some(2));
        // Within one account the cheapest goes first: quiet, then a slow body, then a wait,
        // then a call's answer.
        let one = [
            seen(Some("a"), Some((Give::AfterAnswer, t0))),
            seen(Some("a"), Some((Give::Wait, t0))),
            seen(Some("a"), Some((Give::SlowBody, later))),
            seen(Some("a"), Some((Give::Quiet, later))),
        ];
        assert_eq!(choose(&one), Some(3));
        assert_eq!(choose(&one[..3]), Some(2));
        assert_eq!(choose(&one[..2]), Some(1));
        assert_eq!(choose(&one[..1]), Some(0));
    }

    #[test]
    fn only_the_account_with_the_most_connections_gives_way() {
        let t0 = Instant::now();
        let connections = [
            // a: two connections, both busy with calls that are not waits.
            seen(Some("a"), None),
            seen(Some("a"), None),
            // b: one wait, c: one quiet connection.
            seen(Some("b"), Some((Give::Wait, t0))),
            seen(Some("c"), Some((Give::Quiet, t0))),
        ];
        // a has nothing to give now: nobody else pays for it.
        assert_eq!(choose(&connections), None);
        // A tie at the top: either may give.
        let tie = [
            seen(Some("a"), None),
            seen(Some("b"), Some((Give::Quiet, t0))),
        ];
        assert_eq!(choose(&tie), Some(1));
    }

    #[test]
    fn keyless_connections_count_as_one_account_and_busy_ones_never_give() {
        let t0 = Instant::now();
        let connections = [
            seen(None, Some((Give::SlowBody, t0))),
            seen(None, None),
            seen(None, None),
            seen(Some("a"), Some((Give::Quiet, t0))),
            seen(Some("a"), Some((Give::Quiet, t0))),
        ];
        assert_eq!(choose(&connections), Some(0));
        let busy = [seen(None, None), seen(Some("a"), None)];
        assert_eq!(choose(&busy), None);
        assert_eq!(choose(&[]), None);
    }
}
