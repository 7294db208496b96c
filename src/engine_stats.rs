//! What the embedded store's leader did, to see what serializes under load (issue #47): over
//! each window of [`WINDOW`], the groups it ran and their sizes, how long the calls waited for
//! their turn (queued until their group started), and the share of the window a leader was busy
//! running groups (a lone caller's fsync included; the thread's groups are fsynced by the
//! flusher, beside it). Logged at debug level, target `leasekit::engine_stats`
//! (`RUST_LOG=warn,leasekit::engine_stats=debug`), at the end of the first group past each
//! window; `bench/store_share.py` reads the lines. Kept by the leader only, so never contended.

use std::time::{Duration, Instant};

/// How often a summary is logged while calls come.
const WINDOW: Duration = Duration::from_secs(2);

/// Waits by powers of two of microseconds: bucket `i` holds waits below `2^i` µs.
const BUCKETS: usize = 24;

pub struct Stats {
    since: Instant,
    groups: u64,
    calls: u64,
    largest: usize,
    busy: Duration,
    waits: [u64; BUCKETS],
}

impl Stats {
    pub fn new() -> Self {
        Self {
            since: Instant::now(),
            groups: 0,
            calls: 0,
            largest: 0,
            busy: Duration::ZERO,
            waits: [0; BUCKETS],
        }
    }

    /// One group that started at `started`, ran for `busy`, of calls queued at `queued` (now
    /// for a lone caller's own call).
    pub fn group(
        &mut self,
        started: Instant,
        busy: Duration,
        queued: impl Iterator<Item = Instant>,
    ) {
        let mut size = 0;
        for at in queued {
            let micros = started.saturating_duration_since(at).as_micros();
            let bucket = (u128::BITS - micros.leading_zeros()) as usize;
            self.waits[bucket.min(BUCKETS - 1)] += 1;
            size += 1;
        }
        self.groups += 1;
        self.calls += size as u64;
        self.largest = self.largest.max(size);
        self.busy += busy;
        let now = Instant::now();
        let window = now.duration_since(self.since);
        if window >= WINDOW {
            if tracing::enabled!(tracing::Level::DEBUG) {
                tracing::debug!(
                    window_ms = window.as_millis() as u64,
                    groups = self.groups,
                    calls = self.calls,
                    mean_group = format_args!("{:.2}", self.calls as f64 / self.groups as f64),
                    largest_group = self.largest,
                    busy_share =
                        format_args!("{:.3}", self.busy.as_secs_f64() / window.as_secs_f64()),
                    wait_p50_us = self.quantile(0.5),
                    wait_p99_us = self.quantile(0.99),
                    "embedded store"
                );
            }
            *self = Self::new();
        }
    }

    /// The upper bound (µs) of the bucket holding the `q` quantile of the waits.
    fn quantile(&self, q: f64) -> u64 {
        let rank = (self.calls as f64 * q).ceil() as u64;
        let mut seen = 0;
        for (i, count) in self.waits.iter().enumerate() {
            seen += count;
            if seen >= rank.max(1) {
                return 1 << i;
            }
        }
        1 << (BUCKETS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_the_bucket_bounds_of_the_waits() {
        let mut stats = Stats::new();
        let start = Instant::now() + Duration::from_millis(10);
        // 98 calls that waited 3 µs, 2 that waited 1.5 ms.
        let queued = (0..98)
            .map(|_| start - Duration::from_micros(3))
            .chain((0..2).map(|_| start - Duration::from_micros(1500)));
        stats.group(start, Duration::from_millis(1), queued);
        assert_eq!((stats.groups, stats.calls, stats.largest), (1, 100, 100));
        assert_eq!(stats.quantile(0.5), 4);
        assert_eq!(stats.quantile(0.99), 2048);
    }
}
