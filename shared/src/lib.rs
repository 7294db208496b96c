//! The lease service library: everything the Lambda functions, the local server and the tests share.
//!
//! Layers, from the inside out:
//! - [`lease`]: the pure lease rules (`decide`), with no I/O and time passed in.
//! - [`store`]: the one storage implementation, on DynamoDB. All item mapping lives there.
//! - [`keys`]: API keys (generation, hashing, checking).
//! - [`http`]: the routers and the HTTP error type, served alike by Lambda and by `leasekit serve`.

pub mod auth;
pub mod bootstrap;
pub mod claims;
pub mod clock;
pub mod config;
pub mod discovery;
pub mod http;
pub mod keys;
pub mod lease;
pub mod metrics;
pub mod provenance;
pub mod schema;
pub mod store;
pub mod strict_json;
pub mod tenant;
pub mod witness;
pub mod x402;

/// The engine version reported in every answer's `versions`.
pub const ENGINE_VERSION: &str = concat!("leasekit/", env!("CARGO_PKG_VERSION"));
