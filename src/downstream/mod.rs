//! Downstream transports: how clients reach seawall.

pub(crate) mod budget;
pub(crate) mod cors;
pub(crate) mod listener;
mod modern;
pub(crate) mod refusal;
mod resumable;
pub(crate) mod sse_legacy;
pub(crate) mod stdio;
pub mod streamable_http;
