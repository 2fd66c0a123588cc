//! The gateway's pagination cursor: it encodes each upstream's own cursor, so one
//! aggregated listing pages through every upstream.

use std::collections::BTreeMap;

use base64::Engine as _;

/// Longest cursor accepted from a client.
const MAX_CURSOR: usize = 16 * 1024;

/// Upstream name → that upstream's next cursor.
pub(crate) type Cursors = BTreeMap<String, String>;

/// Encodes the upstreams that still have pages.
pub(crate) fn encode(next: &Cursors) -> String {
    let json = crate::jsonrpc::to_json(next);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a cursor the gateway issued; `None` for anything else.
pub(crate) fn decode(cursor: &str) -> Option<Cursors> {
    if cursor.len() > MAX_CURSOR {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let map: Cursors = serde_json::from_slice(&bytes).ok()?;
    (!map.is_empty()).then_some(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let mut next = Cursors::new();
        next.insert("a".into(), "opaque-1".into());
        next.insert("b".into(), "{\"x\":1}".into());
        assert_eq!(decode(&encode(&next)), Some(next));
        assert_eq!(decode("not a cursor"), None);
        assert_eq!(decode(&encode(&Cursors::new())), None);
    }
}
