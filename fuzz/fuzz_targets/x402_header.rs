//! A PAYMENT-SIGNATURE header: decode, then every local check (EIP-712, signer recovery).
#![no_main]

use libfuzzer_sys::fuzz_target;
use leasekit_core::x402::check::{check, decode};
use leasekit_core::x402::settings::{BASE_SEPOLIA, BASE_SEPOLIA_USDC, PaymentSettings};

fuzz_target!(|data: &[u8]| {
    let Ok(header) = std::str::from_utf8(data) else { return };
    let Ok(settings) = PaymentSettings::new(BASE_SEPOLIA, BASE_SEPOLIA_USDC, "USDC", "2", BASE_SEPOLIA_USDC) else { return };
    if let Ok(payload) = decode(header) {
        let _ = check(payload, &[settings.requirements(5_000)], &settings, 1_795_946_400);
    }
});
