//! x402 version 2 payments, scheme `exact` on EVM: an EIP-3009 `transferWithAuthorization` for
//! USDC, signed with EIP-712. Local checks first, then the facilitator's /verify; the work; then
//! /settle, only after the store committed.

pub mod check;
pub mod client;
pub mod eip712;
pub mod facilitator;
pub mod payment_identifier;
pub mod settings;
pub mod siwx;
pub mod types;
