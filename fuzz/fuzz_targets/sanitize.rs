//! Sanitiser: for any text and cap, the output is printable ASCII, within the cap and a
//! fixed point; the unbounded scrub never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall::sanitize::{self, IDENT_CAP, TEXT_CAP};

fn check(out: &str, cap: usize, input: &str) {
    assert!(out.len() <= cap, "{} > {cap} for {input:?}", out.len());
    assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)), "unprintable {out:?} for {input:?}");
    assert_eq!(sanitize::sanitize(out, cap), out, "not idempotent for {input:?}");
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let cap = usize::from(first);
    let text = String::from_utf8_lossy(rest);
    check(&sanitize::sanitize(&text, cap), cap, &text);
    check(&sanitize::ident(&text), IDENT_CAP, &text);
    check(&sanitize::text(&text), TEXT_CAP, &text);
    let _ = sanitize::scrub(&text);
});
