//! The messages of JSON-RPC 2.0 as seawall holds them, `params`, `result` and `error`
//! raw, and why a text is not one.

use serde_json::value::RawValue;

use super::id::Id;

/// A request: has a method and an id.
#[derive(Debug, Clone)]
pub struct Request {
    /// The sender's id.
    pub id: Id,
    /// The method name.
    pub method: String,
    /// The parameters, untouched.
    pub params: Option<Box<RawValue>>,
}

/// A notification: a method without an id.
#[derive(Debug, Clone)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The parameters, untouched.
    pub params: Option<Box<RawValue>>,
}

/// A response: an id with either a result or an error object.
#[derive(Debug, Clone)]
pub struct Response {
    /// The id of the request this answers.
    pub id: Id,
    /// `Ok(result)` or `Err(error object)`, both raw.
    pub body: Result<Box<RawValue>, Box<RawValue>>,
}

/// Any JSON-RPC message.
#[derive(Debug, Clone)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

/// Why a message could not be decoded; each maps to a JSON-RPC error.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON at all (answer -32700 with a null id).
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not a valid JSON-RPC message (answer -32600). Holds the id if one could be read.
    #[error("invalid request: {reason}")]
    Invalid {
        /// The id, when it could be read.
        id: Option<Id>,
        /// What is wrong.
        reason: &'static str,
    },
}
