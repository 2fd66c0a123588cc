//! What the layers below the rewrite hand back: an answer seawall made, or one
//! upstream's answer as it came, with what its rewrite needs to know of the call. The
//! rewrite layer ([`crate::errors`]) turns either into what the client sees, once.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::call::{Answer, Reply};
use crate::catalog::ToolInfo;
use crate::config::SanitizeLevel;

/// The answer to a request below the rewrite layer.
#[derive(Debug)]
pub(crate) enum Routed {
    /// An answer seawall made: a merged list, `ping`, a cached result.
    Made(Reply),
    /// One upstream's answer, not yet rewritten.
    Upstream(Box<FromUpstream>),
}

/// An upstream's answer and what its rewrite reads beside it.
#[derive(Debug)]
pub(crate) struct FromUpstream {
    /// The answer as the upstream sent it.
    pub answer: Answer,
    /// The upstream.
    pub upstream: Arc<str>,
    /// How much of the upstream's text is scrubbed.
    pub level: SanitizeLevel,
    /// For `tools/call`, the tool as the client named it.
    pub tool: Option<String>,
    /// What the gateway knows of that tool (its output schema).
    pub info: Option<Arc<ToolInfo>>,
    /// For `tools/call`, the arguments the client sent (an answer may quote them back).
    pub arguments: Option<Arc<Value>>,
    /// The URI a `resources/*` request named (an answer may quote it back).
    pub uri: Option<String>,
}

impl Routed {
    /// A result seawall made.
    pub(crate) fn result(raw: Box<RawValue>) -> Routed {
        Routed::Made(Ok(raw))
    }

    /// The result, when the answer is one.
    pub(crate) fn as_result(&self) -> Option<&RawValue> {
        match self {
            Routed::Made(Ok(raw)) => Some(raw),
            Routed::Upstream(from) => match &from.answer {
                Answer::Result { raw, .. } => Some(raw),
                Answer::Error { .. } => None,
            },
            Routed::Made(Err(_)) => None,
        }
    }

    /// The error object, when the answer is one (not yet rewritten).
    pub(crate) fn as_error(&self) -> Option<&RawValue> {
        match self {
            Routed::Made(Err(raw)) => Some(raw),
            Routed::Upstream(from) => match &from.answer {
                Answer::Error { raw, .. } => Some(raw),
                Answer::Result { .. } => None,
            },
            Routed::Made(Ok(_)) => None,
        }
    }

    /// The answer with its result replaced by `f` of it (an error stays as it is).
    pub(crate) fn map_result(self, f: impl FnOnce(Box<RawValue>) -> Box<RawValue>) -> Routed {
        match self {
            Routed::Made(Ok(raw)) => Routed::Made(Ok(f(raw))),
            Routed::Upstream(mut from) => {
                from.answer = match from.answer {
                    Answer::Result { raw, is_error } => Answer::Result { raw: f(raw), is_error },
                    error => error,
                };
                Routed::Upstream(from)
            }
            error => error,
        }
    }
}
