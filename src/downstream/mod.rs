//! Downstream transports: how clients reach seawall.

pub(crate) mod budget;
pub(crate) mod listener;
pub(crate) mod refusal;
pub(crate) mod stdio;
pub mod streamable_http;
