//! Sanitiser, planted secrets: whatever text surrounds a credential, address or internal
//! host name (set off by spaces), neither `scrub` nor `sanitize` lets it, or a 12-byte
//! piece of a long one, through.
//!
//! Input: a byte choosing the secret, a byte choosing where the rest is cut into the text
//! before and the text after it, the rest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall::sanitize;

/// (text planted, the part that must not survive)
const PLANTED: &[(&str, &str)] = &[
    ("Bearer Zk3Q9x2LmPq7Rt5Vw8Y1", "Zk3Q9x2LmPq7Rt5Vw8Y1"),
    ("Basic YWRtaW46aHVudGVyMg9", "YWRtaW46aHVudGVyMg9"),
    (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    ("sk-proj-4f8Kq2LmZx9Rt7Vw3Yb1Nc6", "sk-proj-4f8Kq2LmZx9Rt7Vw3Yb1Nc6"),
    ("sk_live_51HxQ2eLmZx9Rt7Vw3Yb1Nc6", "sk_live_51HxQ2eLmZx9Rt7Vw3Yb1Nc6"),
    ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    (
        "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    ("5f4dcc3b5aa765d61d8327deb882cf99", "5f4dcc3b5aa765d61d8327deb882cf99"),
    ("password=hunter2hunter2", "hunter2hunter2"),
    ("DB_PASSWORD: Xq7!v9#Lm2Pa", "Xq7!v9#Lm2Pa"),
    ("Authorization: Bearer abcdef0123456789", "abcdef0123456789"),
    ("{\"password\": \"correct horse battery\"}", "correct horse battery"),
    ("https://admin:Pa55w0rdPa55@db.example.com/x", "Pa55w0rdPa55"),
    ("postgres://app:S3cretS3cret@10.1.2.3:5432/app", "S3cretS3cret"),
    (
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    ),
    ("10.20.30.40:6379", "10.20.30.40:6379"),
    ("billing.prod.internal", "billing.prod.internal"),
    ("/home/alice/.ssh/id_ed25519", "/home/alice/.ssh"),
];

fuzz_target!(|data: &[u8]| {
    let [which, cut, rest @ ..] = data else {
        return;
    };
    let (planted, secret) = PLANTED[usize::from(*which) % PLANTED.len()];
    let at = rest.len() * usize::from(*cut) / 256;
    let before = String::from_utf8_lossy(&rest[..at]);
    let after = String::from_utf8_lossy(&rest[at..]);
    let pieces = pieces(secret);
    // The surrounding text may not bring its own copy, which need not look like a secret:
    // as it is, with the space that sets the secret off, or as the sanitiser leaves it
    // (escape sequences stripped, so that the pieces around one meet; controls written as
    // `\xNN`, whose digits may start one — also where the sanitiser, seeing the text
    // alone, would have dropped it, as a trace line at its start, or redacted what the
    // stripped escapes joined).
    // And the surrounding text without the secret at all: where the secret vanished with
    // an escape sequence it sat in, the text on either side of that sequence meets.
    let (before, after) = (format!("{before} "), format!(" {after}"));
    let joined = format!("{before}{after}");
    let around: Vec<String> = [&before, &after, &joined]
        .into_iter()
        .flat_map(|text| {
            let plain = sanitize::without_escapes(text);
            let escaped_plain = escaped(&plain);
            [text.clone(), sanitize::scrub(text), sanitize::sanitize(text, 8192), escaped(text), plain, escaped_plain]
        })
        .collect();
    let brought = |piece: &&str| around.iter().any(|text| text.contains(piece));
    if pieces.iter().any(brought) {
        return;
    }
    let input = format!("{before}{planted}{after}");
    for out in [sanitize::scrub(&input), sanitize::sanitize(&input, 8192)] {
        for piece in &pieces {
            assert!(!out.contains(piece), "{piece:?} of {secret:?} survived in {out:?}");
        }
    }
});

/// `text` with every byte but printable ASCII written `\xNN`, as the sanitiser writes it.
fn escaped(text: &str) -> String {
    text.bytes()
        .map(|c| if (0x20..=0x7e).contains(&c) { char::from(c).to_string() } else { format!("\\x{c:02x}") })
        .collect()
}

/// The secret and, when it is long, every 12-byte piece of it: a recognisable part.
fn pieces(secret: &str) -> Vec<&str> {
    let mut pieces = vec![secret];
    if secret.len() >= 16 {
        pieces.extend(secret.as_bytes().windows(12).filter_map(|piece| std::str::from_utf8(piece).ok()));
    }
    pieces
}
