//! Credentials: PEM key blocks, `key = value` secrets, `Authorization` schemes and the
//! `user:password@host` of a connection string written without its scheme.

use std::borrow::Cow;

use super::bytes::{
    at, escape_at, find, is_alnum, is_control, is_marker, marker_before, run_end, skip_escape, value_end,
    word_continues, word_start,
};
use super::markers::{MARK_REDACTED, MARK_REDACTED_SPACED};
use super::span::{Span, apply};

// --- PEM blocks -------------------------------------------------------------------------

/// Replaces PEM blocks (private keys, certificates) with a marker.
pub(super) fn redact_pem_blocks(text: &str) -> Cow<'_, str> {
    let mut spans = Vec::new();
    pem_blocks(text.as_bytes(), &mut spans);
    if spans.is_empty() { Cow::Borrowed(text) } else { Cow::Owned(apply(text, spans)) }
}

/// `-----BEGIN <LABEL>-----` … `-----END <LABEL>-----`, or to the end when unterminated.
fn pem_blocks(b: &[u8], spans: &mut Vec<Span>) {
    let mut from = 0;
    while let Some(start) = find(b, from, b"-----BEGIN ") {
        let Some(body) = pem_label_end(b, start + 11) else {
            from = start + 11;
            continue;
        };
        // A malformed end line ends the block after its dashes and `END`: the byte after
        // (the space `-----END ` was found by) may set off what follows.
        let end = find(b, body, b"-----END ").map_or(b.len(), |e| pem_label_end(b, e + 9).unwrap_or(e + 8));
        // What follows a marker directly is read as its continuation, not as a word: a
        // token glued to the block (`-----Bearer x`) is set off by a space instead.
        let marker =
            if b.get(end).is_some_and(|c| c.is_ascii_alphanumeric()) { MARK_REDACTED_SPACED } else { MARK_REDACTED };
        spans.push(Span { start, end, marker });
        from = end;
    }
}

/// After `-----BEGIN ` or `-----END `: the end of `LABEL-----`.
fn pem_label_end(b: &[u8], i: usize) -> Option<usize> {
    let end = run_end(b, i, |c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b' ');
    (end > i && b.get(end..end + 5) == Some(&b"-----"[..])).then_some(end + 5)
}

// --- key = value credentials ------------------------------------------------------------

/// Keys whose value is a secret, matched case-insensitively as the end of an identifier
/// (`DB_PASSWORD`, `x-api-key`, `clientSecret`, `access_token`).
const SECRET_KEYS: &[&[u8]] = &[
    b"password",
    b"passwd",
    b"passphrase",
    b"pwd",
    b"secret",
    b"token",
    b"apikey",
    b"api_key",
    b"api-key",
    b"access_key",
    b"private_key",
    b"secret_key",
    b"credential",
    b"credentials",
];
/// Header-like keys whose value runs to the end of the line (`Authorization: Bearer x`).
const LINE_KEYS: &[&[u8]] = &[b"authorization", b"cookie"];

fn is_key_byte(c: u8) -> bool {
    is_alnum(c) || matches!(c, b'_' | b'-' | b'.')
}

/// `password=…`, `"api_key": "…"`, `Authorization: …`, `secret: …`, `token=…`.
/// Values up to this long are scanned again for nested `key: value` pairs.
const RESCAN_VALUE: usize = 64;

pub(super) fn key_values(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        if !is_key_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = skip_escape(b, i);
        let end = run_end(b, i, is_key_byte);
        i = end;
        let Some(whole_line) = secret_key(b, start, end) else {
            continue;
        };
        if let Some((vs, ve)) = key_value(b, end, whole_line) {
            if ve > vs && !is_marker(&b[vs..ve]) {
                spans.push(Span { start: vs, end: ve, marker: MARK_REDACTED });
            }
            // A short value may itself be a secret key with a value of its own
            // (`password: password: x`): scan it again. A long one (or a whole line) is
            // skipped, which keeps the scan linear; everything in it is redacted anyway.
            i = if !whole_line && ve - vs <= RESCAN_VALUE { vs.max(end) } else { i.max(ve) };
        }
    }
}

/// Whether `b[start..end]` ends with a secret key at an identifier boundary; `Some(true)`
/// for a header whose value is the rest of the line.
fn secret_key(b: &[u8], start: usize, end: usize) -> Option<bool> {
    let word = b.get(start..end)?;
    let matches = |key: &[u8]| {
        let Some(k) = word.len().checked_sub(key.len()) else {
            return false;
        };
        word[k..].eq_ignore_ascii_case(key)
            && (k == 0
                || matches!(word[k - 1], b'_' | b'-' | b'.')
                || (word[k].is_ascii_uppercase() && !word[k - 1].is_ascii_uppercase()))
    };
    if LINE_KEYS.iter().any(|k| matches(k)) {
        Some(true)
    } else if SECRET_KEYS.iter().any(|k| matches(k)) {
        Some(false)
    } else {
        None
    }
}

/// The value after a key ending at `j`: an optional closing quote of the key, `=` or
/// `:` (not `==`, `::`), blanks, then a quoted or bare value.
fn key_value(b: &[u8], mut j: usize, whole_line: bool) -> Option<(usize, usize)> {
    if matches!(at(b, j), b'"' | b'\'') {
        j += 1;
    }
    j = run_end(b, j, |c| c == b' ' || c == b'\t');
    let sep = at(b, j);
    if !matches!(sep, b'=' | b':') || at(b, j + 1) == sep {
        return None;
    }
    j = run_end(b, j + 1, |c| c == b' ' || c == b'\t');
    let quote = at(b, j);
    if matches!(quote, b'"' | b'\'') {
        let start = j + 1;
        let mut k = start;
        while k < b.len() && b[k] != quote && !is_control(b[k]) && !escape_at(b, k) {
            k += if b[k] == b'\\' { 2 } else { 1 };
        }
        return Some((start, k.min(b.len())));
    }
    if whole_line {
        let end = run_end(b, j, |c| !is_control(c) && c != b'"');
        let mut k = j;
        while k < end && !escape_at(b, k) {
            k += 1;
        }
        return Some((j, k));
    }
    Some((j, value_end(b, j)))
}

// --- user:password@host ------------------------------------------------------------------

/// A byte of the `user:password` before an `@` (URL userinfo, minus the delimiters of
/// prose and `key=value` lists).
fn is_userinfo_byte(c: u8) -> bool {
    is_alnum(c) || matches!(c, b':' | b'.' | b'_' | b'~' | b'%' | b'!' | b'$' | b'&' | b'*' | b'+' | b'-')
}

/// `svc:Pa55w0rd@10.0.0.5:5432`, `:secret@cache:6379` — the credentials of a connection
/// string whose scheme was left out (a URL is redacted whole by `urls`). An e-mail
/// address has no `:` before its `@` and stays.
pub(super) fn userinfo(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        if !is_userinfo_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = skip_escape(b, i);
        let end = run_end(b, i, is_userinfo_byte);
        i = end + 1;
        // A host follows; a run glued to a marker stood for something else.
        if at(b, end) != b'@' || !(is_alnum(at(b, end + 1)) || at(b, end + 1) == b'[') || marker_before(b, start) {
            continue;
        }
        let Some(colon) = b.get(start..end).and_then(|run| run.iter().position(|&c| c == b':')) else { continue };
        // A password after the colon; `::` is an IPv6 address or a path, not a login.
        let password = &b[start + colon + 1..end];
        if !password.is_empty() && !password.starts_with(b":") {
            spans.push(Span { start, end, marker: MARK_REDACTED });
        }
    }
}

// --- Authorization schemes --------------------------------------------------------------

/// `Bearer <token>` (token of 8 bytes or more) and `Basic <base64>`.
pub(super) fn auth_schemes(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !matches!(c, b'b' | b'B') || !word_start(b, i) {
            i += 1;
            continue;
        }
        let (bearer, basic) = (scheme_at(b, i, b"bearer"), scheme_at(b, i, b"basic"));
        let Some(after) = bearer.or(basic) else {
            i += 1;
            continue;
        };
        let start = run_end(b, after, |c| c == b' ' || c == b'\t');
        let end = value_end(b, start);
        let token = &b[start..end];
        let redact = if bearer.is_some() {
            token.len() >= 8 && !is_marker(token)
        } else {
            // "Basic" is also an English word: require something base64 and not prose.
            (b.get(i..i + 5) == Some(&b"Basic"[..]) || b.get(i..i + 5) == Some(&b"BASIC"[..]))
                && looks_like_basic_credentials(token)
                && !word_continues(b, end)
        };
        if start > after && redact {
            spans.push(Span { start, end, marker: MARK_REDACTED });
            i = end;
        } else {
            i = after;
        }
    }
}

/// The end of `word` (case-insensitive) at `i` when it is a whole word.
fn scheme_at(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    let end = i + word.len();
    (b.get(i..end)?.eq_ignore_ascii_case(word) && !word_continues(b, end)).then_some(end)
}

fn looks_like_basic_credentials(token: &[u8]) -> bool {
    token.len() >= 8
        && token.iter().all(|&c| is_alnum(c) || matches!(c, b'+' | b'/' | b'='))
        && token.iter().skip(1).any(|&c| c.is_ascii_digit() || c.is_ascii_uppercase() || !is_alnum(c))
}

#[cfg(test)]
mod tests {
    //! Credentials become markers; words that resemble them stay.

    use crate::sanitize::test_support::big;

    #[test]
    fn credentials_are_redacted() {
        let jwt =
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        let cases = [
            ("Authorization: Bearer abc.def-ghi_jkl123".to_owned(), "Authorization: [redacted]".to_owned()),
            ("sent Bearer 7f3c9a0b1e2d4c5f".to_owned(), "sent Bearer [redacted]".to_owned()),
            ("header Basic dXNlcjpwYXNzd29yZA== rejected".to_owned(), "header Basic [redacted] rejected".to_owned()),
            (format!("token {jwt} expired"), "token [redacted] expired".to_owned()),
            ("key sk-proj-4fT9xQ2mLp8RzW1vB6nK3jH0 invalid".to_owned(), "key [redacted] invalid".to_owned()),
            ("sk-live-0123456789abcdefghijkLMN".to_owned(), "[redacted]".to_owned()),
            ("stripe sk_test_4eC39HqLyjWDarjtT1zdp7dc".to_owned(), "stripe [redacted]".to_owned()),
            ("aws AKIAIOSFODNN7EXAMPLE denied".to_owned(), "aws [redacted] denied".to_owned()),
            ("gh ghp_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(), "gh [redacted]".to_owned()),
            ("gho_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(), "[redacted]".to_owned()),
            ("ghs_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(), "[redacted]".to_owned()),
            ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop".to_owned(), "[redacted]".to_owned()),
            ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".to_owned(), "slack [redacted]".to_owned()),
            ("xoxp-123456789012-abcdefghij".to_owned(), "[redacted]".to_owned()),
            ("password=hunter2 rejected".to_owned(), "password=[redacted] rejected".to_owned()),
            ("DB_PASSWORD: s3cr3t!".to_owned(), "DB_PASSWORD: [redacted]".to_owned()),
            ("passwd:letmein".to_owned(), "passwd:[redacted]".to_owned()),
            ("client_secret=abc&x=1".to_owned(), "client_secret=[redacted]&x=1".to_owned()),
            ("api_key=AbC123 user=bob".to_owned(), "api_key=[redacted] user=bob".to_owned()),
            ("token=deadbeef".to_owned(), "token=[redacted]".to_owned()),
            ("x-api-key: k-123".to_owned(), "x-api-key: [redacted]".to_owned()),
            (
                "{\"password\": \"correct horse battery\", \"user\": \"bob\"}".to_owned(),
                "{\"password\": \"[redacted]\", \"user\": \"bob\"}".to_owned(),
            ),
            ("{'accessToken': 'a\\'b'}".to_owned(), "{'accessToken': '[redacted]'}".to_owned()),
            ("Cookie: session=abc; theme=dark".to_owned(), "Cookie: [redacted]".to_owned()),
            (
                "FATAL: could not connect as svc_billing:Pa55w0rd-Billing@10.20.30.40:5432".to_owned(),
                "FATAL: could not connect as [redacted]@[host]".to_owned(),
            ),
            ("auth :r3dis-pass@cache:6379 refused".to_owned(), "auth [redacted]@[host] refused".to_owned()),
            ("login admin:hunter2@db.example.com failed".to_owned(), "login [redacted]@db.example.com failed".to_owned()),
            (
                "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".to_owned(),
                "sha [redacted]".to_owned(),
            ),
            ("aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY2".to_owned(), "aws secret [redacted]".to_owned()),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nafter".to_owned(),
                "[redacted]\\x0aafter".to_owned(),
            ),
            // What follows a key block stays a word of its own: a malformed end line does not
            // take the space after it, and a token glued to the dashes is set off.
            (
                "-----BEGIN RSA PRIVATE KEY-----\n... -----END Bearer Zk3Q9x2LmPq7Rt5Vw8Y1 x".to_owned(),
                "[redacted] Bearer [redacted] x".to_owned(),
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----Bearer Zk3Q9x2LmPq7Rt5Vw8Y1"
                    .to_owned(),
                "[redacted] Bearer [redacted]".to_owned(),
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(big(&input), expected, "{input}");
        }
    }

    #[test]
    fn words_that_resemble_credentials_stay() {
        for s in [
            "Basic usage: call with a query",
            "the bearer of bad news",
            "max_tokens=100 exceeded",
            "tokens: 5",
            "unexpected token } at position 3",
            "some_long_snake_case_function_name_here_too",
            "getUserAccountSettingsForTenantAndRegion",
            "request 550e8400-e29b-41d4-a716-446655440000 failed",
            "sk-learn-is-a-python-library-for-ml",
            "password must be at least 8 characters",
            "std::io::Error",
            "mail ops@example.com at 12:30",
            "git@github.com:org/repo.git",
            "key::value@node",
        ] {
            assert_eq!(big(s), s, "{s}");
        }
    }

    #[test]
    fn a_secret_key_used_as_a_value_does_not_shield_the_next_value() {
        let out = super::super::sanitize("password: password: A0a!a*^~#^#0", 256);
        assert!(!out.contains("A0a!a"), "{out}");
    }
}
