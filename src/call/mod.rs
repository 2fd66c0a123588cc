//! The call contract: what every layer of an upstream stack handles, whatever the
//! transport below and the policies around it.
//!
//! - [`UpstreamCall`]: one request on its way to one upstream (cloned per attempt).
//! - [`Answer`]: the upstream's answer, parsed once (`isError`, error code).
//! - [`GatewayError`] and its one classification, [`Class`]: where a failure came from,
//!   whether it reached the upstream, whether it may be retried, what it says about health.
//! - [`EventSink`], [`Activity`]: where related upstream messages go, and their count.
//! - [`Clock`]: the request's deadline.
//! - [`Transport`]: what the upstream links implement; [`SendAttempt`] is the bottom of a stack.
//!
//! It depends only on [`crate::jsonrpc`], [`crate::mcp`] and the W3C trace context of
//! [`crate::mcp::trace_context`]; resilience layers and transports depend on
//! it, never on each other.

mod answer;
mod cause;
mod clock;
mod events;
mod failure;
mod request;
mod transport;

pub(crate) use answer::{Answer, Health, Reply};
pub(crate) use cause::Cause;
pub(crate) use clock::Clock;
pub(crate) use events::{Activity, EVENT_BUFFER, EventRx, EventSink, EventTx, Tagged, UpstreamEvent, events};
pub(crate) use failure::{ArgumentViolation, Class, GatewayError, Origin, Retry, UpstreamError};
pub(crate) use request::{AttachedSession, BoxFuture, CallTrace, Link, Transport, UpstreamCall};
pub(crate) use transport::{CallFuture, Holding, SendAttempt, UpstreamService};

/// A fresh upstream request id; ids are never reused in the life of the process. They
/// count up from a random start below 2^40, so that replicas re-attached to one upstream
/// session send different ids, and stay far below 2^53 for peers that read numbers as
/// doubles.
pub(crate) fn fresh_id() -> crate::jsonrpc::Id {
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT_ID: LazyLock<AtomicU64> = LazyLock::new(|| AtomicU64::new(1 + rand::random_range(0..1u64 << 40)));
    crate::jsonrpc::Id::number(NEXT_ID.fetch_add(1, Ordering::Relaxed))
}
