//! Resilience settings: retries, circuit breakers and concurrency limits. Each has a full
//! form (under `defaults:`) and a partial form (per upstream) whose absent fields keep the
//! defaults.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::HumanDuration;

/// Retries of idempotent requests.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Most attempts per request, the first included (count). Default `3`; `1` disables retries.
    pub max_attempts: u32,
    /// Backoff base: attempt n waits U(0, min(max_delay, base_delay·2^n)) (duration). Default `100ms`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub base_delay: Duration,
    /// Longest backoff (duration). Default `2s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub max_delay: Duration,
    /// Retries allowed as a percentage of recent requests to the upstream (percent). Default `20`.
    pub budget_percent: f64,
    /// Retries always allowed per second, whatever the percentage (count). Default `1`.
    pub budget_min_per_sec: u32,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 3,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
            budget_percent: 20.0,
            budget_min_per_sec: 1,
        }
    }
}

/// Circuit breakers, one per upstream and one per tool.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// Sliding window over which rates are computed (duration). Default `30s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// Calls needed in the window before a rate can open the breaker (count). Default `20`.
    pub min_calls: u32,
    /// Failure rate in the window that opens the breaker (0–1). Default `0.5`.
    pub failure_rate: f64,
    /// Consecutive failures that open the breaker regardless of the rate (count); a
    /// success, or a gap longer than `window` between two failures, ends a run. Default `5`.
    pub consecutive_failures: u32,
    /// First open period (duration). Default `5s`. Doubles (with jitter) on each re-open.
    #[schemars(with = "HumanDuration")]
    #[serde(rename = "break", with = "humantime_serde")]
    pub break_duration: Duration,
    /// Longest open period (duration). Default `60s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub max_break: Duration,
    /// Probe calls admitted while half-open (count). Default `1`.
    pub half_open_probes: u32,
    /// A probe that takes longer than this fails (duration). Default `10s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub probe_timeout: Duration,
    /// A call slower than this is a slow call (duration). Default `30s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub slow_call: Duration,
    /// Slow-call rate in the window that opens the breaker (0–1). Default `0.8`.
    pub slow_call_rate: f64,
    /// Hide tools whose breaker is open from `tools/list`, and send
    /// `notifications/tools/list_changed` when they open or close. Default `false`.
    pub hide_open_tools: bool,
    /// Share this breaker's transitions with every replica on the same Redis
    /// (`breaker_sharing`): when one replica's breaker opens, closes or is held by the
    /// operator, the others' breakers of the same upstream or tool follow within a
    /// second. Requests still read local state only. Default `false`.
    pub shared: bool,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            window: Duration::from_secs(30),
            min_calls: 20,
            failure_rate: 0.5,
            consecutive_failures: 5,
            break_duration: Duration::from_secs(5),
            max_break: Duration::from_secs(60),
            half_open_probes: 1,
            probe_timeout: Duration::from_secs(10),
            slow_call: Duration::from_secs(30),
            slow_call_rate: 0.8,
            hide_open_tools: false,
            shared: false,
        }
    }
}

/// Load shedding per upstream.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ConcurrencyConfig {
    /// Requests in flight to the upstream at once (count). Default `64`.
    pub max_in_flight: usize,
    /// Requests that may wait for a slot; beyond it requests are refused at once (count). Default `16`.
    pub queue: usize,
    /// Longest wait for a slot before refusal (duration). Default `1s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub queue_timeout: Duration,
}

impl Default for ConcurrencyConfig {
    fn default() -> Self {
        ConcurrencyConfig { max_in_flight: 64, queue: 16, queue_timeout: Duration::from_secs(1) }
    }
}

macro_rules! partial {
    ($(#[$doc:meta])* $name:ident for $full:ident { $($(#[$fdoc:meta])* $field:ident : $ty:ty $(=> $with:literal)?),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name {
            $(
                $(#[$fdoc])*
                $(#[serde(with = $with)] #[schemars(with = "Option<HumanDuration>")])?
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $field: Option<$ty>,
            )*
        }

        impl $name {
            /// The defaults with this override's fields applied.
            pub fn apply(&self, base: &$full) -> $full {
                let mut out = *base;
                $( if let Some(v) = self.$field { out.$field = v; } )*
                out
            }
        }
    };
}

partial! {
    /// Per-upstream override of `defaults.retry`; absent fields keep the default.
    RetryOverrides for RetryConfig {
        /// See `defaults.retry.max_attempts`.
        max_attempts: u32,
        /// See `defaults.retry.base_delay`.
        base_delay: Duration => "humantime_serde",
        /// See `defaults.retry.max_delay`.
        max_delay: Duration => "humantime_serde",
        /// See `defaults.retry.budget_percent`.
        budget_percent: f64,
        /// See `defaults.retry.budget_min_per_sec`.
        budget_min_per_sec: u32,
    }
}

partial! {
    /// Per-upstream override of `defaults.breaker`; absent fields keep the default.
    BreakerOverrides for BreakerConfig {
        /// See `defaults.breaker.window`.
        window: Duration => "humantime_serde",
        /// See `defaults.breaker.min_calls`.
        min_calls: u32,
        /// See `defaults.breaker.failure_rate`.
        failure_rate: f64,
        /// See `defaults.breaker.consecutive_failures`.
        consecutive_failures: u32,
        /// See `defaults.breaker.break`.
        #[serde(rename = "break")]
        break_duration: Duration => "humantime_serde",
        /// See `defaults.breaker.max_break`.
        max_break: Duration => "humantime_serde",
        /// See `defaults.breaker.half_open_probes`.
        half_open_probes: u32,
        /// See `defaults.breaker.probe_timeout`.
        probe_timeout: Duration => "humantime_serde",
        /// See `defaults.breaker.slow_call`.
        slow_call: Duration => "humantime_serde",
        /// See `defaults.breaker.slow_call_rate`.
        slow_call_rate: f64,
        /// See `defaults.breaker.hide_open_tools`.
        hide_open_tools: bool,
        /// See `defaults.breaker.shared`.
        shared: bool,
    }
}

partial! {
    /// Per-upstream override of `defaults.concurrency`; absent fields keep the default.
    ConcurrencyOverrides for ConcurrencyConfig {
        /// See `defaults.concurrency.max_in_flight`.
        max_in_flight: usize,
        /// See `defaults.concurrency.queue`.
        queue: usize,
        /// See `defaults.concurrency.queue_timeout`.
        queue_timeout: Duration => "humantime_serde",
    }
}

/// How a failure is reported to the client.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    /// A `CallToolResult` with `isError: true` (a model can read it and adapt).
    #[default]
    Result,
    /// A JSON-RPC error.
    Error,
}

/// How much of an upstream's text (the message and `data` of a client-fault error, an
/// `isError` result) the sanitiser removes before the client sees it.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SanitizeLevel {
    /// Every URL, path, address, host name, credential and stack trace, even one the
    /// client itself sent.
    Strict,
    /// As `strict`, but a value that stands verbatim in the request's own arguments
    /// (or the URI it asked for) is kept, escaped, up to 256 bytes: it is no secret
    /// from that client, and a model needs it to correct its call.
    #[default]
    Standard,
    /// Credentials only (keys, tokens, passwords, `user:password@`, PEM blocks): paths,
    /// hosts, URLs and stack traces stay. For a server the operator trusts.
    Trusted,
}

/// One upstream's own error settings.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamErrorsConfig {
    /// Overrides `errors.sanitize` for this upstream. Default: `errors.sanitize`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sanitize: Option<SanitizeLevel>,
}

/// Error rewriting and validation.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ErrorsConfig {
    /// How a `tools/call` whose tool could not do its job (upstream internal error, crash,
    /// timeout, open circuit) is answered: `result` (`isError`) or `error` (JSON-RPC
    /// error). Default `result`.
    pub tool_failures: Report,
    /// Scrub the text of `isError` results coming from upstreams (stack traces, paths,
    /// hosts, credentials, control bytes; capped at 4 KiB). Default `true`.
    pub scrub_tool_errors: bool,
    /// Check `tools/call` arguments against the tool's `inputSchema` (from the
    /// upstream's `tools/list`) before any upstream traffic. Default `true`.
    pub validate_arguments: bool,
    /// How argument violations are answered: `result` (`isError` listing each
    /// violation's JSON Pointer) or `error` (-32602 with `data.validation_errors`).
    /// Default `result`.
    pub argument_errors: Report,
    /// Check `structuredContent` against the tool's `outputSchema`; a mismatch is
    /// answered as an `isError` result and the malformed data is never sent.
    /// Default `true`.
    pub validate_output: bool,
    /// What the sanitiser removes from upstreams' text: `strict`, `standard` (keeps what
    /// the client itself sent) or `trusted` (credentials only); an upstream may set its
    /// own (`upstreams[].errors.sanitize`). Default `standard`.
    pub sanitize: SanitizeLevel,
}

impl Default for ErrorsConfig {
    fn default() -> Self {
        ErrorsConfig {
            tool_failures: Report::Result,
            scrub_tool_errors: true,
            validate_arguments: true,
            argument_errors: Report::Result,
            validate_output: true,
            sanitize: SanitizeLevel::Standard,
        }
    }
}
