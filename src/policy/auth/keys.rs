//! Static API keys, kept only as SHA-256 digests and compared in constant time.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::ApiKeyConfig;
use crate::identity::Principal;

/// A SHA-256 digest.
type Sha = [u8; 32];

/// The configured API keys.
#[derive(Debug, Default)]
pub(crate) struct KeySet {
    keys: Vec<(Sha, Arc<Principal>)>,
}

impl KeySet {
    /// The keys of the configuration; entries without a usable key or digest (which
    /// `check-config` reports) are left out.
    pub(crate) fn new(entries: &[ApiKeyConfig]) -> KeySet {
        let keys = entries
            .iter()
            .filter_map(|entry| {
                let digest = match (&entry.key, &entry.sha256) {
                    (Some(key), None) => Some(digest_of(key)),
                    (None, Some(hex)) => parse_hex(hex),
                    _ => None,
                }?;
                Some((digest, Arc::new(Principal::api_key_with_scopes(&entry.name, &entry.scopes))))
            })
            .collect();
        KeySet { keys }
    }

    /// How many keys are configured.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The principal whose key `token` is. Every key is compared, each in constant
    /// time, so the time taken says nothing about which key came close.
    pub(crate) fn lookup(&self, token: &str) -> Option<Arc<Principal>> {
        let presented = digest_of(token);
        let mut found = None;
        for (digest, principal) in &self.keys {
            if bool::from(digest.ct_eq(&presented)) {
                found = Some(principal);
            }
        }
        found.cloned()
    }
}

fn digest_of(text: &str) -> Sha {
    Sha256::digest(text.as_bytes()).into()
}

/// 64 hex digits as bytes.
fn parse_hex(text: &str) -> Option<Sha> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let high = char::from(pair[0]).to_digit(16)?;
        let low = char::from(pair[1]).to_digit(16)?;
        out[i] = u8::try_from(high * 16 + low).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, key: Option<&str>, sha256: Option<&str>) -> ApiKeyConfig {
        ApiKeyConfig { name: name.into(), key: key.map(Into::into), sha256: sha256.map(Into::into), scopes: vec![] }
    }

    #[test]
    fn literal_and_hashed_keys_match_their_principal() {
        let ops_hex: String = Sha256::digest(b"0123456789abcdef-ops").iter().map(|b| format!("{b:02X}")).collect();
        let set = KeySet::new(&[entry("ci", Some("0123456789abcdef-ci"), None), entry("ops", None, Some(&ops_hex))]);
        assert_eq!(set.len(), 2);
        assert_eq!(set.lookup("0123456789abcdef-ci").map(|p| p.label()), Some("key:ci".into()));
        assert_eq!(set.lookup("0123456789abcdef-ops").map(|p| p.label()), Some("key:ops".into()));
        assert!(set.lookup("0123456789abcdef-c").is_none());
        assert!(set.lookup("").is_none());
        assert!(set.lookup(&ops_hex).is_none(), "the digest itself is not a key");
    }

    #[test]
    fn unusable_entries_are_left_out() {
        let some_sha = "0f".repeat(32);
        let set = KeySet::new(&[
            entry("both", Some("k"), Some(&some_sha)),
            entry("none", None, None),
            entry("short", None, Some("abcd")),
            entry("nothex", None, Some(&"zz".repeat(32))),
        ]);
        assert_eq!(set.len(), 0);
        assert_eq!(parse_hex(&some_sha), Some([0x0f; 32]));
    }
}
