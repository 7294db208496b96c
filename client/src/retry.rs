//! When a call is sent again: a call gets [`ATTEMPTS`] tries with the same requestId, after a
//! pause that doubles, or after what a 429's `Retry-After` asks if it asks little.

use std::time::Duration;

/// Attempts per call: the first and two retries (with the same requestId).
pub(crate) const ATTEMPTS: u32 = 3;

/// The pause before attempt `attempt` (1, 2, ...): what the last 429 `asked`, else 400 ms
/// doubling.
pub(crate) fn pause(attempt: u32, asked: Option<Duration>) -> Duration {
    asked.unwrap_or(Duration::from_millis(200 << attempt))
}

/// The longest a 429's Retry-After is waited out; a longer one is the call's error at once.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// A 429's `Retry-After` in seconds (a second if it has none; `None` if it is not seconds).
pub(crate) fn retry_after(header: Option<&[u8]>) -> Option<Duration> {
    match header {
        None => Some(Duration::from_secs(1)),
        Some(value) => std::str::from_utf8(value)
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
            .map(Duration::from_secs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_unless_a_429_asked() {
        assert_eq!(pause(1, None), Duration::from_millis(400));
        assert_eq!(pause(2, None), Duration::from_millis(800));
        assert_eq!(
            pause(2, Some(Duration::from_secs(1))),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn a_429s_retry_after_is_read_as_seconds() {
        assert_eq!(retry_after(None), Some(Duration::from_secs(1)));
        assert_eq!(retry_after(Some(b"3")), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(Some(b" 7 ")), Some(Duration::from_secs(7)));
        // An HTTP date, or garbage: not waited out.
        assert_eq!(retry_after(Some(b"Wed, 21 Oct 2026 07:28:00 GMT")), None);
        assert_eq!(retry_after(Some(b"-1")), None);
    }
}
