//! CloudWatch metrics in the embedded metric format (EMF): a JSON line on stdout that Lambda's log
//! pipeline turns into a metric, with no API call and no SDK. Off unless `enable` was called (the
//! Lambda bootstrap does), so local runs keep stdout for the URL.

use crate::clock::now_ms;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};

pub const NAMESPACE: &str = "leasekit";

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Emit metrics from now on (Lambda only).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// The EMF line counting one `name`, without dimensions (what the stack's alarms watch).
pub fn line(name: &str, now: i64) -> String {
    json!({
        "_aws": {
            "Timestamp": now,
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [[]], "Metrics": [{"Name": name, "Unit": "Count"}]}]
        },
        name: 1
    })
    .to_string()
}

/// Count one `name` (e.g. `LeaseGranted`, `SettlementFailed`).
pub fn count(name: &str) {
    if ENABLED.load(Ordering::Relaxed) {
        println!("{}", line(name, now_ms()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_emf() {
        let v: serde_json::Value = serde_json::from_str(&line("LeaseGranted", 5)).unwrap();
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"],
            "LeaseGranted"
        );
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Namespace"], "leasekit");
        assert_eq!(v["_aws"]["Timestamp"], 5);
        assert_eq!(v["LeaseGranted"], 1);
    }
}
