//! Downstream transports: how clients reach seawall.

pub(crate) mod budget;
pub(crate) mod cors;
pub(crate) mod listener;
pub(crate) mod refusal;
pub mod streamable_http;
