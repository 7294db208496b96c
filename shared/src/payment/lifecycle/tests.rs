//! Every branch of the payment lifecycle, on every status and on both sides of every boundary.

use super::*;

const T0: Millis = 1_800_000_000_000;

#[test]
fn every_status_reads_back_and_nothing_else_does() {
    for status in Status::ALL {
        assert_eq!(Status::parse(status.as_str()), Some(status));
        let json = serde_json::to_value(status).unwrap();
        assert_eq!(
            json,
            status.as_str(),
            "the ledger listing says the stored name"
        );
    }
    for stored in ["", "Settled", "settled ", "pending", "void\0"] {
        assert_eq!(Status::parse(stored), None, "{stored:?} is corrupt data");
    }
}

#[test]
fn charged_is_settled_or_refused_at_settlement() {
    for status in Status::ALL {
        let charged = match status {
            Status::Settled | Status::SettlementFailed => true,
            Status::Accepted | Status::Void | Status::Expired => false,
        };
        assert_eq!(status.charged(), charged, "{status:?}");
    }
}

#[test]
fn after_the_work_only_a_fresh_answer_is_settled() {
    for work in [Work::Answered, Work::Replayed, Work::Failed, Work::TimedOut] {
        let expected = match work {
            Work::Answered => AfterWork::Settle,
            Work::Replayed | Work::Failed => {
                let AfterWork::Void(reason) = after_work(work) else {
                    panic!("{work:?} owes nothing");
                };
                assert!(!reason.is_empty());
                AfterWork::Void(reason)
            }
            Work::TimedOut => AfterWork::LeaveOpen,
        };
        assert_eq!(after_work(work), expected, "{work:?}");
    }
}

#[test]
fn a_resend_is_replayed_within_its_window_only_if_charged() {
    let edge = T0 + RESEND_WINDOW_MS;
    for status in Status::ALL {
        for now in [T0, T0 + 1, edge - 1, edge, edge + 1] {
            let expected = match status {
                Status::Accepted => Resend::Wait,
                Status::Settled | Status::SettlementFailed if now < edge => Resend::Replay,
                Status::Settled | Status::SettlementFailed => Resend::TooLate,
                Status::Void | Status::Expired => Resend::Voided,
            };
            assert_eq!(
                resend(status, T0, now),
                expected,
                "{status:?} at {}",
                now - T0
            );
        }
    }
}

/// The 24 h window: a resend a millisecond inside it is answered, at its end it is not, and the
/// window ends before the lease route's replay window, so that the record it replays is there.
#[test]
fn the_resend_window_is_a_day_less_a_minute_inside_the_replay_window() {
    assert_eq!(RESEND_WINDOW_MS, 24 * 3_600_000 - 60_000);
    const { assert!(RESEND_WINDOW_MS < crate::lease::REPLAY_WINDOW_MS) };
    assert_eq!(
        resend(Status::Settled, T0, T0 + 24 * 3_600_000 - 60_001),
        Resend::Replay
    );
    assert_eq!(
        resend(Status::Settled, T0, T0 + 24 * 3_600_000 - 60_000),
        Resend::TooLate
    );
}

/// PAYMENT_ANSWER_UNKNOWN: no answer kept and the first call is past the grace; before it, the
/// first call may still be keeping it.
#[test]
fn a_kept_answer_is_given_awaited_or_unknown() {
    let grace = Duration::from_secs(45);
    let edge = T0 + 45_000;
    for has_answer in [true, false] {
        for now in [T0, edge - 1, edge, edge + 1, T0 + RESEND_WINDOW_MS] {
            let expected = match (has_answer, now < edge) {
                (true, _) => Kept::Give,
                (false, true) => Kept::Wait,
                (false, false) => Kept::Unknown,
            };
            assert_eq!(
                kept_answer(has_answer, T0, now, grace),
                expected,
                "{has_answer} at {}",
                now - T0
            );
        }
    }
    // Another deployment's grace moves the edge with it.
    let short = Duration::from_secs(2);
    assert_eq!(kept_answer(false, T0, T0 + 1_999, short), Kept::Wait);
    assert_eq!(kept_answer(false, T0, T0 + 2_000, short), Kept::Unknown);
}

#[test]
fn the_sweep_settles_what_was_sold_while_it_can() {
    let now = T0;
    let now_s = (T0 / 1000) as u64;
    let min = 6;
    for answered in [false, true] {
        for committed in [false, true] {
            for settleable in [false, true] {
                for valid_before in [now_s, now_s + min, now_s + min + 1, now_s + 3600] {
                    let open = Open {
                        answered,
                        committed,
                        valid_before,
                        settleable,
                    };
                    let expected = match (answered || committed, settleable) {
                        (false, _) => "void",
                        (true, true) if now_s + min < valid_before => "settle",
                        (true, _) => "expire",
                    };
                    let got = match sweep(&open, now, min) {
                        Verdict::Void(_) => "void",
                        Verdict::Settle => "settle",
                        Verdict::Expire => "expire",
                    };
                    assert_eq!(got, expected, "{open:?}");
                }
            }
        }
    }
}

#[test]
fn the_sweep_takes_up_what_is_older_than_its_grace() {
    assert_eq!(sweep_cutoff(T0, Duration::from_secs(45)), T0 - 45_000);
    assert_eq!(sweep_cutoff(T0, SWEEP_GRACE), T0 - 45_000);
    // The work and a settlement (the facilitator's timeout is at most 10 s) end before a sweep
    // may take the payment up.
    assert!(WORK_LIMIT.as_secs() + 10 < SWEEP_GRACE.as_secs());
}
