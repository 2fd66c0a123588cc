//! The stdio line reader (`ndjson::read_line_bounded`, which reads stdio upstreams' stdout
//! and `seawall stdio`'s stdin): for any byte stream in any chunking it returns the
//! stream's lines in order (a trailing `\r` removed, a last line without `\n` included),
//! each line longer than the limit as `TooLong` and then the next line, and never holds
//! more than the limit.
//!
//! Input: a knob byte (limit = 4 × knob bytes), a chunking seed byte, the stream.
#![no_main]

use std::pin::Pin;
use std::task::{Context, Poll};

use libfuzzer_sys::fuzz_target;
use seawall::ndjson::{Line, read_line_bounded};
use seawall_fuzz::{Input, chunk_sizes};
use tokio::io::{AsyncBufRead, AsyncRead, BufReader, ReadBuf};

#[derive(Debug, PartialEq, Eq)]
enum Read {
    Text(Vec<u8>),
    TooLong,
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let limit = 4 * usize::from(input.knob);
    let expected = lines(input.body, limit);
    let sizes = chunk_sizes(input.seed, input.body.len());

    // As a buffered reader that hands out the chunks as they come (and is not ready
    // before every third chunk) ...
    let mut direct = Chunks::new(input.body, &sizes);
    assert_eq!(read_all(&mut direct, limit), expected, "direct chunks, limit {limit}");
    // ... and as production reads a pipe: tokio's BufReader, with a small buffer, over it.
    let capacity = 1 + usize::from(input.seed >> 3);
    let mut buffered = BufReader::with_capacity(capacity, Chunks::new(input.body, &sizes));
    assert_eq!(read_all(&mut buffered, limit), expected, "BufReader of {capacity}, limit {limit}");
});

/// What the reader must return: every `\n`-separated line, in order.
fn lines(body: &[u8], limit: usize) -> Vec<Read> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (line, tail) = match rest.iter().position(|b| *b == b'\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &[][..]),
        };
        out.push(if line.len() > limit {
            Read::TooLong
        } else {
            Read::Text(line.strip_suffix(b"\r").unwrap_or(line).to_vec())
        });
        rest = tail;
    }
    out
}

fn read_all(reader: &mut (impl AsyncBufRead + Unpin), limit: usize) -> Vec<Read> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    futures::executor::block_on(async {
        loop {
            let line = read_line_bounded(reader, &mut buf, limit).await;
            assert!(buf.len() <= limit, "holds {} bytes over a limit of {limit}", buf.len());
            assert!(buf.capacity() <= (2 * limit).max(8), "capacity {} for a limit of {limit}", buf.capacity());
            match line {
                Line::Eof => return,
                Line::TooLong => out.push(Read::TooLong),
                Line::Text => out.push(Read::Text(buf.clone())),
            }
        }
    });
    out
}

/// A reader that returns the body in the given chunks.
struct Chunks<'a> {
    body: &'a [u8],
    sizes: std::slice::Iter<'a, usize>,
    /// The current chunk is `body[pos..end]`.
    pos: usize,
    end: usize,
    polls: usize,
}

impl<'a> Chunks<'a> {
    fn new(body: &'a [u8], sizes: &'a [usize]) -> Self {
        Chunks { body, sizes: sizes.iter(), pos: 0, end: 0, polls: 0 }
    }

    /// The rest of the current chunk, a new one when it is used up; `None` when it is
    /// not ready yet.
    fn chunk(&mut self, cx: &mut Context<'_>) -> Option<&'a [u8]> {
        if self.pos == self.end {
            self.polls += 1;
            if self.polls.is_multiple_of(3) {
                cx.waker().wake_by_ref();
                return None;
            }
            let size = self.sizes.next().copied().unwrap_or(0);
            self.end = (self.pos + size).min(self.body.len());
        }
        Some(&self.body[self.pos..self.end])
    }
}

impl AsyncRead for Chunks<'_> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let Some(chunk) = self.chunk(cx) else {
            return Poll::Pending;
        };
        let n = chunk.len().min(out.remaining());
        out.put_slice(&chunk[..n]);
        self.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncBufRead for Chunks<'_> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<&[u8]>> {
        let this = self.get_mut();
        match this.chunk(cx) {
            Some(chunk) => Poll::Ready(Ok(chunk)),
            None => Poll::Pending,
        }
    }

    fn consume(mut self: Pin<&mut Self>, amount: usize) {
        assert!(self.pos + amount <= self.end, "consumed more than was handed out");
        self.pos += amount;
    }
}
