//! The decision of each op family, with only the outcomes that family can have: an acquire's
//! (`Acquired`), a renew's or release's (`Held`: it never queues), a revoke's (`Revocation`), and
//! their conversions into the general [`Decision`] that `decide` answers for every op.

use super::{Asked, Decision, Write};
use crate::clock::Millis;
use crate::lease::request::Command;
use crate::witness::Witness;

/// An acquire's decision: what [`acquire`] answers. A retry handed its grant between calls is
/// not one of them (see [`ended_handoff`]), so a set member, which has no call to hand a grant to,
/// cannot be handed one.
#[derive(Debug, Clone, PartialEq)]
pub enum Acquired {
    Write(Write),
    Deny(Vec<Witness>),
    Queue {
        write: Option<Write>,
        witnesses: Vec<Witness>,
    },
    Refuse {
        write: Write,
        witnesses: Vec<Witness>,
    },
}

/// A renew's or a release's decision: what [`hold`] answers. Neither waits.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    Write(Write),
    Deny(Vec<Witness>),
    Refuse {
        write: Write,
        witnesses: Vec<Witness>,
    },
}

/// A revoke's decision: what [`revoke`] answers. It ends permits or finds none; it never waits
/// and never refuses for another reason.
#[derive(Debug, Clone, PartialEq)]
pub enum Revocation {
    End(Write),
    Deny(Vec<Witness>),
}

/// A renew or a release, by the holder of a permit: what [`hold`] decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderOp<'a> {
    Renew {
        holder: &'a str,
        token: u64,
        ttl_ms: Millis,
        /// The permit's new value (`None`: kept).
        value: Option<&'a str>,
    },
    Release {
        holder: &'a str,
        token: u64,
        /// A done release (docs/adr/0012): the resource stays finished after it.
        done: Option<Finish<'a>>,
    },
}

/// What a done release leaves (docs/adr/0012): the finisher's result, and how long the
/// resource stays finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finish<'a> {
    pub result: Option<&'a str>,
    pub keep_ms: Millis,
}

impl<'a> HolderOp<'a> {
    /// The renew or release `command` is, if it is one.
    pub fn of(command: &'a Command) -> Option<Self> {
        match command {
            Command::Renew {
                holder,
                token,
                ttl_ms,
                value,
            } => Some(HolderOp::Renew {
                holder,
                token: *token,
                ttl_ms: *ttl_ms,
                value: value.as_deref(),
            }),
            Command::Release {
                holder,
                token,
                done,
            } => Some(HolderOp::Release {
                holder,
                token: *token,
                done: done.as_ref().map(|d| Finish {
                    result: d.result.as_deref(),
                    keep_ms: d.keep_ms,
                }),
            }),
            Command::Acquire { .. }
            | Command::Get
            | Command::Watch { .. }
            | Command::Check { .. }
            | Command::Revoke { .. }
            | Command::Reopen { .. } => None,
        }
    }

    pub(super) fn holder(self) -> &'a str {
        match self {
            HolderOp::Renew { holder, .. } | HolderOp::Release { holder, .. } => holder,
        }
    }

    pub(super) fn token(self) -> u64 {
        match self {
            HolderOp::Renew { token, .. } | HolderOp::Release { token, .. } => token,
        }
    }
}

impl<'a> Asked<'a> {
    /// The acquire `command` is, if it is one.
    pub fn of(command: &'a Command) -> Option<Self> {
        match command {
            Command::Acquire {
                holder,
                ttl_ms,
                limit,
                wait_ms,
                ticket,
                value,
                ..
            } => Some(Asked {
                holder,
                ttl_ms: *ttl_ms,
                limit: *limit,
                wait_ms: *wait_ms,
                ticket: ticket.as_ref(),
                session: None,
                value: value.as_deref(),
            }),
            Command::Renew { .. }
            | Command::Release { .. }
            | Command::Get
            | Command::Watch { .. }
            | Command::Check { .. }
            | Command::Revoke { .. }
            | Command::Reopen { .. } => None,
        }
    }
}

/// A refusal, and the hand-off its read noticed, if the stored state needs one written.
pub(super) struct Refusal {
    pub(super) write: Option<Write>,
    pub(super) witnesses: Vec<Witness>,
}

impl From<Refusal> for Acquired {
    fn from(r: Refusal) -> Self {
        Held::from(r).into()
    }
}

impl From<Refusal> for Held {
    fn from(r: Refusal) -> Self {
        match r.write {
            Some(write) => Held::Refuse {
                write,
                witnesses: r.witnesses,
            },
            None => Held::Deny(r.witnesses),
        }
    }
}

impl From<Acquired> for Decision {
    fn from(d: Acquired) -> Self {
        match d {
            Acquired::Write(write) => Decision::Write(write),
            Acquired::Deny(witnesses) => Decision::Deny(witnesses),
            Acquired::Queue { write, witnesses } => Decision::Queue { write, witnesses },
            Acquired::Refuse { write, witnesses } => Decision::Refuse { write, witnesses },
        }
    }
}

impl From<Held> for Acquired {
    /// A renew's or a release's decision, as the one decision of a single resource's mutation
    /// (it never queues): how the service plans the three alike.
    fn from(d: Held) -> Self {
        match d {
            Held::Write(write) => Acquired::Write(write),
            Held::Deny(witnesses) => Acquired::Deny(witnesses),
            Held::Refuse { write, witnesses } => Acquired::Refuse { write, witnesses },
        }
    }
}

impl From<Held> for Decision {
    fn from(d: Held) -> Self {
        Acquired::from(d).into()
    }
}

impl From<Revocation> for Decision {
    fn from(d: Revocation) -> Self {
        match d {
            Revocation::End(write) => Decision::Write(write),
            Revocation::Deny(witnesses) => Decision::Deny(witnesses),
        }
    }
}
