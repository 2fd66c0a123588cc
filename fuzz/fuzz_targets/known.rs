//! Known results: an answer decoded through an upstream's known results is the answer a
//! plain decode reads, whatever envelope surrounds the result it repeats.
//!
//! The input is segments split at 0xFF bytes. The first is a JSON value, the result an
//! upstream sent before; each further segment is an answer in which every 0x01 byte
//! stands for that result, so that the fuzzer builds envelopes around it: the stand-in
//! numbers elsewhere, escapes, whitespace, duplicate members, the result nested or
//! inside a string. Each answer is decoded three ways and must come out the same: by
//! a plain decode, by finding the result in it directly (any size), and through an
//! upstream's known results (which remember only large results, so also with the result
//! padded past that size).
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall::jsonrpc::{self, KnownResults, known_around};
use serde_json::value::RawValue;

/// Where an answer segment holds the earlier result.
const MARK: char = '\u{1}';
/// Bytes that make a small result one the known results remember.
const PAD: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let mut segments = data.split(|b| *b == 0xFF).filter_map(|s| std::str::from_utf8(s).ok());
    let Some(Ok(result)) = segments.next().map(serde_json::from_str::<Box<RawValue>>) else {
        return;
    };
    let padded = format!("[{},\"{}\"]", result.get(), "p".repeat(PAD));
    let Ok(padded) = RawValue::from_string(padded) else {
        return;
    };
    let answers: Vec<&str> = segments.collect();
    for result in [&result, &padded] {
        let known = KnownResults::default();
        let first = format!(r#"{{"jsonrpc":"2.0","id":0,"result":{}}}"#, result.get());
        same(&first, known.decode(&first));
        for answer in &answers {
            let text = answer.replace(MARK, result.get());
            if let Some(found) = known_around(&text, result) {
                same(&text, Ok(found));
            }
            same(&text, known.decode(&text));
        }
    }
});

/// Asserts that `decoded` is what a plain decode of `text` gives.
fn same(text: &str, decoded: Result<jsonrpc::Message, jsonrpc::DecodeError>) {
    let plain = jsonrpc::decode(text);
    assert_eq!(format!("{decoded:?}"), format!("{plain:?}"), "decoded differently from a plain decode: {text}");
}
