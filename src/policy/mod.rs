//! Policies enforced before a request is routed. One concern per module.

pub(crate) mod admission;
pub(crate) mod auth;
pub(crate) mod authz;
pub(crate) mod cors;
pub(crate) mod glob;
pub(crate) mod origin;
pub(crate) mod rate_limit;
