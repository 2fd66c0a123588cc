//! Downstream transports: how clients reach seawall.

pub mod streamable_http;
