//! Time as the service sees it: Unix milliseconds from the server clock.
//!
//! The server clock alone decides expiry (a lease is held while `now < expiresAt`); callers' clocks
//! never enter a decision. Domain code takes `now` as an argument; only handlers read the clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, UTC.
pub type Millis = i64;

/// The current server time.
pub fn now_ms() -> Millis {
    // A clock before 1970 or past year 292 million is a broken host: clamp rather than panic.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// ISO 8601 UTC with milliseconds, e.g. `2026-11-29T10:00:00.000Z`.
pub fn iso8601(ms: Millis) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        ),
        // Out of the representable range (year beyond ±9999): still say something exact.
        Err(_) => format!("@{ms}ms"),
    }
}

/// The time an answer's ISO 8601 string names (as [`iso8601`] writes it, or any RFC 3339
/// time); `None` for anything else.
pub fn parse_iso8601(text: &str) -> Option<Millis> {
    let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339);
    i64::try_from(t.ok()?.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_writes() {
        for ms in [0, 1_795_946_400_123, -86_400_000] {
            assert_eq!(parse_iso8601(&iso8601(ms)), Some(ms));
        }
        assert_eq!(
            parse_iso8601("2026-11-29T11:00:00+01:00"),
            Some(1_795_946_400_000)
        );
        assert_eq!(parse_iso8601("yesterday"), None);
        assert_eq!(parse_iso8601("@5ms"), None);
    }

    #[test]
    fn formats_with_milliseconds_in_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_795_946_400_000), "2026-11-29T10:00:00.000Z");
        assert_eq!(iso8601(1_795_946_400_007), "2026-11-29T10:00:00.007Z");
    }

    #[test]
    fn now_is_after_2024() {
        assert!(now_ms() > 1_704_067_200_000);
    }
}
