//! Payments as rules, no I/O: the life of one paid call's payment ([`lifecycle`]). The store keeps
//! its states, the service and the edge carry out what these functions decide; nothing else
//! decides.

pub mod lifecycle;

pub use lifecycle::Status;
