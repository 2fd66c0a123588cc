//! Properties over random and adversarial input: output is capped, printable and a fixed
//! point, and planted secrets never survive.

use proptest::prelude::*;

use crate::sanitize::tokens::looks_like_key;
use crate::sanitize::{Quoting, quote, sanitize, sanitize_quoting, scrub};

/// Fragments that exercise every detector and their interplay with escapes and cuts.
const SOUP: &[&str] = &[
    " ",
    " ",
    "\n",
    "\t",
    "\r\n",
    "é",
    "€",
    "\u{1b}[31m",
    "\u{1b}]0;",
    "\u{7}",
    "\\",
    "\\x0a",
    "\\\\",
    "x0a",
    "[redacted]",
    "[url]",
    "[path]",
    "...",
    ".",
    ",",
    ":",
    "::",
    "=",
    "\"",
    "'",
    "(",
    ")",
    "[",
    "]",
    "/",
    "//",
    "~",
    "@",
    "-",
    "_",
    "C:",
    "C:\\",
    "http",
    "://",
    "eyJ",
    "eyJhbGciOiJIUzI1NiJ9",
    "sk-",
    "sk_test_",
    "ghp_",
    "AKIA",
    "ABCDEFGHIJKLMNOP",
    "xoxb-",
    "Bearer",
    "Basic",
    "password",
    "token",
    "Authorization",
    "secret",
    "at ",
    "File \"",
    "\", line 1",
    "Traceback (most recent call last):",
    "  ",
    "goroutine 1 [running]:",
    "stack backtrace:",
    "thread 'main' panicked at '",
    "', ",
    "Caused by:",
    "... 3 more",
    "10.0.0.1",
    "fe80",
    "1",
    "12",
    "5432",
    "localhost",
    ".internal",
    "db",
    "home",
    "srv",
    "0123456789abcdef",
    "A1b2C3d4E5f6",
    "aB3",
    "Zz9",
    "-----BEGIN ",
    "-----END ",
    "-----",
    "line",
    "main.go",
    "a",
    "word",
    "^^^",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(SOUP), 0..60).prop_map(|parts| parts.concat())
}

fn secret_kind() -> impl Strategy<Value = (String, String)> {
    // (text to plant, the part that must not survive)
    let bare = |pattern: &'static str| pattern.prop_map(|s: String| (s.clone(), s));
    prop_oneof![
        "[A-Za-z0-9._~+/-]{19}[0-9]".prop_map(|t| (format!("Bearer {t}"), t)),
        "[A-Za-z0-9+/]{12,30}[0-9]={0,2}".prop_map(|t| (format!("Basic {t}"), t)),
        bare("eyJ[A-Za-z0-9_-]{10,30}\\.eyJ[A-Za-z0-9_-]{10,40}\\.[A-Za-z0-9_-]{20,43}"),
        bare("sk-(proj-|live-|ant-api03-)?[A-Za-z0-9]{19,40}[0-9]"),
        bare("sk_(test|live)_[A-Za-z0-9]{23}[0-9]"),
        bare("AKIA[A-Z0-9]{16}"),
        bare("(ghp|gho|ghs)_[A-Za-z0-9]{36}"),
        bare("github_pat_[A-Za-z0-9_]{22,82}"),
        bare("xox[bp]-[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{24}"),
        bare("[0-9a-f]{32,64}"),
        ("(password|passwd|secret|api_key|token|DB_PASSWORD|clientSecret)(=|: |:)", "[A-Za-z0-9!#$%*+.^_~-]{11}[0-9]")
            .prop_map(|(k, v)| (format!("{k}{v}"), v)),
        ("(Authorization|authorization|Proxy-Authorization): (Bearer|Token|Basic|Digest) ", "[A-Za-z0-9]{16,32}")
            .prop_map(|(k, v)| (format!("{k}{v}"), v)),
        "[A-Za-z0-9 !#%*+.^_~-]{12,30}".prop_map(|v| (format!("{{\"password\": \"{v}\"}}"), v)),
        "[A-Za-z0-9]{12,20}".prop_map(|v| (format!("https://admin:{v}@db.example.com/x"), v)),
        "[A-Za-z0-9!$&*+._~-]{11}[0-9]".prop_map(|v| (format!("svc:{v}@db.example.com:5432"), v)),
        "[A-Za-z0-9+/]{40}".prop_filter("looks random", |s| looks_like_key(s.as_bytes())).prop_map(|s| (s.clone(), s)),
        "[A-Za-z0-9+/]{64}".prop_map(|s| (format!("-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----"), s)),
        (1u8..=254, 0u8..=255, 0u8..=255, 1u8..=254, 1024u16..).prop_map(|(a, b, c, d, p)| {
            let ip = format!("{a}.{b}.{c}.{d}:{p}");
            (ip.clone(), ip)
        }),
        "[a-z]{3,10}".prop_map(|h| (format!("{h}.prod.internal"), format!("{h}.prod.internal"))),
        "[a-z]{3,10}".prop_map(|u| (format!("/home/{u}/.ssh/id_ed25519"), format!("/home/{u}/.ssh"))),
    ]
}

fn prose() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9 ,.;:()\\n\\té'-]{0,60}", soup(), any::<String>(),]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn quote_is_capped_printable_and_keeps_short_printable_text(input in any::<String>(), cap in 0usize..300) {
        let out = quote(&input, cap);
        prop_assert!(out.len() <= cap);
        prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
        if input.len() <= cap && input.bytes().all(|c| (0x20..=0x7e).contains(&c)) {
            prop_assert_eq!(out, input);
        }
    }

    #[test]
    fn any_input_gives_capped_printable_idempotent_output(input in any::<String>(), cap in 0usize..300) {
        let out = sanitize(&input, cap);
        prop_assert!(out.len() <= cap);
        prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
        prop_assert_eq!(sanitize(&out, cap), out);
    }

    #[test]
    fn adversarial_soup_gives_capped_printable_idempotent_output(input in soup(), cap in 0usize..300) {
        let out = sanitize(&input, cap);
        prop_assert!(out.len() <= cap);
        prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
        prop_assert_eq!(sanitize(&out, cap), out);
    }

    #[test]
    fn keeping_the_clients_values_keeps_the_guarantees(
        input in soup(),
        from in 0usize..400,
        len in 1usize..40,
        cap in 0usize..300,
        credentials_only in any::<bool>(),
    ) {
        // A value the client sent: a piece of the text (cut at char boundaries).
        let start = input.floor_char_boundary(from.min(input.len()));
        let end = input.floor_char_boundary((start + len).min(input.len()));
        let values = vec![input[start..end].to_owned()];
        let quoting = Quoting { client_values: &values, credentials_only };
        let out = sanitize_quoting(&input, cap, &quoting);
        prop_assert!(out.len() <= cap);
        prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
        prop_assert_eq!(sanitize_quoting(&out, cap, &quoting), out);
    }

    #[test]
    fn planted_secrets_the_client_did_not_send_never_survive(
        before in prose(),
        (planted, secret) in secret_kind(),
        after in prose(),
    ) {
        // The client sent the text around the secret, not the secret.
        let values = vec![before.clone(), after.clone()];
        prop_assume!(!values.iter().any(|v| v.contains(&secret)));
        let quoting = Quoting { client_values: &values, credentials_only: false };
        let input = format!("{before} {planted} {after}");
        let out = sanitize_quoting(&input, 8192, &quoting);
        prop_assert!(!out.contains(&secret), "{} in {}", secret, out);
    }

    #[test]
    fn planted_secrets_never_survive(
        before in prose(),
        (planted, secret) in secret_kind(),
        after in prose(),
    ) {
        let input = format!("{before} {planted} {after}");
        for out in [sanitize(&input, 8192), scrub(&input)] {
            prop_assert!(!out.contains(&secret), "{} in {}", secret, out);
            // Nor a recognisable piece of it.
            if secret.len() >= 16 {
                for window in secret.as_bytes().windows(12) {
                    let window = std::str::from_utf8(window).unwrap();
                    prop_assert!(!out.contains(window), "{} of {} in {}", window, secret, out);
                }
            }
        }
    }
}
