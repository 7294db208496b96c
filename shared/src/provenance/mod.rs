//! Signed answers: `_provenance` = a C2PA-aligned manifest and a W3C Verifiable Credential 2.0
//! secured with an `eddsa-jcs-2022` Data Integrity proof by the service's `did:key`, so anyone
//! can check an answer offline with the public key alone.

pub mod answer;
pub mod did;
pub mod issuer;
pub mod jcs;
pub mod proof;
pub mod verify;

pub use issuer::Issuer;
