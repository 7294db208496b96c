//! Leases: the rules (pure) and the answers. The service that applies them through the store is
//! [`crate::service::lease`].
//!
//! A lease on a (tenant, resource) is held while `now < expires_at` by the server clock. Each new
//! acquisition gets a fencing token one above the last token ever issued for that (tenant,
//! resource); the counter lives in the lease item, which is never deleted, so tokens never repeat
//! across release, expiry, restarts or clean-up.

pub mod answer;
pub mod decide;
pub mod model;
pub mod ops;
pub mod request;
pub mod rules;
pub mod session;

pub use answer::LeaseAnswer;
pub use decide::{Decision, Effect, Guard, Write, as_of, decide};
pub use model::{LeaseState, MAX_TOKEN};
pub use ops::Op;
pub use request::{Command, LeaseRequest};

/// How long a requestId's answer is replayed (ms).
pub const REPLAY_WINDOW_MS: crate::clock::Millis = 24 * 3600 * 1000;
