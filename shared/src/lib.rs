//! The lease service library: everything the Lambda functions, the local server and the tests share.
//!
//! Layers, from the inside out. A module uses only modules of its own layer or of the layers
//! before it, and no two modules use each other, directly or round a cycle (`tests/layers.rs`
//! reads the `crate::` paths and checks both against this list):
//! 1. Foundations: [`clock`] (time in ms), [`witness`] (why an input or a decision failed),
//!    [`strict_json`] (JSON without duplicate names), [`metrics`] (EMF counters).
//! 2. Rules and formats, no I/O: [`lease`] (the pure `decide`, requests, answers), [`claims`],
//!    [`keys`] (API keys), [`tenant`], [`schema`] (the request schemas), [`payment`] (a paid
//!    call's payment lifecycle: every settle, void, resend and sweep rule), [`provenance`] (signed
//!    answers: the credential, its proof, its check), [`x402`] (the payment protocol; its one
//!    I/O is the facilitator client).
//! 3. Storage: [`store`], the one implementation, on DynamoDB; it maps the types of layer 2.
//! 4. Settings and services: [`config`] (from the environment), [`service`] (leases and payments
//!    applied through the store), [`auth`] (API keys checked against the store).
//! 5. The edge: [`discovery`] (OpenAPI, catalog, docs), [`http`] (the routers and the one error
//!    type, served alike by Lambda and by `leasekit serve`), [`bootstrap`] (a Lambda's start).

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
pub mod payment;
pub mod provenance;
pub mod schema;
pub mod service;
pub mod store;
pub mod strict_json;
pub mod tenant;
pub mod witness;
pub mod x402;

/// The engine version reported in every answer's `versions`.
pub const ENGINE_VERSION: &str = concat!("leasekit/", env!("CARGO_PKG_VERSION"));
