//! seawall: a resilient gateway for MCP (Model Context Protocol) servers.
//!
//! The request path is assembled in [`app`]; read it first.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod admin;
pub mod app;
mod backoff;
pub mod call;
pub mod config;
pub mod demo;
pub mod downstream;
pub mod errors;
pub mod gateway;
pub mod jsonrpc;
pub mod mcp;
pub mod policy;
pub mod resilience;
pub mod routing;
pub mod sanitize;
pub mod session;
mod signals;
pub mod sse;
pub mod telemetry;
pub mod upstream;
pub mod validation;
