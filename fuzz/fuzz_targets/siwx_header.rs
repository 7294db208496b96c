//! A SIGN-IN-WITH-X header: decode, build the EIP-4361 message, check it and recover the signer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use leasekit_core::x402::siwx::{decode, message, verify};

fuzz_target!(|data: &[u8]| {
    let Ok(header) = std::str::from_utf8(data) else { return };
    if let Ok(payload) = decode(header) {
        let _ = message(&payload);
        let _ = verify(&payload, "127.0.0.1:3000", "http://127.0.0.1:3000", "eip155:84532", 1_795_946_400_000);
    }
});
