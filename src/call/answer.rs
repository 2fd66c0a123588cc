//! What an upstream answered to one call, parsed once where it arrives.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::jsonrpc::code;

/// A JSON-RPC answer on the wire: a raw result, or a raw error object.
pub(crate) type Reply = Result<Box<RawValue>, Box<RawValue>>;

/// The upstream's answer to a call, with the two facts every reader needs.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// A result; `is_error` is a tool result's `isError: true`.
    Result {
        /// The result as the upstream sent it.
        raw: Box<RawValue>,
        /// Whether it is a tool result reporting that the tool failed.
        is_error: bool,
    },
    /// A JSON-RPC error object.
    Error {
        /// Its integer code, if it has one.
        code: Option<i64>,
        /// The error object as the upstream sent it.
        raw: Box<RawValue>,
    },
}

/// What a finished call says about the health of the upstream or tool that served it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Health {
    /// The upstream answered: a result (`isError` results included: the tool ran and
    /// answered) or an error the request caused (-32600, -32601, -32602, -32002, 4xx).
    Answered,
    /// The upstream answered with an error of its own: -32603, or a server error in
    /// -32099..=-32000 other than -32002, or an error object without a code.
    FailedAnswer,
    /// The upstream could not be reached, or its connection or protocol broke.
    Unreachable,
    /// No answer in time.
    NoAnswer,
    /// The supervised process serving the call died while handling it, and the evidence
    /// points at the call (see `UpstreamError::ProcessExited`): it speaks against the tool
    /// that was called once the call as a whole fails with it (a retry that succeeds
    /// clears it), never against the upstream, whose supervisor brings the process back
    /// (a process that cannot come back fails as unreachable).
    Crashed,
    /// Not about the upstream's health: cancelled, refused by seawall, rate-limited,
    /// an oversized answer, a process death that points at no call in particular.
    Irrelevant,
}

impl Health {
    /// Whether it speaks against the endpoint that served the attempt (outlier ejection).
    pub(crate) fn is_endpoint_failure(self) -> bool {
        matches!(self, Health::Unreachable | Health::NoAnswer)
    }
}

#[derive(Deserialize)]
struct ErrorCode {
    code: Option<i64>,
}

#[derive(Deserialize)]
struct IsError {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
}

impl Answer {
    /// Reads a reply once; `tool_result` says whether a result is a `CallToolResult`.
    pub(crate) fn parse(reply: Reply, tool_result: bool) -> Answer {
        match reply {
            Ok(raw) => {
                let is_error = tool_result
                    && crate::jsonrpc::may_name(raw.get(), "isError")
                    && serde_json::from_str::<IsError>(raw.get()).is_ok_and(|v| v.is_error == Some(true));
                Answer::Result { raw, is_error }
            }
            Err(raw) => {
                let code = serde_json::from_str::<ErrorCode>(raw.get()).ok().and_then(|c| c.code);
                Answer::Error { code, raw }
            }
        }
    }

    /// A plain result (made by the gateway, or merged from several upstreams).
    pub(crate) fn result(raw: Box<RawValue>) -> Answer {
        Answer::Result { raw, is_error: false }
    }

    /// What the answer says about the upstream's health.
    pub(crate) fn health(&self) -> Health {
        match self {
            Answer::Result { .. } => Health::Answered,
            Answer::Error { code: Some(code::INTERNAL_ERROR), .. } => Health::FailedAnswer,
            Answer::Error { code: Some(code::RESOURCE_NOT_FOUND), .. } => Health::Answered,
            // We cancelled it: says nothing about the upstream.
            Answer::Error { code: Some(code::REQUEST_CANCELLED), .. } => Health::Irrelevant,
            Answer::Error { code: Some(-32099..=-32000), .. } => Health::FailedAnswer,
            Answer::Error { code: Some(_), .. } => Health::Answered,
            // An error object without a numeric code breaks the protocol.
            Answer::Error { code: None, .. } => Health::FailedAnswer,
        }
    }

    /// The `outcome` label of `seawall_requests_total`.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            Answer::Result { is_error: true, .. } => "tool_error",
            Answer::Result { .. } => "ok",
            Answer::Error { .. } => "error",
        }
    }

    /// The answer on the wire.
    #[cfg(test)]
    pub(crate) fn into_reply(self) -> Reply {
        match self {
            Answer::Result { raw, .. } => Ok(raw),
            Answer::Error { raw, .. } => Err(raw),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::raw_from_str;

    fn error(text: &str) -> Answer {
        Answer::parse(Err(raw_from_str(text).unwrap()), false)
    }

    #[test]
    fn parsed_once_into_code_and_is_error() {
        let tool = Answer::parse(Ok(raw_from_str(r#"{"content":[],"isError":true}"#).unwrap()), true);
        assert!(matches!(tool, Answer::Result { is_error: true, .. }));
        assert_eq!(tool.outcome(), "tool_error");
        assert_eq!(tool.health(), Health::Answered);
        let other = Answer::parse(Ok(raw_from_str(r#"{"isError":true}"#).unwrap()), false);
        assert_eq!(other.outcome(), "ok");
        assert_eq!(error(r#"{"code":-32603,"message":"x"}"#).health(), Health::FailedAnswer);
        assert_eq!(error(r#"{"code":-32001,"message":"x"}"#).health(), Health::FailedAnswer);
        assert_eq!(error(r#"{"code":-32002,"message":"x"}"#).health(), Health::Answered);
        assert_eq!(error(r#"{"code":-32602,"message":"x"}"#).health(), Health::Answered);
        assert_eq!(error(r#"{"code":-32800,"message":"x"}"#).health(), Health::Irrelevant);
        assert_eq!(error(r#"{"message":"no code"}"#).health(), Health::FailedAnswer);
    }
}
