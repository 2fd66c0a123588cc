//! Resilience policies, each a tower layer over [`crate::call::UpstreamCall`]; they know
//! the call contract and the configuration, never a transport.

pub mod attempt;
pub mod breaker;
pub mod deadline;
pub mod load_shed;
pub mod retry;

#[cfg(test)]
pub(crate) mod test_support;
