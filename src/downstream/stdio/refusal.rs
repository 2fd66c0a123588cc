//! Every refusal of the stdio transport for clients, and the one table that turns it into
//! a JSON-RPC error line. What HTTP says with a status code (400, 413, 503) has no place
//! on stdio; the JSON-RPC code carries the meaning.
//!
//! | refusal | code | id |
//! |---|---|---|
//! | a line that is not JSON (or not UTF-8) | -32700 | null |
//! | JSON, but not a JSON-RPC message | -32600 | the message's, when it could be read |
//! | a line over `limits.max_body_bytes` | -32600 | null |
//! | a batch outside protocol version 2025-03-26 | -32600 | null |
//! | a request other than `initialize` or `ping` before `initialize` (a batch too) | -32600 | the request's |
//! | `initialize` inside a batch | -32600 | the request's |
//! | `initialize` without usable params | -32602 | the request's |
//! | the session table is full (HTTP clients of `--listen` share it) | -32012 | the request's |

use std::time::Duration;

use serde_json::json;

use crate::errors::correlation_id;
use crate::jsonrpc::{self, DecodeError, Id, code};

/// Why the stdio transport refused a line.
#[derive(Debug, Clone)]
pub(super) enum Refusal {
    /// The line is not JSON, or not a JSON-RPC message.
    Malformed(DecodeError),
    /// The line is longer than the limit; it was read and thrown away.
    TooLarge {
        /// `limits.max_body_bytes`.
        limit: usize,
    },
    /// A batch in a protocol version other than 2025-03-26.
    BatchNotAllowed,
    /// A request before the session was initialized.
    NotInitialized,
    /// `initialize` as part of a batch.
    InitializeInBatch,
    /// An `initialize` whose params the gateway cannot use.
    InvalidInitialize(String),
    /// The session table is full.
    TooManySessions {
        /// When to try again.
        retry_after: Duration,
    },
}

impl Refusal {
    fn code(&self) -> i64 {
        match self {
            Refusal::Malformed(DecodeError::Parse(_)) => code::PARSE_ERROR,
            Refusal::InvalidInitialize(_) => code::INVALID_PARAMS,
            Refusal::TooManySessions { .. } => code::OVERLOADED,
            _ => code::INVALID_REQUEST,
        }
    }

    fn message(&self) -> String {
        match self {
            Refusal::Malformed(DecodeError::Parse(why)) => format!("Parse error: {why}"),
            Refusal::Malformed(DecodeError::Invalid { reason, .. }) => format!("Invalid Request: {reason}"),
            Refusal::TooLarge { limit } => format!("Message larger than {limit} bytes"),
            Refusal::BatchNotAllowed => {
                "Invalid Request: JSON-RPC batches are only allowed in protocol version 2025-03-26".into()
            }
            Refusal::NotInitialized => "Invalid Request: the session is not initialized; send initialize first".into(),
            Refusal::InitializeInBatch => "initialize must not be part of a batch".into(),
            Refusal::InvalidInitialize(why) => why.clone(),
            Refusal::TooManySessions { retry_after } => {
                format!("Overloaded: too many sessions; retry in {} s", retry_after.as_secs().max(1))
            }
        }
    }

    /// The error line, logged once at debug level. A decode error names its own id,
    /// when it could read one.
    pub(super) fn answer(&self, id: Option<&Id>) -> String {
        let id = match self {
            Refusal::Malformed(DecodeError::Invalid { id: own, .. }) => own.as_ref(),
            Refusal::Malformed(DecodeError::Parse(_)) | Refusal::TooLarge { .. } | Refusal::BatchNotAllowed => None,
            _ => id,
        };
        let correlation = correlation_id();
        tracing::debug!(
            target: "seawall::downstream",
            code = self.code(),
            reason = %self.message(),
            id = id.map(Id::as_json).unwrap_or("null"),
            correlation_id = %correlation,
            "refused a stdio message"
        );
        let data = match self {
            Refusal::TooManySessions { retry_after } => {
                Some(json!({ "correlationId": correlation, "retryAfterSeconds": retry_after.as_secs().max(1) }))
            }
            _ => None,
        };
        jsonrpc::encode_error(id, self.code(), &self.message(), data)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn parsed(line: &str) -> Value {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn parse_errors_and_oversize_lines_carry_a_null_id() {
        let parse = parsed(&Refusal::Malformed(DecodeError::Parse("x".into())).answer(Some(&Id::number(3))));
        assert_eq!(parse["error"]["code"], -32700);
        assert!(parse["id"].is_null());
        let big = parsed(&Refusal::TooLarge { limit: 10 }.answer(None));
        assert_eq!(big["error"]["code"], -32600);
        assert_eq!(big["error"]["message"], "Message larger than 10 bytes");
        assert!(big["id"].is_null());
    }

    #[test]
    fn refusals_of_a_request_keep_its_id() {
        let invalid = DecodeError::Invalid { id: Some(Id::number(4)), reason: "jsonrpc must be \"2.0\"" };
        assert_eq!(parsed(&Refusal::Malformed(invalid).answer(None))["id"], 4);
        let early = parsed(&Refusal::NotInitialized.answer(Some(&Id::string("a"))));
        assert_eq!(early["id"], "a");
        assert_eq!(early["error"]["code"], -32600);
        let full =
            parsed(&Refusal::TooManySessions { retry_after: Duration::from_secs(5) }.answer(Some(&Id::number(1))));
        assert_eq!(full["error"]["code"], -32012);
        assert_eq!(full["error"]["data"]["retryAfterSeconds"], 5);
    }
}
