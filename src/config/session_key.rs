//! The key material of `session.key`, `key_file`, `previous_keys` and
//! `previous_key_file`: 32-byte keys written in base64. Checked while the file loads, so
//! bad material is a config error with its line; read again at start for the keys
//! themselves. No message ever quotes key material.

use std::path::Path;

use base64::Engine as _;

use super::SessionConfig;
use super::locate::{FieldPath, Problem};

/// The length of a session key (bytes).
pub const SESSION_KEY_BYTES: usize = 32;

/// The keys `session:` configures. `Debug` shows how many there are, never the bytes.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SessionKeyMaterial {
    /// The key that seals new ids; `None` when none is configured.
    pub current: Option<[u8; SESSION_KEY_BYTES]>,
    /// Keys whose ids are still accepted.
    pub previous: Vec<[u8; SESSION_KEY_BYTES]>,
}

impl std::fmt::Debug for SessionKeyMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeyMaterial")
            .field("current", &self.current.is_some())
            .field("previous", &self.previous.len())
            .finish()
    }
}

impl SessionConfig {
    /// The configured keys, read from the config and the key files. The error lists
    /// every problem as `field: message`.
    pub fn key_material(&self) -> Result<SessionKeyMaterial, String> {
        let mut problems = Vec::new();
        let material = read(self, &mut problems);
        if problems.is_empty() {
            return Ok(material);
        }
        Err(problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect::<Vec<_>>().join("; "))
    }
}

/// Checks the key material of `session:`.
pub(crate) fn check_session_keys(session: &SessionConfig, out: &mut Vec<Problem>) {
    read(session, out);
}

fn read(session: &SessionConfig, out: &mut Vec<Problem>) -> SessionKeyMaterial {
    let at = FieldPath::root().key("session");
    let current = match (&session.key, &session.key_file) {
        (Some(_), Some(_)) => {
            out.push(Problem::new(at.key("key"), "give either key or key_file, not both"));
            None
        }
        (Some(text), None) => decode(text).map_err(|why| out.push(Problem::new(at.key("key"), why))).ok(),
        (None, Some(path)) => read_file(path)
            .and_then(|text| decode(&text).map_err(|why| format!("{}: {why}", path.display())))
            .map_err(|why| out.push(Problem::new(at.key("key_file"), why)))
            .ok(),
        (None, None) => None,
    };
    let mut previous = Vec::new();
    for (i, text) in session.previous_keys.iter().enumerate() {
        match decode(text) {
            Ok(key) => previous.push(key),
            Err(why) => out.push(Problem::new(at.key("previous_keys").index(i), why)),
        }
    }
    if let Some(path) = &session.previous_key_file {
        match read_file(path) {
            Ok(text) => {
                for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                    match decode(line) {
                        Ok(key) => previous.push(key),
                        Err(why) => out.push(Problem::new(
                            at.key("previous_key_file"),
                            format!("{} line {}: {why}", path.display(), n + 1),
                        )),
                    }
                }
            }
            Err(why) => out.push(Problem::new(at.key("previous_key_file"), why)),
        }
    }
    let configured = session.key.is_some() || session.key_file.is_some();
    if !configured && (!session.previous_keys.is_empty() || session.previous_key_file.is_some()) {
        let field = if session.previous_keys.is_empty() { "previous_key_file" } else { "previous_keys" };
        out.push(Problem::new(at.key(field), "previous keys need a current key (key or key_file)"));
    }
    SessionKeyMaterial { current, previous }
}

/// The most a key file is read of (bytes): room for many keys, one per line.
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// A key file's text: a regular file (not a device or a pipe, which could be read
/// forever) of at most [`MAX_KEY_FILE_BYTES`].
fn read_file(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(cannot)?;
    if !file.metadata().map_err(cannot)?.is_file() {
        return Err(format!("cannot read {}: not a regular file", path.display()));
    }
    let mut text = String::new();
    file.take(MAX_KEY_FILE_BYTES + 1).read_to_string(&mut text).map_err(cannot)?;
    if text.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(format!("{} is larger than {} KiB: not a key file", path.display(), MAX_KEY_FILE_BYTES / 1024));
    }
    Ok(text)
}

/// One key: base64 of 32 bytes, either alphabet, padding optional, surrounding
/// whitespace ignored.
fn decode(text: &str) -> Result<[u8; SESSION_KEY_BYTES], String> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let text = text.trim();
    if text.is_empty() {
        return Err("empty: a key is 32 bytes in base64, e.g. from `openssl rand -base64 32`".to_owned());
    }
    let unpadded = text.trim_end_matches('=');
    let bytes = STANDARD_NO_PAD
        .decode(unpadded)
        .or_else(|_| URL_SAFE_NO_PAD.decode(unpadded))
        .map_err(|_| "not base64: a key is 32 bytes in base64, e.g. from `openssl rand -base64 32`".to_owned())?;
    <[u8; SESSION_KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
        format!("decodes to {} bytes, not {SESSION_KEY_BYTES}: e.g. `openssl rand -base64 32`", bytes.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    fn problems(session: &SessionConfig) -> Vec<String> {
        let mut out = Vec::new();
        read(session, &mut out);
        out.into_iter().map(|p| format!("{}: {}", p.path, p.message)).collect()
    }

    #[test]
    fn a_key_reads_in_either_alphabet_with_or_without_padding() {
        let expected: [u8; 32] = std::array::from_fn(|i| i as u8);
        for text in [KEY, KEY.trim_end_matches('='), " AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8\n"] {
            assert_eq!(decode(text), Ok(expected), "{text:?}");
        }
        let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xfb; 32]);
        assert!(url_safe.contains('-') || url_safe.contains('_'));
        assert_eq!(decode(&url_safe), Ok([0xfb; 32]));
    }

    #[test]
    fn bad_material_is_named_by_its_field_and_never_quoted() {
        let secret = "c2VjcmV0LXRoYXQtaXMtdG9vLXNob3J0";
        let session = SessionConfig {
            key: Some(secret.into()),
            previous_keys: vec![KEY.into(), "not base64 at all!".into(), String::new()],
            ..SessionConfig::default()
        };
        let found = problems(&session);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("session.key: decodes to 24 bytes, not 32"), "{found:?}");
        assert!(found[1].starts_with("session.previous_keys[1]: not base64"), "{found:?}");
        assert!(found[2].starts_with("session.previous_keys[2]: empty"), "{found:?}");
        assert!(!found.iter().any(|p| p.contains(secret)));
        let both = SessionConfig { key: Some(KEY.into()), key_file: Some("k".into()), ..SessionConfig::default() };
        assert_eq!(problems(&both), ["session.key: give either key or key_file, not both"]);
        let orphan = SessionConfig { previous_keys: vec![KEY.into()], ..SessionConfig::default() };
        assert_eq!(problems(&orphan), ["session.previous_keys: previous keys need a current key (key or key_file)"]);
    }

    #[test]
    fn bad_material_is_a_config_error_with_its_line() {
        let text = "listen: 127.0.0.1:0\nsession:\n  idle_timeout: 5m\n  key: \"${SHORT_KEY}\"\n";
        let lookup = |name: &str| (name == "SHORT_KEY").then(|| "c2hvcnQ=".to_owned());
        let err = crate::config::Config::parse_with_env(text, "gw.yaml", &lookup).unwrap_err().to_string();
        assert!(err.contains("gw.yaml:4: session.key: decodes to 5 bytes, not 32"), "{err}");
        assert!(!err.contains("c2hvcnQ"), "{err}");
        let unset = crate::config::Config::parse_with_env(text, "gw.yaml", &|_| None).unwrap_err().to_string();
        assert!(unset.contains("gw.yaml:4: session.key: environment variable SHORT_KEY is not set"), "{unset}");
    }

    #[test]
    fn key_files_hold_one_key_or_one_per_line() {
        let dir = std::env::temp_dir().join(format!("seawall-session-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key_file = dir.join("key");
        std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
        let previous = dir.join("previous");
        let other = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
        std::fs::write(&previous, format!("{other}\n\n{KEY}\n")).unwrap();
        let session = SessionConfig {
            key_file: Some(key_file.clone()),
            previous_key_file: Some(previous.clone()),
            ..SessionConfig::default()
        };
        let material = session.key_material().unwrap();
        assert_eq!(material.current, Some(std::array::from_fn(|i| i as u8)));
        assert_eq!(material.previous.len(), 2);
        assert!(!format!("{material:?}").contains('9'), "{material:?}");
        std::fs::write(&previous, "short\n").unwrap();
        let missing = SessionConfig { key_file: Some(dir.join("nope")), ..session };
        let found = problems(&missing);
        assert!(found[0].starts_with("session.key_file: cannot read "), "{found:?}");
        assert!(found[1].contains("line 1: "), "{found:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_key_file_is_a_regular_file_of_bounded_size() {
        let device = SessionConfig { key_file: Some("/dev/zero".into()), ..SessionConfig::default() };
        let found = problems(&device);
        assert!(found[0].contains("not a regular file"), "{found:?}");
        let dir = std::env::temp_dir().join(format!("seawall-session-key-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big");
        std::fs::write(&big, "A".repeat(65 * 1024)).unwrap();
        let found = problems(&SessionConfig { key_file: Some(big), ..SessionConfig::default() });
        assert!(found[0].contains("larger than 64 KiB"), "{found:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
