//! Tokens recognisable by their shape: vendor prefixes, JWTs and long random blobs.

use super::bytes::{at, is_alnum, run_end, skip_escape, word_continues};
use super::markers::MARK_REDACTED;
use super::span::Span;

// --- tokens with a known prefix ---------------------------------------------------------

/// Vendor token shapes: a fixed prefix, then at least `min_tail` bytes of
/// `[A-Za-z0-9_-]`; `mixed` demands a digit or upper-case byte in the tail (so that
/// `sk-learn-some-long-name` stays).
const PREFIXES: &[(&[u8], usize, bool)] = &[
    // (prefix, min_tail, mixed)
    (b"sk-", 20, true),
    (b"sk_", 20, true),
    (b"rk_live_", 10, false),
    (b"rk_test_", 10, false),
    (b"whsec_", 20, false),
    (b"ghp_", 20, false),
    (b"gho_", 20, false),
    (b"ghs_", 20, false),
    (b"ghu_", 20, false),
    (b"ghr_", 20, false),
    (b"github_pat_", 20, false),
    (b"glpat-", 20, false),
    (b"xoxb-", 10, false),
    (b"xoxp-", 10, false),
    (b"xoxa-", 10, false),
    (b"xoxr-", 10, false),
    (b"xoxs-", 10, false),
    (b"xapp-", 10, false),
    (b"AIza", 30, false),
    (b"hf_", 30, false),
    (b"npm_", 30, false),
    (b"pypi-", 30, false),
];

fn is_token_byte(c: u8) -> bool {
    is_alnum(c) || c == b'_' || c == b'-'
}

/// Vendor tokens (`sk-…`, `ghp_…`, `xoxb-…`, `AKIA…`, …) and JWTs (`eyJ….….…`).
pub(super) fn prefixed_tokens(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        if !is_token_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = skip_escape(b, i);
        let end = run_end(b, i, is_token_byte);
        i = end;
        // The last digit or upper-case byte, so that each candidate's tail check is O(1).
        let last_mixed = (start..end).rev().find(|&k| b[k].is_ascii_digit() || b[k].is_ascii_uppercase());
        // A JWT's second and third parts follow this run; scanned at most once.
        let mut jwt_end: Option<Option<usize>> = None;
        for k in start..end {
            if k > start && is_alnum(b[k - 1]) {
                continue;
            }
            if let Some(token_end) = token_at(b, k, end, last_mixed, &mut jwt_end) {
                spans.push(Span { start: k, end: token_end, marker: MARK_REDACTED });
                i = i.max(token_end);
                break;
            }
        }
    }
}

/// The end of a token starting at `k`, inside a run of token bytes ending at `run_end`.
fn token_at(
    b: &[u8],
    k: usize,
    run_end: usize,
    last_mixed: Option<usize>,
    jwt_end: &mut Option<Option<usize>>,
) -> Option<usize> {
    let word = b.get(k..run_end)?;
    for &(prefix, min_tail, mixed) in PREFIXES {
        if word.starts_with(prefix)
            && word.len() - prefix.len() >= min_tail
            && (!mixed || last_mixed.is_some_and(|m| m >= k + prefix.len()))
        {
            return Some(run_end);
        }
    }
    if (word.starts_with(b"AKIA") || word.starts_with(b"ASIA"))
        && word.len() >= 20
        && word[4..20].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && !word_continues(b, k + 20)
    {
        return Some(k + 20);
    }
    if word.starts_with(b"eyJ") && word.len() >= 10 {
        return *jwt_end.get_or_insert_with(|| jwt_rest(b, run_end));
    }
    None
}

/// Given the end of a JWT's first part, the end of its third part (which may be empty).
fn jwt_rest(b: &[u8], first_end: usize) -> Option<usize> {
    if at(b, first_end) != b'.' {
        return None;
    }
    let second_end = run_end(b, first_end + 1, is_token_byte);
    if second_end - (first_end + 1) < 2 || at(b, second_end) != b'.' {
        return None;
    }
    Some(run_end(b, second_end + 1, is_token_byte))
}

// --- long key-like blobs ----------------------------------------------------------------

fn is_blob_byte(c: u8) -> bool {
    is_alnum(c) || matches!(c, b'+' | b'/' | b'_' | b'-')
}

/// Runs of 32 or more hex digits mixing letters and digits, or of base64 that looks random (all three character
/// classes, at least two digits, few separators, frequent class changes — which long
/// `camelCase`, `snake_case` and paths do not have).
pub(super) fn blobs(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        if !is_blob_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = skip_escape(b, i);
        let end = run_end(b, i, is_blob_byte);
        i = end;
        if end.saturating_sub(start) >= 32 && looks_like_key(&b[start..end]) {
            spans.push(Span { start, end: run_end(b, end, |c| c == b'='), marker: MARK_REDACTED });
        }
    }
}

pub(super) fn looks_like_key(run: &[u8]) -> bool {
    let class = |c: u8| match c {
        b'A'..=b'Z' => 0,
        b'a'..=b'z' => 1,
        b'0'..=b'9' => 2,
        _ => 3,
    };
    let mut counts = [0usize; 4];
    let mut changes = 0;
    for (n, &c) in run.iter().enumerate() {
        counts[class(c)] += 1;
        if n > 0 && class(run[n - 1]) != class(c) {
            changes += 1;
        }
    }
    let [upper, lower, digits, separators] = counts;
    if run.iter().all(u8::is_ascii_hexdigit) {
        // A digest or hex key, not a run of one letter or a long decimal number.
        return upper + lower >= 2 && digits >= 2 && changes * 8 >= run.len();
    }
    upper > 0 && lower > 0 && digits >= 2 && separators * 6 <= run.len() && changes * 4 >= run.len()
}
