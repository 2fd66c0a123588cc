//! seawall's own HTTP/1.x server connection (the codec is [`crate::h1::server`]).
//!
//! A connection reads a request's head, hands the request to the app, and writes its
//! answer, one request after another (pipelined requests wait in the buffer). A body
//! that is already in the buffer (a usual JSON-RPC message arrives with its head) goes
//! to the app as it is; a longer or chunked one is read from the socket as the app
//! polls it, the socket lent to the body meanwhile (and `100 Continue` sent only then,
//! so a body the app refuses unread is never asked for). While the app works on a
//! request, the connection watches its client: once the client closes the connection,
//! the connection lets go of the request's future at once (the request itself runs to
//! its end on its own, see `run_to_end`), as it does while an answer streams.
//!
//! Answers are written with `Content-Length` when their length is known (the head and
//! the body in one write), chunked otherwise (each piece written as it comes: event
//! streams), or until the close for HTTP/1.0. The header-read timeout runs from the
//! connection's start for its first request and from the first byte of each later one:
//! a head that arrives in one read arms no timer.

use std::fmt::Write as _;
use std::future::{Future, poll_fn};
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::{Buf as _, BufMut, BytesMut};
use http::header::CONNECTION;
use http::{Method, StatusCode, Version};
use http_body::Body as HttpBody;
use tokio::io::{AsyncWrite as _, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt as _;

use super::connection::{Activity, App, Busy, PeerAddr};
use super::refusal::Refusal;
use super::trusted_proxies::ClientOf;
use crate::h1::server::{self, AnswerFraming, HeadError, RequestHead};
use crate::h1::{BodyDecoder, MAX_HEAD, Step};

/// Room made in the read buffer before a read.
const READ_ROOM: usize = 8 * 1024;
/// Most room made for a request body's next piece: a client's declared lengths reserve no
/// more than this per connection.
const MAX_READ_ROOM: usize = 64 * 1024;

/// A connection's socket and what was read from it but not used yet.
pub(super) struct Wire {
    io: TcpStream,
    buf: BytesMut,
}

impl Wire {
    /// `io`, with nothing read yet.
    pub(super) fn new(io: TcpStream) -> Wire {
        Wire { io, buf: BytesMut::with_capacity(READ_ROOM) }
    }

    /// What was read so far, and the socket.
    pub(super) fn into_parts(self) -> (BytesMut, TcpStream) {
        (self.buf, self.io)
    }

    /// What was read so far.
    pub(super) fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// Drops the first `n` bytes read (a PROXY protocol header), so that what follows is
    /// read as the start of the connection.
    pub(super) fn skip(&mut self, n: usize) {
        self.buf.advance(n.min(self.buf.len()));
    }

    /// Reads what the socket has into the buffer, with room for `want` more bytes.
    fn poll_fill(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<usize>> {
        let want = want.clamp(READ_ROOM, MAX_READ_ROOM);
        if self.buf.capacity() - self.buf.len() < want / 2 {
            self.buf.reserve(want);
        }
        tokio_util::io::poll_read_buf(std::pin::Pin::new(&mut self.io), cx, &mut self.buf)
    }

    /// Reads more, within the header-read timeout when one runs.
    pub(super) async fn fill(&mut self, deadline: Option<Instant>) -> io::Result<usize> {
        let read = poll_fn(|cx| self.poll_fill(cx, READ_ROOM));
        match deadline {
            Some(at) => match tokio::time::timeout_at(at.into(), read).await {
                Ok(read) => read,
                Err(_) => Err(io::ErrorKind::TimedOut.into()),
            },
            None => read.await,
        }
    }
}

/// Serves HTTP/1.x requests on `wire` (which may hold the start of the first) until the
/// connection closes, either side asks for the close, or `activity` says the listener
/// is closing. `deadline` bounds the wait for the first request's head. Each request
/// carries the address `client` gives it.
pub(super) async fn serve<A: App>(
    mut wire: Wire,
    mut app: A,
    client: ClientOf,
    header_timeout: Duration,
    deadline: Instant,
    activity: Arc<Activity>,
) {
    let mut deadline = Some(deadline);
    loop {
        let head = match read_head(&mut wire, deadline, header_timeout).await {
            Ok(Some(head)) => head,
            Ok(None) => return,
            Err(Some(refused)) => {
                let _ = refuse(&mut wire, refused).await;
                return;
            }
            Err(None) => return,
        };
        deadline = None;
        match exchange(wire, head, &mut app, &client, &activity).await {
            // The listener closing while the answer was on its way: no next request.
            Some(_) if activity.closing.load(Ordering::Acquire) => return,
            Some(next) => wire = next,
            None => return,
        }
    }
}

/// Reads the next request's head: `None` when the client closed the connection between
/// requests; `Err` with the refusal to answer, or without one when the head timed out or
/// the connection broke.
async fn read_head(
    wire: &mut Wire,
    mut deadline: Option<Instant>,
    timeout: Duration,
) -> Result<Option<RequestHead>, Option<HeadError>> {
    // How much of the buffer is known to hold no end of a head: a head sent a byte at a
    // time is parsed once it may be complete, not once per byte.
    let mut scanned = 0;
    loop {
        if !wire.buf.is_empty() {
            if server::worth_parsing(&wire.buf, scanned)
                && let Some(head) = server::parse_request(&mut wire.buf).map_err(Some)?
            {
                return Ok(Some(head));
            }
            scanned = wire.buf.len();
            deadline.get_or_insert_with(|| Instant::now() + timeout);
        }
        match wire.fill(deadline).await {
            Ok(0) if wire.buf.is_empty() => return Ok(None),
            Ok(0) | Err(_) => return Err(None),
            Ok(_) => {}
        }
    }
}

/// Answers a head that could not be read (a JSON-RPC error, as every refusal), and
/// closes: nothing after it on the connection is read.
async fn refuse(wire: &mut Wire, refused: HeadError) -> io::Result<()> {
    let refusal = Refusal::from(refused);
    tracing::debug!(
        target: "seawall::downstream",
        status = refusal.status().as_u16(),
        reason = %refusal.message(),
        "refused an HTTP/1.x request head"
    );
    wire.io.write_all(&refusal.http1_bytes()).await?;
    wire.io.shutdown().await
}

/// One request and its answer; the wire back when the connection may carry another.
async fn exchange<A: App>(
    wire: Wire,
    head: RequestHead,
    app: &mut A,
    client: &ClientOf,
    activity: &Arc<Activity>,
) -> Option<Wire> {
    let _busy = Busy::new(activity);
    let RequestHead { request, body, mut keep_alive, expects_continue } = head;
    let head_only = request.method() == Method::HEAD;
    let version = request.version();
    let decoder = BodyDecoder::new(body);
    let mut wire = Some(wire);
    let mut lent = None;
    let body = match (decoder.remaining(), wire.as_mut()) {
        (Some(0), _) => Body::empty(),
        (Some(n), Some(w)) if w.buf.len() as u64 >= n => {
            Body::from(w.buf.split_to(w.buf.len().min(n as usize)).freeze())
        }
        _ => {
            let slot = Arc::new(parking_lot::Mutex::new(None));
            lent = Some(Arc::clone(&slot));
            Body::new(WireBody { wire: wire.take(), decoder, continue_at: expects_continue.then_some(0), slot })
        }
    };
    let mut request = request.map(|()| body);
    let from = client.address(request.headers());
    request.extensions_mut().insert(PeerAddr(from));
    let Ok(service) = app.ready().await;
    let answering = service.call(request);
    let answer = match wire.as_mut() {
        Some(w) => watching(w, answering).await?,
        None => match answering.await {
            Ok(answer) => answer,
            Err(never) => match never {},
        },
    };
    let mut wire = match (wire, lent) {
        (Some(w), _) => w,
        // The body had the socket: back once the app let go of it.
        (None, Some(slot)) => {
            let returned: Option<(Wire, bool)> = slot.lock().take();
            let (w, whole) = returned?;
            keep_alive &= whole;
            w
        }
        (None, None) => return None,
    };
    let (parts, body) = answer.into_parts();
    keep_alive &=
        !crate::h1::has_token(&parts.headers, CONNECTION, "close") && !activity.closing.load(Ordering::Acquire);
    let status = parts.status;
    let framing = if head_only
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        AnswerFraming::Bodiless
    } else if let Some(n) = body.size_hint().exact() {
        AnswerFraming::Exact(n)
    } else if version == Version::HTTP_11 {
        AnswerFraming::Chunked
    } else {
        keep_alive = false;
        AnswerFraming::UntilClose
    };
    let mut out = BytesMut::with_capacity(512);
    server::encode_answer_head(&mut out, status, &parts.headers, framing, keep_alive, version == Version::HTTP_10);
    write_answer(&mut wire, out, body, framing).await.ok()?;
    keep_alive.then_some(wire)
}

/// Polls `answering` while watching the client: `None` if it closed the connection (the
/// future is then dropped; a request's work goes on by itself). What arrives meanwhile (a pipelined
/// request) waits in the buffer, up to a head's worth.
async fn watching<F, T>(wire: &mut Wire, answering: F) -> Option<T>
where
    F: Future<Output = Result<T, std::convert::Infallible>>,
{
    let mut answering = std::pin::pin!(answering);
    poll_fn(|cx| {
        if let Poll::Ready(Ok(answer)) = answering.as_mut().poll(cx) {
            return Poll::Ready(Some(answer));
        }
        watch(wire, cx).map(|()| None)
    })
    .await
}

/// Pending while the client keeps its side open; ready once it closed it or the
/// connection broke.
fn watch(wire: &mut Wire, cx: &mut Context<'_>) -> Poll<()> {
    while wire.buf.len() < MAX_HEAD {
        match wire.poll_fill(cx, READ_ROOM) {
            Poll::Ready(Ok(0) | Err(_)) => return Poll::Ready(()),
            Poll::Ready(Ok(_)) => {}
            Poll::Pending => return Poll::Pending,
        }
    }
    Poll::Pending
}

/// Writes an answer: `out` holds its head.
async fn write_answer(wire: &mut Wire, mut out: BytesMut, body: Body, framing: AnswerFraming) -> io::Result<()> {
    let mut body = std::pin::pin!(body);
    let closed = || io::Error::from(io::ErrorKind::ConnectionAborted);
    match framing {
        AnswerFraming::Bodiless => wire.io.write_all(&out).await,
        // The head and the body in one write, the body gathered first.
        // A body of one piece (the usual) goes out beside the head in one vectored write,
        // not copied; pieces after the first are gathered behind the head.
        AnswerFraming::Exact(length) => {
            let mut written = 0u64;
            let mut first: Option<bytes::Bytes> = None;
            while let Some(frame) = next_frame(wire, body.as_mut()).await? {
                written += frame.len() as u64;
                if written > length {
                    return Err(io::Error::other("an answer longer than it said"));
                }
                match first.take() {
                    None if out.len() + frame.len() > READ_ROOM => first = Some(frame),
                    Some(earlier) => {
                        out.put_slice(&earlier);
                        out.put_slice(&frame);
                    }
                    None => out.put_slice(&frame),
                }
            }
            if written != length {
                return Err(io::Error::other("an answer shorter than it said"));
            }
            match first {
                Some(body) => wire.io.write_all_buf(&mut out.chain(body)).await,
                None => wire.io.write_all(&out).await,
            }
        }
        // Each piece as it comes.
        AnswerFraming::Chunked | AnswerFraming::UntilClose => {
            let chunked = framing == AnswerFraming::Chunked;
            loop {
                let frame = next_frame(wire, body.as_mut()).await?;
                let ended = frame.is_none();
                match frame {
                    Some(data) if data.is_empty() => continue,
                    Some(data) => {
                        if chunked {
                            let _ = write!(out, "{:x}\r\n", data.len());
                            out.put_slice(&data);
                            out.put_slice(b"\r\n");
                        } else {
                            out.put_slice(&data);
                        }
                    }
                    None if chunked => out.put_slice(b"0\r\n\r\n"),
                    None => {}
                }
                wire.io.write_all(&out).await?;
                out.clear();
                if ended {
                    return if chunked { Ok(()) } else { Err(closed()) };
                }
            }
        }
    }
}

/// The answer body's next piece of data (`None` at its end), watching the client
/// meanwhile: an error once it is gone, or when the body fails.
async fn next_frame(wire: &mut Wire, mut body: std::pin::Pin<&mut Body>) -> io::Result<Option<bytes::Bytes>> {
    poll_fn(|cx| {
        loop {
            match body.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => return Poll::Ready(Ok(Some(data))),
                    // Trailers: HTTP/1.1 answers carry none.
                    Err(_) => continue,
                },
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(io::Error::other(e))),
                Poll::Ready(None) => return Poll::Ready(Ok(None)),
                Poll::Pending => {}
            }
            return watch(wire, cx).map(|()| Err(io::Error::from(io::ErrorKind::ConnectionAborted)));
        }
    })
    .await
}

/// A request body read from the socket as the app polls it. The socket comes back to
/// the connection through `slot` when the body ends or is dropped, with whether all of
/// it was read.
struct WireBody {
    wire: Option<Wire>,
    decoder: BodyDecoder,
    /// How much of `100 Continue` is written, while the client waits for it.
    continue_at: Option<usize>,
    slot: Arc<parking_lot::Mutex<Option<(Wire, bool)>>>,
}

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

impl WireBody {
    fn give_back(&mut self) {
        if let Some(wire) = self.wire.take() {
            *self.slot.lock() = Some((wire, self.decoder.is_done()));
        }
    }
}

impl Drop for WireBody {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl HttpBody for WireBody {
    type Data = bytes::Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, io::Error>>> {
        let this = self.get_mut();
        let Some(wire) = this.wire.as_mut() else { return Poll::Ready(None) };
        while let Some(at) = this.continue_at {
            match std::pin::Pin::new(&mut wire.io).poll_write(cx, &CONTINUE[at..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Some(Err(io::ErrorKind::WriteZero.into()))),
                Poll::Ready(Ok(n)) if at + n == CONTINUE.len() => this.continue_at = None,
                Poll::Ready(Ok(n)) => this.continue_at = Some(at + n),
                Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(e))),
                Poll::Pending => return Poll::Pending,
            }
        }
        loop {
            match this.decoder.decode(&mut wire.buf) {
                Ok(Step::Data(data)) => return Poll::Ready(Some(Ok(http_body::Frame::data(data)))),
                Ok(Step::End) => {
                    this.give_back();
                    return Poll::Ready(None);
                }
                Ok(Step::More) => {}
                Err(e) => return Poll::Ready(Some(Err(io::Error::new(io::ErrorKind::InvalidData, e)))),
            }
            let want = this.decoder.expected().map_or(READ_ROOM, |n| usize::try_from(n).unwrap_or(MAX_READ_ROOM));
            match wire.poll_fill(cx, want) {
                Poll::Ready(Ok(0)) => {
                    let ended = this.decoder.eof().map_err(|e| io::Error::new(io::ErrorKind::UnexpectedEof, e));
                    return Poll::Ready(ended.err().map(Err));
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(e))),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.decoder.is_done()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.decoder.remaining().map_or_else(http_body::SizeHint::default, http_body::SizeHint::with_exact)
    }
}
