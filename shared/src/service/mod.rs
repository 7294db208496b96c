//! The services: they apply the rules ([`crate::lease`], [`crate::claims`], [`crate::x402`]'s
//! checks) through the store, and sign what they answer. Nothing below this layer does I/O but
//! the store and the facilitator client; nothing here knows HTTP.

mod cursor;
pub mod lease;
pub mod payments;
mod wait_shares;
mod waiting;

pub use wait_shares::ShareTaken;
pub use waiting::{HangUpWatch, HungUp, carrying_hang_up, this_hang_up, watching_hang_up};
