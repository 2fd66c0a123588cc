//! HTTP/1.x requests as seawall's server codec reads them off a client connection:
//! request heads, then bodies by their length or their chunks, request after request.
//! Whatever the bytes, the codec does not panic, reads the same requests and ends the
//! same way however the bytes are cut into reads, reads nothing after a refusal, and a
//! request it read, written again plainly, reads back the same.
//!
//! Input: a knob byte (odd: the bytes are a chunked body alone, for the body decoder;
//! even: a connection's bytes), a chunking seed byte, the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall::h1_offline::{self, ChunkedBody, End, Reading, Request};
use seawall_fuzz::{Input, chunk_sizes, split};

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let pieces = split(input.body, &chunk_sizes(input.seed, input.body.len()));
    if input.knob & 1 == 1 {
        chunked_body(input.body, &pieces);
    } else {
        connection(input.body, &pieces, input.seed);
    }
});

fn connection(bytes: &[u8], pieces: &[&[u8]], seed: u8) {
    let whole = h1_offline::read_connection(&[bytes]);
    assert_eq!(h1_offline::read_connection(pieces), whole, "the reads' boundaries changed what was read");
    // What a prefix of the bytes reads is the start of what all of them read.
    let cut = bytes.len() * usize::from(seed) / 256;
    let prefix = h1_offline::read_connection(&[&bytes[..cut]]);
    assert!(
        whole.requests.starts_with(&prefix.requests),
        "a prefix read other requests: {prefix:?} against {whole:?}"
    );
    if let End::Refused(_) | End::BadBody = prefix.end {
        assert_eq!(prefix.end, whole.end, "a refusal of a prefix that more bytes undid");
        assert_eq!(prefix.requests, whole.requests, "requests read after a refusal");
    }
    for request in &whole.requests {
        assert_eq!(read_again(request), *request, "a request written plainly reads back otherwise");
    }
}

/// `request` written as a plain HTTP/1.1 request (its length declared, unless it has no
/// body) and read back.
fn read_again(request: &Request) -> Request {
    let mut wire = format!("{} {} HTTP/1.1\r\nhost: h\r\n", request.method, request.target).into_bytes();
    if !request.body.is_empty() {
        wire.extend_from_slice(format!("content-length: {}\r\n", request.body.len()).as_bytes());
    }
    wire.extend_from_slice(b"\r\n");
    wire.extend_from_slice(&request.body);
    let Reading { mut requests, end } = h1_offline::read_connection(&[&wire]);
    assert_eq!((requests.len(), end), (1, End::Idle), "{:?}", String::from_utf8_lossy(&wire));
    let mut again = requests.remove(0);
    again.http10 = request.http10;
    again
}

fn chunked_body(bytes: &[u8], pieces: &[&[u8]]) {
    let whole = h1_offline::read_chunked(&[bytes]);
    assert_eq!(h1_offline::read_chunked(pieces), whole, "the reads' boundaries changed the body");
    if let ChunkedBody::Whole { body, rest } = &whole {
        assert!(*rest <= bytes.len(), "more left than given");
        // The body's own bytes and the chunk framing fit in what was taken.
        assert!(body.len() + 5 <= bytes.len() - rest, "a body larger than its chunks");
        let mut plain = format!("{:x}\r\n", body.len()).into_bytes();
        plain.extend_from_slice(body);
        plain.extend_from_slice(b"\r\n0\r\n\r\n");
        let plain = if body.is_empty() { b"0\r\n\r\n".to_vec() } else { plain };
        assert_eq!(
            h1_offline::read_chunked(&[&plain]),
            ChunkedBody::Whole { body: body.clone(), rest: 0 },
            "the body in one chunk reads back otherwise"
        );
    }
}
