//! The request id, kept exactly as the peer wrote it.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON-RPC request id: a string or an integer (MCP forbids fractions, exponents and
/// `null`), kept exactly as the peer wrote it. Integers of any length are accepted, as
/// JSON-RPC allows; they are compared and echoed as text.
#[derive(Clone)]
pub struct Id(Arc<RawValue>);

impl Id {
    /// An id from a gateway-minted number.
    pub fn number(n: u64) -> Id {
        // Written as JSON directly: nothing to parse back.
        Id::from_raw(serde_json::value::to_raw_value(&n).unwrap_or_else(|_| null_raw()))
    }

    /// An id from a gateway-minted string.
    pub fn string(s: &str) -> Id {
        let text = serde_json::to_string(s).unwrap_or_else(|_| "null".to_owned());
        Id::from_raw(RawValue::from_string(text).unwrap_or_else(|_| null_raw()))
    }

    fn from_raw(raw: Box<RawValue>) -> Id {
        Id(Arc::from(raw))
    }

    /// The id's JSON text (`1`, `"abc"`).
    pub fn as_json(&self) -> &str {
        self.0.get()
    }

    /// The raw JSON value.
    pub fn raw(&self) -> &RawValue {
        &self.0
    }

    /// The id as a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.get()).unwrap_or(serde_json::Value::Null)
    }

    /// Builds an id from a JSON value; `None` unless it is a string or an integer.
    pub fn from_value(value: &serde_json::Value) -> Option<Id> {
        match value {
            serde_json::Value::String(_) | serde_json::Value::Number(_) => {
                let text = serde_json::to_string(value).ok()?;
                Id::from_raw_checked(RawValue::from_string(text).ok()?)
            }
            _ => None,
        }
    }

    /// Accepts a peer's raw id only in a form MCP allows.
    pub(super) fn from_raw_checked(raw: Box<RawValue>) -> Option<Id> {
        is_valid_id(raw.get()).then(|| Id::from_raw(raw))
    }
}

/// Whether `text` (one JSON value) is an id MCP allows: a string, or an integer literal
/// `-?[0-9]+` other than `-0`. With `arbitrary_precision` numbers keep their text, so
/// `1.5`, `1e3` and `-0` would otherwise be echoed as ids.
fn is_valid_id(text: &str) -> bool {
    if text.starts_with('"') {
        return true;
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    integer && text != "-0"
}

pub(super) fn null_raw() -> Box<RawValue> {
    RawValue::NULL.to_owned()
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}
impl Eq for Id {}
impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_json().hash(state)
    }
}
impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_json())
    }
}
impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_json())
    }
}
impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}
