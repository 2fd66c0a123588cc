//! Sealed session ids: no input opens without the key — any text, and any change to a
//! genuine id — and every state either seals within the length cap and opens to itself
//! (its client info reduced when large) or does not seal at all.
//!
//! Input: a mode byte, then either the text to open (even modes), a mask XORed over a
//! genuine id (mode 1 mod 4), or the fields of a state separated by 0xff bytes (mode 3
//! mod 4).
#![no_main]

use std::sync::LazyLock;
use std::time::Duration;

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use seawall::sealed::{MAX_ID_CHARS, SealedRoute, SealedSession, SealedUpstream, SessionKeys};
use serde_json::{Value, json};

/// The time the target opens ids at (seconds since the Unix epoch).
const NOW: u64 = 1_800_000_000;

static KEYS: LazyLock<SessionKeys> =
    LazyLock::new(|| SessionKeys::shared(&[0x5a; 32], &[[0xa5; 32]], Duration::from_secs(86_400)).expect("keys"));

/// A genuine id and the state it carries.
static GENUINE: LazyLock<(String, SealedSession)> = LazyLock::new(|| {
    let state = SealedSession {
        scope: Some("demo".into()),
        version: "2025-11-25".into(),
        capabilities: json!({"sampling": {}}),
        client_info: json!({"name": "fuzz", "version": "1"}),
        principal: Some("key:ci".into()),
        upstreams: vec![SealedUpstream {
            name: "demo".into(),
            endpoint: Some(1),
            session_id: "upstream-session".into(),
            version: "2025-06-18".into(),
            capabilities: vec!["tools".into()],
        }],
        issued: NOW - 10,
        expires: NOW + 3_600,
    };
    (KEYS.seal_session(&state).expect("a small state seals"), state)
});

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        1 => tampered(body),
        3 => round_trip(body),
        _ => {
            let text = String::from_utf8_lossy(body);
            assert!(KEYS.open_session(&text, NOW).is_none(), "arbitrary text opened as a session id: {text:?}");
            assert!(KEYS.open_request("s", &text).is_none(), "arbitrary text opened as a request id: {text:?}");
        }
    }
});

/// The genuine id with `mask` XORed over its bytes opens only when nothing changed.
fn tampered(mask: &[u8]) {
    let (id, state) = &*GENUINE;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut bytes = engine.decode(id).expect("a genuine id is base64url");
    for (byte, m) in bytes.iter_mut().zip(mask) {
        *byte ^= m;
    }
    let changed = mask.iter().take(bytes.len()).any(|m| *m != 0);
    let opened = KEYS.open_session(&engine.encode(&bytes), NOW);
    if changed {
        assert!(opened.is_none(), "a changed id opened");
    } else {
        assert_eq!(opened.as_ref(), Some(state), "the genuine id did not open to its state");
    }
}

/// A state made of the input's fields seals within the cap and opens to itself, or does
/// not seal; its gateway request id does the same.
fn round_trip(body: &[u8]) {
    let mut fields = body.split(|b| *b == 0xff).map(|f| String::from_utf8_lossy(f).into_owned());
    let mut next = || fields.next().unwrap_or_default();
    let scope = Some(next()).filter(|s| !s.is_empty());
    let version = next();
    let mut inner = serde_json::Map::new();
    let capability = next();
    inner.insert(next(), Value::Bool(true));
    let capabilities = Value::Object(std::iter::once((capability, Value::Object(inner))).collect());
    let client_info = json!({"name": next(), "version": next(), "extra": next()});
    let principal = Some(next()).filter(|s| !s.is_empty());
    let upstreams = (0..body.len() % 4)
        .map(|i| SealedUpstream {
            name: next(),
            endpoint: (i % 2 == 1).then_some(i as u16),
            session_id: next(),
            version: next(),
            capabilities: next().split(',').map(str::to_owned).collect(),
        })
        .collect();
    let state = SealedSession {
        scope,
        version,
        capabilities,
        client_info,
        principal,
        upstreams,
        issued: NOW,
        expires: NOW + 1 + body.len() as u64,
    };
    match KEYS.seal_session(&state) {
        Some(id) => {
            assert!(id.len() <= MAX_ID_CHARS, "an id of {} characters", id.len());
            assert!(id.bytes().all(|c| (0x21..=0x7e).contains(&c)), "not a visible ASCII header value: {id}");
            let opened = KEYS.open_session(&id, NOW).expect("a sealed state opens");
            let info = &state.client_info;
            assert!(opened.client_info == *info || reduced(&opened.client_info, info), "the client info changed");
            assert_eq!(SealedSession { client_info: opened.client_info.clone(), ..state }, opened);
        }
        None => {
            let info = &state.client_info;
            let bounded = if serde_json::to_vec(info).expect("JSON").len() <= 512 { info.clone() } else { reduce(info) };
            let plain = serde_json::to_vec(&SealedSession { client_info: bounded, ..state }).expect("JSON");
            let sealed = plain.len() + 1 + 12 + 16;
            // Not sealed: too large, or a state that does not read back from its JSON.
            let reads_back = serde_json::from_slice::<SealedSession>(&plain).is_ok();
            assert!(
                !reads_back || sealed.div_ceil(3) * 4 > MAX_ID_CHARS + 2,
                "a state of {} bytes did not seal",
                plain.len()
            );
        }
    }
    let route = SealedRoute { upstream: next(), endpoint: None, id: serde_json::to_string(&next()).expect("JSON") };
    if let Some(id) = KEYS.seal_request("session", &route) {
        assert_eq!(KEYS.open_request("session", &id), Some(route));
        assert_eq!(KEYS.open_request("another", &id), None);
    }
}

/// Whether `opened` is `original` reduced to its name and version.
fn reduced(opened: &Value, original: &Value) -> bool {
    *opened == reduce(original)
}

/// A client info reduced as sealing reduces a large one.
fn reduce(info: &Value) -> Value {
    let cut = |field: &str| info[field].as_str().unwrap_or("unknown").chars().take(64).collect::<String>();
    json!({"name": cut("name"), "version": cut("version")})
}
