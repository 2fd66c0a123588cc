//! Downstream transports: how clients reach seawall.
//!
//! Over HTTP, [`endpoint`] checks and authenticates every request and hands it to the
//! front of its era: [`streamable_http`] (sessions, with [`resumable`] streams),
//! `modern` (2026-07-28) or [`sse_legacy`] (2024-11-05); what they share is in
//! [`http`]. [`stdio`] serves one client on stdin and stdout.

pub(crate) mod budget;
pub(crate) mod connection;
pub(crate) mod cors;
pub(crate) mod endpoint;
pub(crate) mod http;
mod http1;
pub(crate) mod listener;
mod modern;
pub(crate) mod refusal;
mod resumable;
mod run_to_end;
pub(crate) mod sse_legacy;
pub(crate) mod stdio;
mod streamable_http;
pub(crate) mod trusted_proxies;
