//! The life of a paid call's payment, as pure functions of what the ledger holds and `now`.
//!
//! An authorization is consumed (`accepted`) before the work; the work runs; then exactly one
//! final status is recorded: `settled`, `settlement_failed` (the facilitator refused: kept for
//! reconciliation), `void` (nothing is owed) or `expired` (owed, but the authorization lapsed
//! before it could be settled). Three moments decide:
//!
//! - [`after_work`]: the call's own work ended; settle, void, or leave it open for the sweeper.
//! - [`resend`] and [`kept_answer`]: the same payment came again under its payment identifier;
//!   answer it again, make it wait, or refuse it.
//! - [`sweep`]: a payment left open past [`SWEEP_GRACE`]; settle, void or record it expired.
//!
//! The times that make these rules are policy and live here too: [`WORK_LIMIT`],
//! [`SWEEP_GRACE`], [`RESEND_WINDOW_MS`].

use crate::clock::Millis;
use std::time::Duration;

/// A ledger item's status. A stored value that is none of these is corrupt data, not a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Consumed; the work may be running, or a crash left it open.
    Accepted,
    Settled,
    SettlementFailed,
    Void,
    Expired,
}

impl Status {
    pub const ALL: [Status; 5] = [
        Status::Accepted,
        Status::Settled,
        Status::SettlementFailed,
        Status::Void,
        Status::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Accepted => "accepted",
            Status::Settled => "settled",
            Status::SettlementFailed => "settlement_failed",
            Status::Void => "void",
            Status::Expired => "expired",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == stored)
    }

    /// Whether the first call's answer was charged for (settled, or sent for settlement and
    /// refused there): what a resend may be answered from.
    pub fn charged(self) -> bool {
        matches!(self, Status::Settled | Status::SettlementFailed)
    }
}

/// How long the work of a paid call may take before the call gives up on it (502): an acquire
/// may wait 20 s for its permit and is answered by about 21 s. A Lambda's own timeout (26 s for
/// the lease and MCP functions, 10 s for the others) ends it there. It must stay well below
/// [`SWEEP_GRACE`], so that the sweeper never takes up a payment whose call is still working on it.
pub const WORK_LIMIT: Duration = Duration::from_secs(25);

/// How old an open payment must be before the sweeper closes it, by default: longer than the
/// work limit plus a settlement (the facilitator's own timeout is at most 10 s), with room for
/// clock skew between instances. `leasekit serve --settle-grace-seconds` may set another; every
/// rule that needs it takes it as an argument, so the sweeper and a resend's answer agree.
pub const SWEEP_GRACE: Duration = Duration::from_secs(45);

/// How long a payment identifier's resend is answered after its first acceptance: the lease
/// route's replay window (24 h, so that the first call's request record is still there to
/// replay), less a minute so that it is surely still there.
pub const RESEND_WINDOW_MS: Millis = crate::lease::REPLAY_WINDOW_MS - 60_000;

/// How a paid call's own work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// It answered afresh: the answer is what was paid for.
    Answered,
    /// It answered from a requestId's record: the first answer was paid for already.
    Replayed,
    /// It failed (bad input found late, a store failure): nothing was sold.
    Failed,
    /// It outlasted [`WORK_LIMIT`]: whether it committed is not known here.
    TimedOut,
}

/// What to do with the payment once the work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterWork {
    Settle,
    Void(&'static str),
    /// Leave it `accepted`: the sweeper settles it if the work committed, voids it if not.
    LeaveOpen,
}

/// After the work: a fresh answer is settled; a replay and a failure owe nothing; a call that ran
/// out of time cannot tell, so the sweeper decides from the evidence later.
pub fn after_work(work: Work) -> AfterWork {
    match work {
        Work::Answered => AfterWork::Settle,
        Work::Replayed => AfterWork::Void("a replay: the first answer was paid for"),
        Work::Failed => AfterWork::Void("the call failed: nothing was sold"),
        Work::TimedOut => AfterWork::LeaveOpen,
    }
}

/// What a resend of a payment under its payment identifier gets, from the first use's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resend {
    /// The first call was charged: answer again, settle nothing.
    Replay,
    /// The first call is still open: wait and send it again (409 `PAYMENT_IN_PROGRESS`).
    Wait,
    /// Charged, but past [`RESEND_WINDOW_MS`]: the answer may be gone (402).
    TooLate,
    /// The first call bought nothing (voided, or lapsed unsettled): pay again (402).
    Voided,
}

/// A resend under the payment identifier whose first use is `status`, accepted at `accepted`.
pub fn resend(status: Status, accepted: Millis, now: Millis) -> Resend {
    match status {
        Status::Accepted => Resend::Wait,
        s if s.charged() && now < accepted + RESEND_WINDOW_MS => Resend::Replay,
        s if s.charged() => Resend::TooLate,
        _ => Resend::Voided,
    }
}

/// What a replayed resend on a route that keeps its answer (a read, a claim) is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// The answer kept for it.
    Give,
    /// None kept yet, and the first call may still be between its work and keeping it: wait.
    Wait,
    /// None kept, and the first call is over: the answer is lost (409
    /// `PAYMENT_ANSWER_UNKNOWN`), never a fresh one sold again for the same payment.
    Unknown,
}

/// A replayed resend on a route that keeps its answer: `has_answer` whether one was kept, for a
/// first use accepted at `accepted`, with the deployment's sweep `grace`.
pub fn kept_answer(has_answer: bool, accepted: Millis, now: Millis, grace: Duration) -> Kept {
    match has_answer {
        true => Kept::Give,
        false if now < accepted + millis(grace) => Kept::Wait,
        false => Kept::Unknown,
    }
}

/// What the sweeper finds of an open payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    /// Its call answered (the work was done) but did not learn how settlement went.
    pub answered: bool,
    /// The answer it paid for is in the store: what its evidence points to, or the answer it
    /// kept for a resend under its payment identifier.
    pub committed: bool,
    /// The authorization is valid until this Unix time (s).
    pub valid_before: u64,
    /// What /settle needs was kept and reads back.
    pub settleable: bool,
}

/// The sweep's verdict on an open payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Settle,
    Void(&'static str),
    /// Owed, but too late (or impossible) to settle: recorded for reconciliation.
    Expire,
}

/// The sweep: nothing committed and nothing answered is void; what was sold is settled while the
/// authorization has `min_validity` seconds left, else it is expired.
pub fn sweep(open: &Open, now: Millis, min_validity: u64) -> Verdict {
    if !open.answered && !open.committed {
        return Verdict::Void("no committed answer: the call ended before its work did");
    }
    let now_s = u64::try_from(now.div_euclid(1000)).unwrap_or(0);
    if open.settleable && now_s + min_validity < open.valid_before {
        Verdict::Settle
    } else {
        Verdict::Expire
    }
}

/// The newest acceptance time a sweep at `now` takes up, with `grace`.
pub fn sweep_cutoff(now: Millis, grace: Duration) -> Millis {
    now - millis(grace)
}

fn millis(d: Duration) -> Millis {
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}

#[cfg(test)]
mod tests;
