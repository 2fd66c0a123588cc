//! seawall: a resilient gateway for MCP (Model Context Protocol) servers.
//!
//! The request path is assembled in [`app`]; read it first.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
// What `internals` opens is a window for the drivers, not an interface: the types its
// items mention may stay the crate's own.
#![cfg_attr(feature = "internals", allow(private_interfaces, private_bounds))]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

/// Declares modules that are the gateway's own: crate-private, and public (but hidden
/// from the documentation) under the `internals` feature, which the fuzz targets, the
/// benches and the integration tests turn on to drive them directly. Without it their
/// `pub` items and re-exports are the surface those drivers use, so neither
/// `unreachable_pub`, `dead_code` nor `unused_imports` is asked of them.
macro_rules! internal {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        #[allow(unreachable_pub, dead_code, unused_imports)]
        mod $name;
    )*};
}

pub mod app;
pub mod config;
pub mod demo;
pub mod reference;
pub mod telemetry;

internal!(jsonrpc, ndjson, resilience, sanitize, sse);

mod admin;
mod backoff;
mod call;
mod catalog;
mod client;
mod control;
mod downstream;
mod errors;
mod gateway;
mod h1;
mod hashing;
mod identity;
mod mcp;
mod policy;
mod routing;
mod session;
mod signals;
mod upstream;
mod validation;
mod workers;

#[cfg(feature = "internals")]
#[doc(hidden)] // for the fuzz targets `h1` and `h1_answer` and tests/it/framing.rs
pub use h1::offline as h1_offline;
#[cfg(feature = "internals")]
#[doc(hidden)] // for the fuzz target `sealed_id`
pub use session::sealed;
