//! Newline-delimited JSON, the framing of MCP's stdio transport, in both directions:
//! towards stdio upstreams (their stdin and stdout) and towards a client that runs
//! `seawall stdio` (seawall's own stdin and stdout).
//!
//! Lines are read without ever holding more than a limit, so a peer that never sends a
//! newline cannot grow memory; a message is written as exactly one line.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The outcome of reading one line.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line (without its terminator) is in the buffer.
    Text,
    /// The line exceeded the limit; it was read and discarded.
    TooLong,
    /// End of input (or a read error, which ends the input just the same).
    Eof,
}

/// Reads one `\n`-terminated line into `buf` (a trailing `\r` removed) without ever
/// holding more than `limit` bytes (the `\r` included). A last line without a terminator
/// counts as a line, and loses a trailing `\r` the same way.
pub async fn read_line_bounded(reader: &mut (impl AsyncBufRead + Unpin), buf: &mut Vec<u8>, limit: usize) -> Line {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(c) => c,
            Err(_) => return Line::Eof,
        };
        if chunk.is_empty() {
            return if too_long {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                strip_cr(buf);
                Line::Text
            };
        }
        let (part, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if !too_long {
            if buf.len() + part.len() > limit {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(part);
            }
        }
        let consumed = done.unwrap_or(chunk.len());
        reader.consume(consumed);
        if done.is_some() {
            strip_cr(buf);
            return if too_long { Line::TooLong } else { Line::Text };
        }
    }
}

/// Removes the `\r` of a `\r\n` terminator, or of a last line that ends the input.
fn strip_cr(buf: &mut Vec<u8>) {
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
}

/// Decodes a streamed HTTP body of newline-delimited JSON (as some modern-era servers
/// answer `subscriptions/listen`: `application/json`, one message per line, sent as they
/// come) into its lines, blank ones skipped. A line longer than `limit` bytes is skipped
/// whole, like [`read_line_bounded`] does; the stream ends with the body.
pub(crate) fn decode_stream<S>(body: S, limit: usize) -> impl futures::Stream<Item = String> + Send
where
    S: futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
{
    let reader = tokio::io::BufReader::new(tokio_util::io::StreamReader::new(Box::pin(body)));
    futures::stream::unfold((reader, Vec::new()), move |(mut reader, mut buf)| async move {
        loop {
            match read_line_bounded(&mut reader, &mut buf, limit).await {
                Line::Eof => return None,
                Line::TooLong => continue,
                Line::Text => {
                    let text = String::from_utf8_lossy(&buf);
                    if text.trim().is_empty() {
                        continue;
                    }
                    let line = text.into_owned();
                    return Some((line, (reader, buf)));
                }
            }
        }
    })
}

/// A JSON message as one line, terminator included. Messages keep `params` and `result`
/// as their sender wrote them, and a pretty-printed body carries line breaks; in valid
/// JSON those can only be whitespace between tokens (inside strings they are escaped),
/// so each becomes a space.
pub(crate) fn framed(message: &str) -> String {
    let mut line = if message.contains(['\n', '\r']) { message.replace(['\n', '\r'], " ") } else { message.to_owned() };
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use tokio::io::BufReader;

    use super::*;

    #[tokio::test]
    async fn a_streamed_body_decodes_into_its_lines_across_chunks() {
        use futures::StreamExt as _;
        let chunks = ["{\"a\":", "1}\n\n{\"b\"", ":2}\r\n", "0123456789abcdef0123\n", "{\"c\":3}"];
        let body = futures::stream::iter(chunks.map(|c| Ok(bytes::Bytes::from(c))));
        let lines: Vec<String> = decode_stream(body, 16).collect().await;
        assert_eq!(lines, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }

    #[tokio::test]
    async fn bounded_lines_skip_over_long_ones_and_keep_going() {
        let data: &[u8] = b"short\r\n0123456789abcdef\nnext\nlast";
        let mut reader = BufReader::with_capacity(4, data);
        let mut buf = Vec::new();
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Text);
        assert_eq!(buf, b"short");
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::TooLong);
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Text);
        assert_eq!(buf, b"next");
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Text);
        assert_eq!(buf, b"last");
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Eof);
    }

    #[tokio::test]
    async fn a_last_line_without_newline_loses_its_cr_too() {
        let data: &[u8] = b"a\r\nb\r";
        let mut reader = BufReader::with_capacity(1, data);
        let mut buf = Vec::new();
        for line in [&b"a"[..], b"b"] {
            assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Text);
            assert_eq!(buf, line);
        }
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Eof);
    }

    #[test]
    fn a_pretty_printed_message_becomes_one_line_with_the_same_json() {
        let pretty = "{\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": 1,\n  \"result\": {\"text\": \"a\\nb\"}\n}";
        let line = framed(pretty);
        assert_eq!(line.matches('\n').count(), 1);
        assert!(line.ends_with('\n'));
        let a: serde_json::Value = serde_json::from_str(pretty).unwrap();
        let b: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(a, b);
        assert_eq!(framed(r#"{"a":1}"#), "{\"a\":1}\n");
    }
}
