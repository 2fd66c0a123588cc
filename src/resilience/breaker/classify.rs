//! How a finished call counts on the breakers that saw it. What a failure says about
//! health is decided once, by [`crate::call::GatewayError::class`] and
//! [`crate::call::Answer::health`]; this module only splits it between the upstream's
//! breaker and the tool's.

#[cfg(test)]
use std::time::Duration;

use crate::call::{Answer, GatewayError, Health};

/// How one call counts on a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The upstream (or tool) did its job, even if the answer was an error the request caused.
    Success,
    /// The upstream (or tool) could not do its job.
    Failure,
    /// Says nothing about health (client cancellation, seawall's own refusals): not counted.
    Ignored,
}

/// An [`Outcome`] and whether the call was slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// How the call counts.
    pub outcome: Outcome,
    /// The call took longer than `slow_call` (only counted when the outcome is not ignored).
    pub slow: bool,
}

impl Verdict {
    /// A verdict that is not slow.
    pub fn new(outcome: Outcome) -> Verdict {
        Verdict { outcome, slow: false }
    }

    /// The verdict of a breaker that sees every call; `slow` is dropped for ignored calls.
    pub fn of(health: Health, slow: bool) -> Verdict {
        let outcome = match health {
            Health::Answered => Outcome::Success,
            Health::FailedAnswer | Health::Unreachable | Health::NoAnswer => Outcome::Failure,
            Health::Crashed | Health::Irrelevant => Outcome::Ignored,
        };
        Verdict { outcome, slow: slow && outcome != Outcome::Ignored }
    }
}

/// What a finished call says about health.
pub fn health(result: &Result<Answer, GatewayError>) -> Health {
    match result {
        Ok(answer) => answer.health(),
        Err(e) => e.class().health,
    }
}

/// How a finished call counts on a breaker that sees every call: its outcome, and
/// whether it took longer than `slow`.
#[cfg(test)]
pub fn outcome(result: &Result<Answer, GatewayError>, elapsed: Duration, slow: Duration) -> Verdict {
    Verdict::of(health(result), elapsed > slow)
}

/// How a `tools/call` counts on the upstream's breaker and on the tool's, when both see
/// it. Each failure counts once, on the breaker it says something about, so that one
/// broken tool does not open the whole upstream:
///
/// | health         | upstream                  | tool           |
/// |----------------|---------------------------|----------------|
/// | `Answered`     | success (never slow)      | success (slow?) |
/// | `FailedAnswer` | success: it answered      | failure        |
/// | `Crashed`      | ignored: it is restarted  | ignored here¹  |
/// | `Unreachable`  | failure                   | ignored        |
/// | `NoAnswer`     | ignored; failure if probe | failure        |
/// | `Irrelevant`   | ignored                   | ignored        |
///
/// A half-open upstream whose probe got no answer in time has failed its probe, whatever
/// tool it went to. Returns `(upstream, tool)`.
///
/// ¹ An attempt that met its process's death may be retried, and a retry that succeeds
/// clears the tool: [`super::blame`] counts the death on the tool once the call as a
/// whole failed with it.
pub fn split(health: Health, slow: bool, upstream_probing: bool) -> (Verdict, Verdict) {
    use Outcome::{Failure, Ignored, Success};
    let (upstream, tool) = match health {
        Health::Answered => (Success, Success),
        Health::FailedAnswer => (Success, Failure),
        Health::Crashed => (Ignored, Ignored),
        Health::Unreachable => (Failure, Ignored),
        Health::NoAnswer if upstream_probing => (Failure, Failure),
        Health::NoAnswer => (Ignored, Failure),
        Health::Irrelevant => (Ignored, Ignored),
    };
    (Verdict::new(upstream), Verdict { outcome: tool, slow: slow && tool != Ignored })
}
