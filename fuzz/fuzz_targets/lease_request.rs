//! A lease request body, as the handler reads it: JSON, the schema, integers, the typed request,
//! its command and fingerprint. Any input: an answer or a 400, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use leasekit_core::http::body::parse_valid;
use leasekit_core::lease::LeaseRequest;
use leasekit_core::schema::lease_input;

fuzz_target!(|data: &[u8]| {
    if let Ok((request, _)) = parse_valid::<LeaseRequest>(data, lease_input(), &["ttlSeconds", "token"]) {
        let _ = request.command();
        let _ = request.fingerprint();
    }
});
