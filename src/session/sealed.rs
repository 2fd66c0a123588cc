//! Sealed session ids (DESIGN.md §8): a legacy session's id carries the session's own
//! state — its scope, negotiated version, the client's capabilities and info, the
//! principal that opened it, the upstream sessions behind it — encrypted and
//! authenticated with a key every replica shares. Any replica resumes a session it has
//! never seen, without a shared store, and a client learns nothing from its id.
//!
//! An id is `base64url(format ‖ nonce ‖ ciphertext ‖ tag)`, without padding. `format` is
//! one byte: 1 is AES-256-GCM-SIV with a 12-byte random nonce and a 16-byte tag over the
//! JSON of a [`SealedSession`] — 29 bytes (39 characters) on top of the state. A later
//! format gets another byte, so an old id is never misread. The associated data is the
//! format byte and what the text is for (`session`, or `request` and the session's id):
//! a sealed request id is no session id, and one session's request id opens in no other.
//!
//! Keys: the current one seals, it and every previous one open, so a key is rotated by
//! making the old one previous on every replica before any replica seals with the new
//! one. Without a configured key each process draws its own, whose ids open nowhere else.
//!
//! Ids stay under [`MAX_ID_CHARS`]: a client info larger than [`MAX_CLIENT_INFO_BYTES`]
//! is reduced to its `name` and `version`; a state still too large is not sealed (the
//! session gets a random id and lives on its replica only).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{AES_256_GCM_SIV, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The format byte of ids sealed with AES-256-GCM-SIV over JSON.
const FORMAT: u8 = 1;
/// The tag's length.
const TAG_LEN: usize = 16;
/// What a sealed id adds to its plaintext: the format byte, the nonce and the tag.
const OVERHEAD: usize = 1 + NONCE_LEN + TAG_LEN;
/// The longest id sealed or opened (characters): well within what proxies take for one
/// header (nginx: 8 KiB).
pub const MAX_ID_CHARS: usize = 2048;
/// The largest client info (bytes of JSON) sealed as it is; a larger one keeps only its
/// `name` and `version`.
pub const MAX_CLIENT_INFO_BYTES: usize = 512;
/// The longest `name` or `version` kept of a reduced client info (characters).
const MAX_INFO_FIELD_CHARS: usize = 64;
/// How far in the future an id's issue time may lie (clocks of replicas differ).
const CLOCK_SKEW_SECS: u64 = 300;

/// The associated data of a session id.
const SESSION_PURPOSE: &[u8] = b"session";
/// The associated data of a request id, before the session's id.
const REQUEST_PURPOSE: &[u8] = b"request\0";

/// A session's state as its id carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SealedSession {
    /// The one upstream of `/mcp/<upstream>`; `None` for `/mcp`.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The negotiated protocol version.
    #[serde(rename = "v")]
    pub version: String,
    /// The client's capabilities.
    #[serde(rename = "c", default)]
    pub capabilities: Value,
    /// The client's info (reduced when large, see [`MAX_CLIENT_INFO_BYTES`]).
    #[serde(rename = "i", default)]
    pub client_info: Value,
    /// The label of the principal that opened it (`key:<name>`, `sub:<subject>`), when
    /// clients authenticate.
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The upstream sessions another process can re-attach to.
    #[serde(rename = "u", default, skip_serializing_if = "Vec::is_empty")]
    pub upstreams: Vec<SealedUpstream>,
    /// When it was sealed (seconds since the Unix epoch).
    #[serde(rename = "t")]
    pub issued: u64,
    /// When it stops opening (seconds since the Unix epoch).
    #[serde(rename = "x")]
    pub expires: u64,
}

/// One upstream session behind a sealed session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedUpstream {
    /// The upstream's name.
    #[serde(rename = "n")]
    pub name: String,
    /// Which of its endpoints, for replicated upstreams.
    #[serde(rename = "e", default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<u16>,
    /// The upstream's `Mcp-Session-Id`.
    #[serde(rename = "id")]
    pub session_id: String,
    /// The version the upstream negotiated.
    #[serde(rename = "v")]
    pub version: String,
    /// The capabilities the upstream declared (their names).
    #[serde(rename = "k", default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
}

/// Where a server-initiated request relayed to the client came from, as the gateway's id
/// for it carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedRoute {
    /// The upstream that asked.
    #[serde(rename = "u")]
    pub upstream: String,
    /// Which of its endpoints, for replicated upstreams.
    #[serde(rename = "e", default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<u16>,
    /// The upstream's id for it, as JSON text.
    #[serde(rename = "i")]
    pub id: String,
}

/// Key material that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("the session key cannot be used")]
pub struct KeyError;

/// The keys that seal and open session ids.
pub struct SessionKeys {
    current: RandomizedNonceKey,
    previous: Vec<RandomizedNonceKey>,
    shared: bool,
    lifetime: Duration,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeys")
            .field("shared", &self.shared)
            .field("previous", &self.previous.len())
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

fn key(bytes: &[u8; 32]) -> Result<RandomizedNonceKey, KeyError> {
    RandomizedNonceKey::new(&AES_256_GCM_SIV, bytes).map_err(|_| KeyError)
}

impl SessionKeys {
    /// Keys shared with other replicas: `current` seals, it and `previous` open; ids
    /// expire `lifetime` after they are sealed.
    pub fn shared(current: &[u8; 32], previous: &[[u8; 32]], lifetime: Duration) -> Result<SessionKeys, KeyError> {
        Ok(SessionKeys {
            current: key(current)?,
            previous: previous.iter().map(key).collect::<Result<_, _>>()?,
            shared: true,
            lifetime,
        })
    }

    /// A key of this process alone, drawn at random: its ids open nowhere else.
    pub fn random(lifetime: Duration) -> Result<SessionKeys, KeyError> {
        let bytes: [u8; 32] = rand::random();
        Ok(SessionKeys { shared: false, ..SessionKeys::shared(&bytes, &[], lifetime)? })
    }

    /// The keys `session:` configures (`key` or `key_file`, and the previous ones), or
    /// a random key of this process when none is.
    pub fn from_config(session: &crate::config::SessionConfig) -> anyhow::Result<SessionKeys> {
        let material = session.key_material().map_err(|why| anyhow::anyhow!("session keys: {why}"))?;
        let keys = match &material.current {
            Some(current) => SessionKeys::shared(current, &material.previous, session.id_lifetime),
            None => SessionKeys::random(session.id_lifetime),
        };
        Ok(keys?)
    }

    /// Whether the keys were configured, so that other replicas hold them too: only then
    /// does a replica resume a session it does not hold.
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// How long after it is sealed an id opens.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// The id carrying `state`, its client info reduced when large; `None` when even
    /// then it would be longer than [`MAX_ID_CHARS`].
    pub fn seal_session(&self, state: &SealedSession) -> Option<String> {
        let mut state = state.clone();
        state.client_info = bounded_client_info(&state.client_info);
        let plaintext = serde_json::to_vec(&state).ok()?;
        // A state that would not read back (an object key serde_json keeps for itself)
        // is not sealed: an id must open to what it was made from.
        serde_json::from_slice::<SealedSession>(&plaintext).ok()?;
        self.seal(SESSION_PURPOSE, plaintext)
    }

    /// The state an id carries, if a key of this ring sealed it as a session id and it
    /// has not expired at `now` (seconds since the Unix epoch).
    pub fn open_session(&self, id: &str, now: u64) -> Option<SealedSession> {
        let plaintext = self.open(SESSION_PURPOSE, id)?;
        let state: SealedSession = serde_json::from_slice(&plaintext).ok()?;
        let fresh = state.issued <= now.saturating_add(CLOCK_SKEW_SECS) && now < state.expires;
        fresh.then_some(state)
    }

    /// The gateway's id for a server request of the session `session_id`.
    pub fn seal_request(&self, session_id: &str, route: &SealedRoute) -> Option<String> {
        let plaintext = serde_json::to_vec(route).ok()?;
        self.seal(&request_purpose(session_id), plaintext)
    }

    /// Where a server request came from, if `text` is the gateway's id for one of the
    /// session `session_id`.
    pub fn open_request(&self, session_id: &str, text: &str) -> Option<SealedRoute> {
        let plaintext = self.open(&request_purpose(session_id), text)?;
        serde_json::from_slice(&plaintext).ok()
    }

    fn seal(&self, purpose: &[u8], mut plaintext: Vec<u8>) -> Option<String> {
        if base64_len(plaintext.len() + OVERHEAD) > MAX_ID_CHARS {
            return None;
        }
        plaintext.reserve(TAG_LEN);
        let nonce = self.current.seal_in_place_append_tag(Aad::from(aad(purpose)), &mut plaintext).ok()?;
        let mut sealed = Vec::with_capacity(OVERHEAD + plaintext.len());
        sealed.push(FORMAT);
        sealed.extend_from_slice(nonce.as_ref());
        sealed.extend_from_slice(&plaintext);
        Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed))
    }

    fn open(&self, purpose: &[u8], text: &str) -> Option<Vec<u8>> {
        if text.len() > MAX_ID_CHARS || text.len() < base64_len(OVERHEAD) {
            return None;
        }
        let sealed = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()?;
        let (&format, rest) = sealed.split_first()?;
        if format != FORMAT || rest.len() < NONCE_LEN + TAG_LEN {
            return None;
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let aad = aad(purpose);
        std::iter::once(&self.current).chain(&self.previous).find_map(|key| {
            let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
            let mut buffer = ciphertext.to_vec();
            key.open_in_place(nonce, Aad::from(&aad), &mut buffer).ok().map(|plain| plain.to_vec())
        })
    }
}

fn aad(purpose: &[u8]) -> Vec<u8> {
    let mut aad = Vec::with_capacity(1 + purpose.len());
    aad.push(FORMAT);
    aad.extend_from_slice(purpose);
    aad
}

fn request_purpose(session_id: &str) -> Vec<u8> {
    [REQUEST_PURPOSE, session_id.as_bytes()].concat()
}

/// Characters of `n` bytes in unpadded base64.
fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4 - (3 - n % 3) % 3
}

/// The client info as sealed: as it is when small, else its `name` and `version` (cut
/// to [`MAX_INFO_FIELD_CHARS`]).
fn bounded_client_info(info: &Value) -> Value {
    if serde_json::to_string(info).is_ok_and(|text| text.len() <= MAX_CLIENT_INFO_BYTES) {
        return info.clone();
    }
    let mut reduced = Map::new();
    for field in ["name", "version"] {
        let text = info.get(field).and_then(Value::as_str).unwrap_or("unknown");
        reduced.insert(field.to_owned(), Value::String(text.chars().take(MAX_INFO_FIELD_CHARS).collect()));
    }
    Value::Object(reduced)
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DAY: Duration = Duration::from_secs(86_400);

    fn keys(byte: u8) -> SessionKeys {
        SessionKeys::shared(&[byte; 32], &[], DAY).unwrap()
    }

    fn state() -> SealedSession {
        SealedSession {
            scope: None,
            version: "2025-11-25".into(),
            capabilities: json!({"sampling": {}, "roots": {"listChanged": true}}),
            client_info: json!({"name": "claude-code", "version": "1.0.0"}),
            principal: Some("key:ci".into()),
            upstreams: vec![SealedUpstream {
                name: "demo".into(),
                endpoint: None,
                session_id: "0b1f6c0e-3d0a-4c55-9a3e-5f2f0a8e6d11".into(),
                version: "2025-11-25".into(),
                capabilities: vec!["tools".into(), "resources".into(), "prompts".into(), "logging".into()],
            }],
            issued: 1_000,
            expires: 1_000 + DAY.as_secs(),
        }
    }

    #[test]
    fn a_sealed_id_opens_to_its_state_and_is_a_visible_ascii_header_value() {
        let keys = keys(1);
        let id = keys.seal_session(&state()).unwrap();
        assert!(id.bytes().all(|c| (0x21..=0x7e).contains(&c)), "{id}");
        assert!(http::HeaderValue::from_str(&id).is_ok());
        assert_eq!(keys.open_session(&id, 2_000), Some(state()));
        assert_ne!(id, keys.seal_session(&state()).unwrap(), "a fresh nonce for every id");
        // A typical one-upstream session stays well under the cap.
        assert!(id.len() < 600, "{} characters", id.len());
    }

    #[test]
    fn a_state_that_does_not_read_back_is_not_sealed() {
        // serde_json keeps these object keys for its own numbers and raw values: such a
        // state would seal to an id that opens to nothing.
        for key in ["$serde_json::private::Number", "$serde_json::private::RawValue"] {
            let odd = SealedSession { capabilities: json!({"x": {key: true}}), ..state() };
            assert_eq!(keys(1).seal_session(&odd), None, "{key}");
        }
    }

    #[test]
    fn a_tampered_truncated_or_forged_id_opens_to_nothing() {
        let keys = keys(1);
        let id = keys.seal_session(&state()).unwrap();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&id).unwrap();
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 0x01;
            let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&flipped);
            assert_eq!(keys.open_session(&text, 2_000), None, "byte {i} flipped");
        }
        assert_eq!(keys.open_session(&id[..id.len() - 1], 2_000), None);
        assert_eq!(keys.open_session(&format!("{id}A"), 2_000), None);
        for forged in ["", "A", "AQ", &crate::session::mint_id(), &"A".repeat(MAX_ID_CHARS + 1), "not base64!"] {
            assert_eq!(keys.open_session(forged, 2_000), None, "{forged:?}");
        }
        // Another format byte is not read as this one.
        let mut other_format = bytes.clone();
        other_format[0] = 2;
        let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&other_format);
        assert_eq!(keys.open_session(&text, 2_000), None);
    }

    #[test]
    fn an_id_opens_under_its_own_key_and_a_rotation_only() {
        let old = keys(1);
        let id = old.seal_session(&state()).unwrap();
        assert_eq!(keys(2).open_session(&id, 2_000), None, "another key");
        assert_eq!(SessionKeys::random(DAY).unwrap().open_session(&id, 2_000), None);
        let rotated = SessionKeys::shared(&[2; 32], &[[1; 32]], DAY).unwrap();
        assert_eq!(rotated.open_session(&id, 2_000), Some(state()), "the old key is a previous key");
        let resealed = rotated.seal_session(&state()).unwrap();
        assert_eq!(old.open_session(&resealed, 2_000), None, "new ids use the new key");
        assert_eq!(keys(2).open_session(&resealed, 2_000), Some(state()));
    }

    #[test]
    fn an_id_opens_from_its_issue_until_it_expires() {
        let keys = keys(1);
        let id = keys.seal_session(&state()).unwrap();
        let expires = state().expires;
        assert!(keys.open_session(&id, expires - 1).is_some());
        assert_eq!(keys.open_session(&id, expires), None, "expired");
        assert!(keys.open_session(&id, 1_000 - CLOCK_SKEW_SECS).is_some(), "a replica whose clock is behind");
        assert_eq!(keys.open_session(&id, 0), None, "issued in the future");
    }

    #[test]
    fn a_large_client_info_is_reduced_and_a_state_too_large_is_not_sealed() {
        let keys = keys(1);
        let mut big = state();
        big.client_info = json!({"name": "n".repeat(100), "version": "1", "extra": "x".repeat(4_000)});
        let id = keys.seal_session(&big).unwrap();
        let opened = keys.open_session(&id, 2_000).unwrap();
        assert_eq!(opened.client_info, json!({"name": "n".repeat(MAX_INFO_FIELD_CHARS), "version": "1"}));
        let mut huge = state();
        huge.capabilities = json!({"experimental": {"blob": "x".repeat(MAX_ID_CHARS)}});
        assert_eq!(keys.seal_session(&huge), None);
        // The largest state that seals gives an id within the cap.
        let mut fits = state();
        let mut n = 0;
        loop {
            fits.capabilities = json!({"experimental": {"blob": "x".repeat(n + 1)}});
            if keys.seal_session(&fits).is_none() {
                break;
            }
            n += 1;
        }
        fits.capabilities = json!({"experimental": {"blob": "x".repeat(n)}});
        let id = keys.seal_session(&fits).unwrap();
        assert!(id.len() <= MAX_ID_CHARS && id.len() > MAX_ID_CHARS - 4, "{}", id.len());
        assert_eq!(keys.open_session(&id, 2_000).map(|s| s.capabilities), Some(fits.capabilities));
    }

    #[test]
    fn a_request_id_opens_in_its_own_session_only_and_is_no_session_id() {
        let keys = keys(1);
        let route = SealedRoute { upstream: "demo".into(), endpoint: Some(1), id: "\"demo-1\"".into() };
        let text = keys.seal_request("session-a", &route).unwrap();
        assert_eq!(keys.open_request("session-a", &text), Some(route));
        assert_eq!(keys.open_request("session-b", &text), None);
        assert_eq!(keys.open_session(&text, 2_000), None);
        let id = keys.seal_session(&state()).unwrap();
        assert_eq!(keys.open_request("session-a", &id), None);
    }

    #[test]
    fn base64_lengths_are_those_of_the_engine() {
        for n in 0..100 {
            assert_eq!(base64_len(n), base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(vec![0; n]).len());
        }
    }

    #[test]
    fn keys_never_show_in_debug_output() {
        let shown = format!("{:?}", SessionKeys::shared(&[0x41; 32], &[[0x42; 32]], DAY).unwrap());
        assert!(!shown.contains("65") && !shown.contains("AAAA"), "{shown}");
    }
}
