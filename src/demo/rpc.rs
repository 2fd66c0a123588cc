//! JSON-RPC 2.0 framing for the demo server: error codes, error values and the
//! classification of one incoming message.

use serde_json::{Map, Value, json};

/// JSON-RPC and MCP error codes the demo server answers with: the gateway's own table,
/// plus one of the demo's HTTP transport.
pub(crate) mod code {
    pub(crate) use crate::jsonrpc::code::{
        INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RESOURCE_NOT_FOUND,
        URL_ELICITATION_REQUIRED,
    };
    /// HTTP transport: the `Mcp-Session-Id` names no live session.
    pub(crate) const SESSION_NOT_FOUND: i64 = -32001;
}

/// A JSON-RPC error object (`code`, `message`, optional `data`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    /// Numeric error code (see [`code`]).
    pub code: i64,
    /// Human-readable message.
    pub message: String,
    /// Optional structured details.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error without `data`.
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    /// Attach `data` to the error.
    pub(crate) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32602 with the given message.
    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    /// -32603 with the given message.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(code::INTERNAL_ERROR, message)
    }

    /// The error object as JSON.
    pub(crate) fn to_json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("code".into(), json!(self.code));
        obj.insert("message".into(), json!(self.message));
        if let Some(data) = &self.data {
            obj.insert("data".into(), data.clone());
        }
        Value::Object(obj)
    }

    /// A complete error response for request `id`.
    pub(crate) fn response(&self, id: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": self.to_json()})
    }
}

/// A successful response for request `id`.
pub(crate) fn result_response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A request message (used for server-to-client requests).
pub(crate) fn request(id: &Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A notification message.
pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// The response to a line or body that was not JSON.
pub(crate) fn parse_error(detail: impl std::fmt::Display) -> Value {
    RpcError::new(code::PARSE_ERROR, format!("Parse error: {detail}")).response(&Value::Null)
}

/// One incoming JSON-RPC message, classified.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Incoming {
    /// A request: it has a method and a non-null id and expects a response.
    Request {
        /// The id, echoed verbatim in the response.
        id: Value,
        /// The method name.
        method: String,
        /// The params (`Value::Null` when absent).
        params: Value,
    },
    /// A notification: a method without an id.
    Notification {
        /// The method name.
        method: String,
        /// The params (`Value::Null` when absent).
        params: Value,
    },
    /// A response to a request the server sent.
    Response {
        /// The id of the server's request.
        id: Value,
        /// `Ok(result)` or `Err(error)`.
        outcome: Result<Value, RpcError>,
    },
    /// Anything else; answer with this -32600 error response.
    Invalid(Value),
}

impl Incoming {
    /// Classify a parsed JSON value.
    pub(crate) fn classify(msg: Value) -> Self {
        let Value::Object(mut obj) = msg else {
            return Self::invalid(Value::Null, "message must be a JSON object");
        };
        let id = obj.remove("id");
        let params = obj.remove("params").unwrap_or(Value::Null);
        if let Some(method) = obj.get("method") {
            let Some(method) = method.as_str().map(str::to_owned) else {
                return Self::invalid(id.unwrap_or(Value::Null), "method must be a string");
            };
            return match id {
                None => Self::Notification { method, params },
                Some(id) if valid_id(&id) => Self::Request { id, method, params },
                Some(id) => Self::invalid(sanitize_id(id), "id must be a string or a number"),
            };
        }
        let Some(id) = id.filter(valid_id) else {
            return Self::invalid(Value::Null, "not a request, notification or response");
        };
        if let Some(result) = obj.remove("result") {
            return Self::Response { id, outcome: Ok(result) };
        }
        if let Some(error) = obj.remove("error") {
            let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
            let message = error.get("message").and_then(Value::as_str).unwrap_or("error without message");
            let mut err = RpcError::new(code, message);
            err.data = error.get("data").cloned();
            return Self::Response { id, outcome: Err(err) };
        }
        Self::invalid(id, "response without result or error")
    }

    fn invalid(id: Value, why: &str) -> Self {
        Self::Invalid(RpcError::new(code::INVALID_REQUEST, format!("Invalid request: {why}")).response(&id))
    }
}

fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_))
}

fn sanitize_id(id: Value) -> Value {
    if valid_id(&id) { id } else { Value::Null }
}

/// A map key for an id, so `1` and `"1"` stay distinct.
pub(crate) fn id_key(id: &Value) -> String {
    id.to_string()
}

/// `params` as an object; absent params count as an empty object.
pub(crate) fn params_object(params: &Value) -> Result<Map<String, Value>, RpcError> {
    match params {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map.clone()),
        _ => Err(RpcError::invalid_params("params must be an object")),
    }
}

/// A required string field.
pub(crate) fn required_str<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<&'a str, RpcError> {
    obj.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("missing or non-string `{field}`")))
}

/// An optional string field; present but not a string is an error.
pub(crate) fn optional_str<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<Option<&'a str>, RpcError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(RpcError::invalid_params(format!("`{field}` must be a string"))),
    }
}

/// An optional non-negative integer field.
pub(crate) fn optional_u64(obj: &Map<String, Value>, field: &str) -> Result<Option<u64>, RpcError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| RpcError::invalid_params(format!("`{field}` must be a non-negative integer"))),
    }
}

/// An optional boolean field.
pub(crate) fn optional_bool(obj: &Map<String, Value>, field: &str) -> Result<Option<bool>, RpcError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(RpcError::invalid_params(format!("`{field}` must be a boolean"))),
    }
}
