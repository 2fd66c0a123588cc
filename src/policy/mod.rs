//! Policies enforced before a request is routed. One concern per module.

pub mod admission;
pub(crate) mod auth;
pub(crate) mod authz;
pub(crate) mod cors;
pub(crate) mod glob;
pub mod origin;
pub mod rate_limit;
