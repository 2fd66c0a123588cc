//! The wire format of a shared transition: one compact JSON object, published on the
//! channel and kept (for open breakers) in the hash that replicas read to catch up.
//!
//! ```json
//! {"v":1,"replica":"seawall-7c9f-3e1a2b4c","upstream":"search","tool":"query",
//!  "kind":"opened","cause":"consecutive_failures","at_ms":1767225600000,"break_ms":5000}
//! ```
//!
//! - `v`: the format's version, 1; other versions are ignored.
//! - `replica`: who published it (a replica ignores its own messages).
//! - `upstream`, `tool`: the breaker (no `tool`: the upstream's own).
//! - `kind`: `opened` (by its own rules, for `break_ms`), `closed` (a probe succeeded),
//!   `held_open` (by the operator, telling clients `reason`), `held_closed`, `reset`.
//! - `cause`: why, as the logs name it (`consecutive_failures`, `probe_failed`, ...).
//! - `at_ms`: when, in wall-clock ms since the Unix epoch: the last writer wins.
//! - `break_ms`: for `opened`, the break left when it was published.
//! - `reason`: for `held_open`, what the operator said.
//!
//! Decoding trusts nothing: whatever is malformed, oversized or of another version is
//! dropped whole, and the texts are sanitised before anyone sees them.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::resilience::breaker::transition::{BreakerKey, Change, Hold, Reason, Remote, State};

/// The format's version.
const VERSION: u32 = 1;
/// The largest message decoded (bytes).
pub(super) const MAX_MESSAGE: usize = 4096;
/// The longest tool name accepted (bytes).
const MAX_TOOL: usize = 256;
/// The longest replica id accepted (bytes).
const MAX_REPLICA: usize = 128;
/// Cap of an operator's reason once sanitised (bytes), as the admin API caps it.
const MAX_REASON: usize = 800;
/// Cap of a cause once sanitised (bytes).
const MAX_CAUSE: usize = 64;

/// What happened to the breaker, on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Opened,
    Closed,
    HeldOpen,
    HeldClosed,
    Reset,
}

/// The JSON object, field for field.
#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    v: u32,
    replica: String,
    upstream: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cause: Option<String>,
    at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    break_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// One shared transition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Message {
    /// Who published it.
    pub replica: Arc<str>,
    /// Which breaker.
    pub key: BreakerKey,
    /// What to repeat.
    pub remote: Remote,
    /// Why, as logged (sanitised).
    pub cause: Option<Arc<str>>,
    /// When (wall clock, ms).
    pub at_ms: u64,
}

impl Message {
    /// The message for a local change, or `None` for what replicas do not repeat (the
    /// lazy move to half-open, which each makes by its own clock).
    pub(super) fn of(replica: &Arc<str>, change: &Change) -> Option<Message> {
        let remote = match (&change.hold, change.to, change.reason) {
            (Some(hold), _, _) => Remote::Held(hold.clone()),
            (None, _, Reason::Reset) => Remote::Reset,
            (None, State::Open, _) => Remote::Opened { break_for: change.break_for? },
            (None, State::Closed, _) => Remote::Closed,
            (None, State::HalfOpen, _) => return None,
        };
        Some(Message {
            replica: Arc::clone(replica),
            key: change.key.clone(),
            remote,
            cause: Some(Arc::from(change.reason.as_str())),
            at_ms: change.at_ms,
        })
    }

    /// The field of the breaker in the hash of open breakers: `upstream` or
    /// `upstream/tool` (upstream names have no `/`).
    pub(super) fn field(&self) -> String {
        self.key.to_string()
    }

    /// How long the hash keeps it: `Some(Some(d))` for an automatic open (its break),
    /// `Some(None)` for a hold open (until released), `None` to remove it (closed).
    pub(super) fn kept_for(&self) -> Option<Option<Duration>> {
        match &self.remote {
            Remote::Opened { break_for } => Some(Some(*break_for)),
            Remote::Held(Hold::Open { .. }) => Some(None),
            Remote::Held(Hold::Closed) | Remote::Closed | Remote::Reset => None,
        }
    }

    /// The message with the break left replaced by `left` (a catch-up reads the break
    /// left on Redis's clock, not the one published).
    pub(super) fn with_break_left(mut self, left: Duration) -> Message {
        if let Remote::Opened { break_for } = &mut self.remote {
            *break_for = left;
        }
        self
    }

    /// The JSON text.
    pub(super) fn encode(&self) -> String {
        let (kind, break_ms, reason) = match &self.remote {
            Remote::Opened { break_for } => {
                (Kind::Opened, Some(u64::try_from(break_for.as_millis()).unwrap_or(u64::MAX)), None)
            }
            Remote::Closed => (Kind::Closed, None, None),
            Remote::Held(Hold::Open { reason }) => (Kind::HeldOpen, None, Some(reason.to_string())),
            Remote::Held(Hold::Closed) => (Kind::HeldClosed, None, None),
            Remote::Reset => (Kind::Reset, None, None),
        };
        let wire = Wire {
            v: VERSION,
            replica: self.replica.to_string(),
            upstream: self.key.upstream.to_string(),
            tool: self.key.tool.as_deref().map(str::to_owned),
            kind,
            cause: self.cause.as_deref().map(str::to_owned),
            at_ms: self.at_ms,
            break_ms,
            reason,
        };
        // A struct of strings and numbers always serialises.
        serde_json::to_string(&wire).unwrap_or_default()
    }

    /// The message in `bytes`, or `None` when they are not one this version reads.
    pub(super) fn decode(bytes: &[u8]) -> Option<Message> {
        if bytes.len() > MAX_MESSAGE {
            return None;
        }
        let wire: Wire = serde_json::from_slice(bytes).ok()?;
        if wire.v != VERSION || !plain(&wire.replica, MAX_REPLICA) || !plain(&wire.upstream, MAX_TOOL) {
            return None;
        }
        if wire.tool.as_deref().is_some_and(|tool| !plain(tool, MAX_TOOL)) {
            return None;
        }
        let remote = match wire.kind {
            Kind::Opened => Remote::Opened { break_for: Duration::from_millis(wire.break_ms.filter(|ms| *ms > 0)?) },
            Kind::Closed => Remote::Closed,
            Kind::HeldOpen => {
                let reason = wire.reason.as_deref().map(str::trim).filter(|r| !r.is_empty())?;
                Remote::Held(Hold::Open { reason: Arc::from(crate::sanitize::quote(reason, MAX_REASON)) })
            }
            Kind::HeldClosed => Remote::Held(Hold::Closed),
            Kind::Reset => Remote::Reset,
        };
        Some(Message {
            replica: Arc::from(wire.replica),
            key: BreakerKey { upstream: Arc::from(wire.upstream), tool: wire.tool.map(Arc::from) },
            remote,
            cause: wire.cause.map(|c| Arc::from(crate::sanitize::quote(&c, MAX_CAUSE))),
            at_ms: wire.at_ms,
        })
    }
}

/// Non-empty, at most `max` bytes, no control characters.
fn plain(text: &str, max: usize) -> bool {
    !text.is_empty() && text.len() <= max && !text.chars().any(char::is_control)
}
