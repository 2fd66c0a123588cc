//! Every failure of a call, and its one classification.
//!
//! A failure is typed where it happens ([`UpstreamError`] inside a transport,
//! [`GatewayError`] everywhere else) and classified once, by [`GatewayError::class`]:
//! retry, breakers, endpoint ejection, metrics and the rewriter read the [`Class`]
//! instead of matching variants again.

use std::sync::Arc;
use std::time::Duration;

use super::answer::Health;
use super::cause::Cause;

/// Why a call to an upstream failed inside its transport. Each variant says whether the
/// request may have reached the upstream (see [`Class::reached`]).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum UpstreamError {
    /// The connection could not be opened (refused, DNS, TLS); nothing was sent.
    #[error("could not connect to the upstream: {0}")]
    Connect(#[source] Cause),
    /// The process could not be started, or is between restarts; nothing was sent.
    #[error("the upstream process is not running: {0}")]
    NotRunning(String),
    /// The upstream did not complete its initialize handshake.
    #[error("the upstream failed its initialize handshake: {0}")]
    Handshake(String),
    /// The connection broke after the request was (possibly) sent.
    #[error("the connection to the upstream broke: {0}")]
    Io(#[source] Cause),
    /// The upstream process exited while the request was in flight.
    #[error("the upstream process exited while the request was in flight")]
    ProcessExited {
        /// Whether the evidence points at this request's tool (it was alone in flight,
        /// or its tool had a call in flight at the process's previous death too): only
        /// then may the death count against the tool.
        implicated: bool,
    },
    /// The upstream process that was serving crashed and is being restarted (it was
    /// exiting when the request was to be written, or is not back within the attempt's
    /// time): nothing was sent.
    #[error("the upstream process is being restarted; the request was not sent")]
    Restarting,
    /// The upstream answered with an HTTP status that is not a valid MCP answer.
    #[error("the upstream answered HTTP {status}")]
    HttpStatus {
        /// The status code.
        status: u16,
        /// `Retry-After`, when given in seconds.
        retry_after: Option<Duration>,
    },
    /// The upstream sent something that is not valid MCP (bad JSON, wrong content type, no answer).
    #[error("the upstream broke the protocol: {0}")]
    Protocol(String),
    /// A message from the upstream exceeded the configured size limit.
    #[error("a message from the upstream exceeded {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The upstream session ended and could not be re-established.
    #[error("the upstream session was lost: {0}")]
    SessionLost(String),
}

impl UpstreamError {
    /// Whether the upstream may have received (and acted on) the request.
    pub(crate) fn may_have_reached(&self) -> bool {
        !matches!(
            self,
            UpstreamError::Connect(_)
                | UpstreamError::NotRunning(_)
                | UpstreamError::Handshake(_)
                | UpstreamError::Restarting
        )
    }

    /// One sentence a client can act on, without the raw detail.
    pub(crate) fn summary(&self, upstream: &str) -> String {
        match self {
            UpstreamError::Connect(_)
            | UpstreamError::NotRunning(_)
            | UpstreamError::Handshake(_)
            | UpstreamError::Restarting => format!("upstream '{upstream}' is unavailable; the request was not sent"),
            UpstreamError::ProcessExited { .. } => {
                format!("upstream '{upstream}' crashed while handling the request; the outcome is unknown")
            }
            UpstreamError::Io(_) | UpstreamError::SessionLost(_) => {
                format!("the connection to upstream '{upstream}' broke; the outcome is unknown")
            }
            UpstreamError::HttpStatus { status, .. } => format!("upstream '{upstream}' answered HTTP {status}"),
            UpstreamError::Protocol(_) => format!("upstream '{upstream}' sent an invalid answer"),
            UpstreamError::TooLarge { limit } => {
                format!("upstream '{upstream}' sent an answer larger than {limit} bytes")
            }
        }
    }
}

/// One way a `tools/call`'s arguments break the tool's input schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArgumentViolation {
    /// Where: a JSON Pointer into the arguments (empty for the arguments as a whole).
    pub pointer: String,
    /// What is wrong, already sanitised.
    pub message: String,
}

/// A failure, typed by where it came from.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum GatewayError {
    /// The client sent params the gateway cannot act on.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// The client's request is not valid for this session (e.g. a second `initialize`).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The method is not known to the gateway or any upstream it could route to.
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// A `tools/call`'s arguments break the tool's `inputSchema`; nothing was sent.
    #[error("the arguments of tool '{tool}' do not match its input schema")]
    InvalidArguments {
        /// The tool as the client named it.
        tool: String,
        /// What is wrong (a few at most), each at its JSON Pointer.
        violations: Arc<[ArgumentViolation]>,
    },
    /// A tool name that no upstream serves.
    #[error("unknown tool: {0}")]
    UnknownTool(String),
    /// A prompt name that no upstream serves.
    #[error("unknown prompt: {0}")]
    UnknownPrompt(String),
    /// A resource URI that no upstream serves.
    #[error("resource not found: {0}")]
    ResourceNotFound(String),
    /// The client cancelled the request.
    #[error("request cancelled")]
    Cancelled,
    /// The gateway is shutting down and its grace period ended before the request did.
    #[error("stopped at the end of the shutdown grace period")]
    ShuttingDown,
    /// The request's overall deadline passed.
    #[error("upstream '{upstream}' did not answer within {after:?}")]
    Timeout {
        /// The upstream.
        upstream: Arc<str>,
        /// The deadline that passed.
        after: Duration,
    },
    /// One attempt got no answer within the attempt timeout; the request may go on.
    #[error("an attempt to upstream '{upstream}' got no answer within {after:?}")]
    AttemptTimeout {
        /// The upstream.
        upstream: Arc<str>,
        /// The attempt timeout that passed.
        after: Duration,
        /// The endpoint the attempt went to, for replicated upstreams.
        endpoint: Option<u16>,
    },
    /// Talking to an upstream failed.
    #[error("upstream '{upstream}': {source}")]
    Upstream {
        /// The upstream.
        upstream: Arc<str>,
        /// What went wrong.
        source: UpstreamError,
        /// The endpoint the attempt went to, for replicated upstreams.
        endpoint: Option<u16>,
    },
    /// The upstream is not connected for this session and could not be reached.
    #[error("upstream '{upstream}' is unavailable: {reason}")]
    Unavailable {
        /// The upstream.
        upstream: Arc<str>,
        /// Why (logged only).
        reason: String,
    },
    /// A circuit breaker is open: the call was refused without upstream traffic.
    #[error(
        "circuit open for upstream '{upstream}'{}{}",
        tool.as_deref().map(|t| format!(" tool '{t}'")).unwrap_or_default(),
        isolated.as_deref().map(|r| format!(", isolated by the operator: {r}")).unwrap_or_default()
    )]
    CircuitOpen {
        /// The upstream.
        upstream: Arc<str>,
        /// The tool whose breaker is open (None: the upstream's own breaker).
        tool: Option<Arc<str>>,
        /// When the breaker will admit a probe (meaningless while `isolated`).
        retry_after: Duration,
        /// The operator's reason, while the breaker is held open by hand.
        isolated: Option<Arc<str>>,
    },
    /// Too many requests in flight (to one upstream, one session, or the gateway).
    #[error("overloaded: {scope}")]
    Overloaded {
        /// What is full ("upstream 'x'", "session" or "gateway").
        scope: String,
        /// When to try again.
        retry_after: Duration,
    },
    /// A rate limit refused the request (see `policy::rate_limit`).
    #[error("rate limited: {scope}")]
    RateLimited {
        /// Which limit refused it (`principal`, `tool`, `upstream` or `global`).
        scope: String,
        /// When the limit admits the request again.
        retry_after: Duration,
    },
    /// Authorisation refused the request; it is answered as `answer` (an unknown name,
    /// so a denied name's existence is not revealed), and counted as `denied`.
    #[error("denied by authorisation: {answer}")]
    Denied {
        /// How the client is answered.
        answer: Box<GatewayError>,
    },
    /// A bug or resource exhaustion inside seawall.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Where a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The client's request is wrong.
    Client,
    /// A policy of seawall's refused it (load shedding, circuit breaker).
    Policy,
    /// The connection or process to the upstream failed.
    UpstreamTransport,
    /// The upstream answered something that is not valid MCP.
    UpstreamProtocol,
    /// The upstream's tool or handler failed (an upstream JSON-RPC error).
    UpstreamTool,
    /// seawall itself.
    Gateway,
}

impl Origin {
    /// A short name for logs and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Origin::Client => "client",
            Origin::Policy => "policy",
            Origin::UpstreamTransport => "upstream_transport",
            Origin::UpstreamProtocol => "upstream_protocol",
            Origin::UpstreamTool => "upstream_tool",
            Origin::Gateway => "gateway",
        }
    }
}

/// Whether a failed attempt may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Never (final answers, refusals, client faults, the overall deadline).
    Never,
    /// The request never left the gateway: safe to send once more whatever the method.
    NotSent,
    /// Only if sending the request twice is safe.
    IfIdempotent,
    /// Only if idempotent, and no sooner than this (the upstream's `Retry-After`).
    After(Duration),
}

/// What one failure means to every reader, decided in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Class {
    /// Where it came from.
    pub origin: Origin,
    /// Whether the upstream may have seen the request.
    pub reached: bool,
    /// Whether another attempt may follow.
    pub retry: Retry,
    /// What it says about the health of the upstream or tool.
    pub health: Health,
    /// The `outcome` label of `seawall_requests_total`.
    pub outcome: &'static str,
    /// The `reason` label of `seawall_retries_total`.
    pub retry_reason: &'static str,
}

impl GatewayError {
    /// The one classification of this failure.
    pub(crate) fn class(&self) -> Class {
        use Health::{Irrelevant, NoAnswer, Unreachable};
        let refused = |origin, outcome| Class {
            origin,
            reached: false,
            retry: Retry::Never,
            health: Irrelevant,
            outcome,
            retry_reason: "other",
        };
        match self {
            GatewayError::InvalidParams(_)
            | GatewayError::InvalidArguments { .. }
            | GatewayError::InvalidRequest(_)
            | GatewayError::MethodNotFound(_)
            | GatewayError::UnknownTool(_)
            | GatewayError::UnknownPrompt(_)
            | GatewayError::ResourceNotFound(_) => refused(Origin::Client, "refused"),
            GatewayError::Cancelled => refused(Origin::Client, "cancelled"),
            GatewayError::CircuitOpen { .. } => refused(Origin::Policy, "circuit_open"),
            GatewayError::Overloaded { .. } => refused(Origin::Policy, "shed"),
            GatewayError::RateLimited { .. } => refused(Origin::Policy, "rate_limited"),
            GatewayError::Denied { .. } => refused(Origin::Policy, "denied"),
            GatewayError::Internal(_) => refused(Origin::Gateway, "refused"),
            // It may have reached the upstream; whatever it did there, the call was cut
            // short by seawall and says nothing about the upstream's health.
            GatewayError::ShuttingDown => Class { reached: true, ..refused(Origin::Gateway, "shutdown") },
            GatewayError::Timeout { .. } => Class {
                origin: Origin::UpstreamTransport,
                reached: true,
                retry: Retry::Never,
                health: NoAnswer,
                outcome: "timeout",
                retry_reason: "timeout",
            },
            GatewayError::AttemptTimeout { .. } => Class {
                origin: Origin::UpstreamTransport,
                reached: true,
                retry: Retry::IfIdempotent,
                health: NoAnswer,
                outcome: "timeout",
                retry_reason: "attempt_timeout",
            },
            GatewayError::Unavailable { .. } => Class {
                origin: Origin::UpstreamTransport,
                reached: false,
                retry: Retry::Never,
                health: Unreachable,
                outcome: "upstream_error",
                retry_reason: "not_sent",
            },
            GatewayError::Upstream { source, .. } => upstream_class(source),
        }
    }

    /// The endpoint the failed attempt went to, for replicated upstreams.
    pub(crate) fn endpoint(&self) -> Option<u16> {
        match self {
            GatewayError::Upstream { endpoint, .. } | GatewayError::AttemptTimeout { endpoint, .. } => *endpoint,
            _ => None,
        }
    }
}

fn upstream_class(source: &UpstreamError) -> Class {
    use Health::{Irrelevant, Unreachable};
    let transport = |retry, health, retry_reason| Class {
        origin: Origin::UpstreamTransport,
        reached: source.may_have_reached(),
        retry,
        health,
        outcome: "upstream_error",
        retry_reason,
    };
    match source {
        UpstreamError::Connect(_) | UpstreamError::NotRunning(_) | UpstreamError::Handshake(_) => {
            transport(Retry::NotSent, Unreachable, "not_sent")
        }
        UpstreamError::ProcessExited { implicated: true } => {
            transport(Retry::IfIdempotent, Health::Crashed, "process_exited")
        }
        // A death that points at no call in particular (several in flight, none seen at
        // the previous death): nothing is said about this call's tool.
        UpstreamError::ProcessExited { implicated: false } => {
            transport(Retry::IfIdempotent, Irrelevant, "process_exited")
        }
        // A crash already under way: nothing was sent, so any request may go again, and
        // it says nothing about the tool or the upstream (the call that met the crash
        // counted it; the supervisor is restarting the process).
        UpstreamError::Restarting => transport(Retry::NotSent, Irrelevant, "process_exited"),
        UpstreamError::Io(_) | UpstreamError::SessionLost(_) => {
            transport(Retry::IfIdempotent, Unreachable, "connection")
        }
        UpstreamError::HttpStatus { status, retry_after } => {
            let retry = match (status, retry_after) {
                // RFC 9110: 429 and 503 may both say when to come back.
                (429 | 503, Some(after)) => Retry::After(*after),
                (429 | 502..=504, _) => Retry::IfIdempotent,
                _ => Retry::Never,
            };
            let health = match status {
                // The upstream asks us to slow down; counting it would turn rate
                // limiting into an outage.
                429 => Irrelevant,
                500..=599 => Unreachable,
                _ => Health::Answered,
            };
            let reason = if *status == 429 { "rate_limited" } else { "http_status" };
            transport(retry, health, reason)
        }
        UpstreamError::Protocol(_) => {
            Class { origin: Origin::UpstreamProtocol, ..transport(Retry::Never, Unreachable, "protocol") }
        }
        UpstreamError::TooLarge { .. } => {
            Class { origin: Origin::UpstreamProtocol, ..transport(Retry::Never, Irrelevant, "too_large") }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(source: UpstreamError) -> GatewayError {
        GatewayError::Upstream { upstream: Arc::from("u"), source, endpoint: None }
    }

    #[test]
    fn what_never_left_the_gateway_is_marked_so() {
        for e in [UpstreamError::Connect("x".into()), UpstreamError::NotRunning("x".into())] {
            let class = up(e).class();
            assert!(!class.reached);
            assert_eq!(class.retry, Retry::NotSent);
            assert_eq!(class.health, Health::Unreachable);
        }
        assert!(up(UpstreamError::Io("reset".into())).class().reached);
        // A process being restarted: nothing sent, and nothing said about health.
        let exiting = up(UpstreamError::Restarting).class();
        assert!(!exiting.reached);
        assert_eq!((exiting.retry, exiting.health), (Retry::NotSent, Health::Irrelevant));
    }

    #[test]
    fn retry_after_is_honoured_on_429_and_503() {
        for status in [429, 503] {
            let e = up(UpstreamError::HttpStatus { status, retry_after: Some(Duration::from_secs(2)) });
            assert_eq!(e.class().retry, Retry::After(Duration::from_secs(2)));
        }
        let plain = up(UpstreamError::HttpStatus { status: 503, retry_after: None });
        assert_eq!(plain.class().retry, Retry::IfIdempotent);
        let server = up(UpstreamError::HttpStatus { status: 500, retry_after: None });
        assert_eq!(server.class().retry, Retry::Never);
        assert_eq!(server.class().health, Health::Unreachable);
        let limited = up(UpstreamError::HttpStatus { status: 429, retry_after: None });
        assert_eq!(limited.class().health, Health::Irrelevant);
        assert_eq!(up(UpstreamError::HttpStatus { status: 404, retry_after: None }).class().health, Health::Answered);
    }

    #[test]
    fn refusals_and_deadlines_are_final() {
        assert_eq!(GatewayError::Cancelled.class().retry, Retry::Never);
        assert_eq!(GatewayError::Cancelled.class().outcome, "cancelled");
        let t = GatewayError::Timeout { upstream: Arc::from("u"), after: Duration::from_secs(1) };
        assert_eq!(t.class().retry, Retry::Never);
        assert_eq!(t.class().health, Health::NoAnswer);
        let a =
            GatewayError::AttemptTimeout { upstream: Arc::from("u"), after: Duration::from_secs(1), endpoint: Some(1) };
        assert_eq!(a.class().retry, Retry::IfIdempotent);
        assert_eq!(a.endpoint(), Some(1));
    }
}
