//! Resilience policies, each a tower layer over [`crate::upstream::service::UpstreamCall`].

pub mod breaker;
pub mod deadline;
pub mod load_shed;
pub mod retry;
