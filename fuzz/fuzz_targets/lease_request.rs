//! A lease request body, as the handler reads it: JSON, the schema, integers, the typed request,
//! its command and fingerprint. Any input: an answer or a 400, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shared::http::body::parse_valid;
use shared::lease::LeaseRequest;
use shared::schema::lease_input;

fuzz_target!(|data: &[u8]| {
    if let Ok((request, _)) = parse_valid::<LeaseRequest>(data, lease_input(), &["ttlSeconds", "token"]) {
        let _ = request.command();
        let _ = request.fingerprint();
    }
});
