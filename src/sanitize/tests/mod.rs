//! Tests of the sanitiser: the pipeline, escaping and capping here; one file per
//! concern under `tests/`.

mod json;
mod properties;
mod redaction;
mod traces;

use super::*;

/// Sanitises with a cap large enough that nothing is cut.
fn big(text: &str) -> String {
    sanitize(text, 4096)
}

fn assert_clean(out: &str, cap: usize) {
    assert!(out.len() <= cap, "{} > {cap}: {out:?}", out.len());
    assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)), "not printable: {out:?}");
    assert_eq!(sanitize(out, cap), out, "not idempotent");
}

// --- escaping and capping --------------------------------------------------------------

#[test]
fn printable_ascii_passes_unchanged() {
    let s = "tool 'search' failed: quota exceeded (try again in 5 s) {a: [1, 2]} ~!@#$%^&*_+|";
    assert_eq!(big(s), s);
}

#[test]
fn bytes_outside_printable_ascii_become_hex_escapes() {
    assert_eq!(big("café"), "caf\\xc3\\xa9");
    assert_eq!(big("a\nb\tc\rd"), "a\\x0ab\\x09c\\x0dd");
    assert_eq!(big("bell\u{7}del\u{7f}nul\0"), "bell\\x07del\\x7fnul\\x00");
    assert_eq!(big("x\u{1b}y"), "x\\x1by");
    assert_eq!(big("\u{1F600}"), "\\xf0\\x9f\\x98\\x80");
}

#[test]
fn surrounding_whitespace_is_trimmed() {
    assert_eq!(big("\n  error: boom \r\n"), "error: boom");
}

#[test]
fn complete_ansi_sequences_are_stripped() {
    assert_eq!(big("\u{1b}[1;31mError\u{1b}[0m: boom"), "Error: boom");
    assert_eq!(big("\u{1b}[?25lhidden\u{1b}[K"), "hidden");
    // OSC 8 hyperlink (the URL inside goes with it) and a window title.
    assert_eq!(big("see \u{1b}]8;;http://10.0.0.1/x\u{1b}\\docs\u{1b}]8;;\u{1b}\\ now"), "see docs now");
    assert_eq!(big("\u{1b}]0;title\u{7}text"), "text");
    // Incomplete sequences stay, visible and harmless.
    assert_eq!(big("a\u{1b}[31"), "a\\x1b[31");
    assert_eq!(big("a\u{1b}]0;never ends"), "a\\x1b]0;never ends");
}

#[test]
fn a_sequence_never_takes_the_space_before_a_secret_and_its_first_letter() {
    // `ESC [ SP B` is a complete CSI to ECMA-48; stripped, it took " B" from "Bearer".
    let out = scrub("x\u{1b}[ Bearer Zk3Q9x2LmPq7Rt5Vw8Y1 y");
    assert!(!out.contains("Zk3Q9x2LmPq7Rt5Vw8Y1"), "{out:?}");
    assert_eq!(big("\u{1b}[!p\u{1b}[2 q"), "\\x1b[2 q");
}

#[test]
fn cap_counts_the_ellipsis() {
    let long = "a".repeat(100);
    let out = sanitize(&long, 10);
    assert_eq!(out, "aaaaaaa...");
    assert_eq!(sanitize(&"a".repeat(10), 10), "a".repeat(10));
    assert_eq!(sanitize(&"a".repeat(11), 10), "aaaaaaa...");
    assert_eq!(ident(&"t".repeat(200)).len(), IDENT_CAP);
    let out = text(&"word ".repeat(200));
    assert!(out.len() <= TEXT_CAP && out.ends_with("word ..."), "{out}");
    // A cut backs off to a space only when one is near.
    assert_eq!(sanitize(&format!("a {}", "b".repeat(100)), 16), "a ...");
    assert_eq!(sanitize(&format!("a {}", "b".repeat(100)), 40), format!("a {}...", "b".repeat(35)));
    // Nor does it leave half a marker.
    assert_eq!(sanitize("value password=hunter2", 22), "value ...");
}

#[test]
fn cap_never_cuts_inside_an_escape() {
    // Each é is two escapes of four bytes; a cap of 12 leaves 9 for content: two escapes.
    let out = sanitize("éééé", 12);
    assert_eq!(out, "\\xc3\\xa9...");
    for cap in 0..40 {
        let out = sanitize("é€\u{1F600}x\ny", cap);
        assert_clean(&out, cap);
        let body = out.trim_end_matches('.');
        let tail = body.rsplit("\\x").next().unwrap_or("");
        assert!(!body.contains("\\x") || tail.len() >= 2, "cut escape: {out:?}");
    }
}

#[test]
fn tiny_caps() {
    assert_eq!(sanitize("hello", 0), "");
    assert_eq!(sanitize("hello", 1), ".");
    assert_eq!(sanitize("hello", 2), "..");
    assert_eq!(sanitize("hello", 3), "...");
    assert_eq!(sanitize("hello", 4), "h...");
    assert_eq!(sanitize("", 10), "");
}

// --- scrub and bounding -----------------------------------------------------------------

#[test]
fn scrub_keeps_layout_and_unicode() {
    let out = scrub("Überprüfung fehlgeschlagen:\n  token=abc\n  path /srv/x/y\n");
    assert_eq!(out, "Überprüfung fehlgeschlagen:\n  token=[redacted]\n  path [path]\n");
}

#[test]
fn a_megabyte_of_input_completes() {
    let adversarial = [
        "sk-".repeat(350_000),
        "eyJ".repeat(350_000),
        "eyJaaaaaaaaaa.".repeat(75_000),
        "[".repeat(1_000_000),
        ":".repeat(1_000_000),
        "/a".repeat(500_000),
        "\u{1b}]".repeat(500_000),
        "\u{1b}[".repeat(500_000),
        "http://".repeat(150_000),
        "password=".repeat(110_000),
        "a-".repeat(500_000),
        "1.".repeat(500_000),
        "at x (y:1)\n".repeat(90_000),
        "C:\\a b".repeat(160_000),
        "é".repeat(500_000),
    ];
    for input in &adversarial {
        let out = text(input);
        assert_clean(&out, TEXT_CAP);
        // The unbounded scrub is linear too.
        let _ = scrub(input);
    }
}

#[test]
fn a_secret_straddling_the_scan_limit_does_not_leak() {
    // Frames that reduce to nothing push the secret to the scan limit while leaving the
    // output short enough that a leftover piece of it would show.
    let secret = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    let mut head = String::from("Traceback (most recent call last):\n");
    while head.len() < SCAN_LIMIT - 200 {
        head.push_str("  File \"/x.py\", line 1\n");
    }
    head.push_str("Error: boom ");
    for shift in 1..secret.len() {
        let mut input = head.clone();
        while input.len() < SCAN_LIMIT - shift {
            input.push(' ');
        }
        input.push_str(secret);
        input.push_str(" tail");
        let out = sanitize(&input, 4096);
        assert!(out.starts_with("Error: boom"), "{shift}: {out}");
        assert!(!out.contains("ghp_") && !out.contains("16C7"), "{shift}: {out}");
    }
}

#[test]
fn markers_and_fallback_are_fixed_points() {
    for marker in MARKERS {
        assert_eq!(big(marker), marker);
    }
    assert_eq!(
        big("password=[redacted] Bearer [redacted] [url] [path] [host]"),
        "password=[redacted] Bearer [redacted] [url] [path] [host]"
    );
}

#[test]
fn samples_settle_in_one_pass() {
    let samples = [
        "Traceback (most recent call last):\n  File \"/a.py\", line 1\nValueError: x at 10.0.0.1:80",
        "café password=hunter2\nnext /home/a/b",
        "\u{1b}[31mBearer abcdefghijkl\u{1b}[0m é/home/x/y é10.0.0.1",
        "line\n\tat com.x.Y(Y.java:1)\nmore",
    ];
    for s in samples {
        for cap in [16, 40, 80, 256] {
            let once = pass(s, cap);
            assert_eq!(pass(&once, cap), once, "{s:?} @ {cap}");
        }
    }
}

// --- quoting without redaction -----------------------------------------------------------

#[test]
fn quote_keeps_urls_and_escapes_what_is_not_printable() {
    assert_eq!(quote("nope://missing/thing", TEXT_CAP), "nope://missing/thing");
    assert_eq!(quote("https://10.0.0.1/a?token=x", TEXT_CAP), "https://10.0.0.1/a?token=x");
    assert_eq!(quote("file:///é\n\u{1b}[31m", TEXT_CAP), "file:///\\xc3\\xa9\\x0a\\x1b[31m");
}

#[test]
fn quote_caps_with_an_ellipsis_never_inside_an_escape() {
    let long = format!("demo://{}", "a".repeat(300));
    let out = quote(&long, TEXT_CAP);
    assert_eq!(out.len(), TEXT_CAP);
    assert!(out.starts_with("demo://aaa") && out.ends_with("a..."), "{out}");
    let wide = "é".repeat(100);
    let out = quote(&wide, 10);
    assert_eq!(out, "\\xc3...", "a cut escape is dropped whole");
    assert_eq!(quote("abcdef", 2), "..");
}
