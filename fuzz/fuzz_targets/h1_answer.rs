//! Upstream answers as seawall's plain-HTTP client reads them: interim (1xx) answers, the
//! final head and its framing, then the body by its length, its chunks or the close of
//! the connection (the end of the input). Whatever the bytes, the reading does not
//! panic, is the same however the bytes are cut into reads, is what a prefix decided
//! once the prefix decides it, and an answer it read, written again with its length,
//! reads back the same.
//!
//! Input: a knob byte (where the prefix is cut), a chunking seed byte, the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall::h1_offline::{self, AnswerEnd};
use seawall_fuzz::{Input, chunk_sizes, split};

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let bytes = input.body;
    let whole = h1_offline::read_answer(&[bytes]);
    let pieces = split(bytes, &chunk_sizes(input.seed, bytes.len()));
    assert_eq!(h1_offline::read_answer(&pieces), whole, "the reads' boundaries changed what was read");

    let cut = bytes.len() * usize::from(input.knob) / 256;
    let prefix = h1_offline::read_answer(&[&bytes[..cut]]);
    match prefix.end {
        AnswerEnd::Refused => assert_eq!(prefix, whole, "a refusal of a prefix that more bytes undid"),
        // Ended by its length or its last chunk (not by the close the prefix's end
        // stands for): more bytes are only more bytes after it.
        AnswerEnd::Whole { rest } if prefix.answer.as_ref().is_some_and(|a| !a.until_close) => {
            assert_eq!(whole.answer, prefix.answer, "an answer read whole changed with more bytes");
            assert_eq!(whole.end, AnswerEnd::Whole { rest: rest + bytes.len() - cut });
        }
        _ => {}
    }

    if let (Some(answer), AnswerEnd::Whole { .. }) = (&whole.answer, whole.end) {
        let mut again =
            format!("HTTP/1.1 {} X\r\ncontent-length: {}\r\n\r\n", answer.status, answer.body.len()).into_bytes();
        again.extend_from_slice(&answer.body);
        let read = h1_offline::read_answer(&[&again]);
        let back = read.answer.as_ref().map(|a| (a.status, a.body.as_slice()));
        assert_eq!(back, Some((answer.status, answer.body.as_slice())), "written again, it read back otherwise");
        assert_eq!(read.end, AnswerEnd::Whole { rest: 0 });
    }
});
