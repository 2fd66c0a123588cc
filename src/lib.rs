//! seawall: a resilient gateway for MCP (Model Context Protocol) servers.
//!
//! The request path is assembled in [`app`]; read it first.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub(crate) mod admin;
pub mod app;
mod backoff;
pub(crate) mod call;
pub(crate) mod catalog;
pub(crate) mod client;
pub mod config;
mod control;
pub mod demo;
pub(crate) mod downstream;
pub mod errors;
pub(crate) mod gateway;
pub(crate) mod h1;
#[doc(hidden)] // public for the fuzz target `h1` and tests/it/framing.rs
pub use h1::offline as h1_offline;
mod hashing;
pub(crate) mod identity;
pub mod jsonrpc;
pub(crate) mod mcp;
#[doc(hidden)] // public for the fuzz targets in fuzz/
pub mod ndjson;
pub(crate) mod policy;
pub mod resilience;
pub(crate) mod routing;
pub mod sanitize;
pub(crate) mod session;
#[doc(hidden)] // public for the fuzz targets in fuzz/
pub use session::sealed;
mod signals;
pub mod sse;
pub mod telemetry;
pub(crate) mod upstream;
pub(crate) mod validation;
mod workers;
