//! One driven connection: its socket (plain TCP, or TLS on TCP), the exchange of a
//! request for the head of its answer, and the answer's body, read off the socket as it
//! is polled.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::uri::Authority;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::TcpStream;

use super::Pool;
use crate::call::{Cause, UpstreamError};
use crate::h1::{self, BodyDecoder, BodyLength, MAX_INTERIM, Step};
use crate::upstream::client::tls;
use crate::workers;

/// Room made in a connection's read buffer before each read.
const READ_ROOM: usize = 8 * 1024;
/// Most room made for a body piece of known length: a large answer (a list page) is
/// read in a few large reads, not in many of [`READ_ROOM`].
const MAX_READ_ROOM: usize = 1024 * 1024;

/// What a connection runs over.
pub(super) enum Io {
    /// An `http://` upstream's.
    Plain(TcpStream),
    /// An `https://` upstream's (boxed: the TLS state is large, the plain case is not).
    Tls(Box<tls::TlsStream>),
}

impl AsyncRead for Io {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Io::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Io::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(io) => Pin::new(io).poll_flush(cx),
            Io::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Io::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }
}

/// One HTTP/1.1 connection: its socket and what was read off it and not yet taken.
pub(super) struct Conn {
    io: Io,
    buf: BytesMut,
    /// The worker whose reactor its socket is registered with (see [`workers::home`]):
    /// it is reused only there.
    pub(super) home: usize,
}

/// Why an exchange failed, and whether the request may have reached the upstream.
pub(super) enum Failed {
    /// Not a byte of the request was written: it can go on another connection.
    Unsent(io::Error),
    /// The request was (possibly) sent.
    Sent(UpstreamError),
}

impl Conn {
    pub(super) fn new(io: Io) -> Conn {
        Conn { io, buf: BytesMut::with_capacity(READ_ROOM), home: workers::home() }
    }

    /// Whether it speaks TLS (it serves `https://` URIs only, and plain ones `http://`).
    pub(super) fn is_tls(&self) -> bool {
        matches!(self.io, Io::Tls(_))
    }

    /// Whether an idle connection can take a request: nothing arrived on it since its
    /// last answer, neither bytes nor the server's close (looked at without a wait).
    pub(super) fn usable(&mut self) -> bool {
        self.buf.is_empty()
            && match &mut self.io {
                Io::Plain(io) => matches!(io.try_read(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock),
                Io::Tls(io) => tls::quiet(io),
            }
    }

    /// Writes `request` and reads the head of its answer (past any 1xx answers).
    pub(super) async fn exchange(&mut self, request: &[u8]) -> Result<h1::Head, Failed> {
        let mut written = 0;
        while written < request.len() {
            match self.io.write(&request[written..]).await {
                Ok(0) => return Err(Failed::Sent(UpstreamError::Io("the connection closed while writing".into()))),
                Ok(n) => written += n,
                Err(e) if written == 0 => return Err(Failed::Unsent(e)),
                Err(e) => return Err(Failed::Sent(UpstreamError::Io(Cause::of(e)))),
            }
        }
        if let Io::Tls(io) = &mut self.io {
            // TLS may hold back a record the socket could not take at once.
            io.flush().await.map_err(|e| Failed::Sent(UpstreamError::Io(Cause::of(e))))?;
        }
        let mut interim = 0;
        loop {
            if !self.buf.is_empty() {
                match h1::parse_head(&mut self.buf) {
                    Ok(Some(head)) => {
                        if head.status == http::StatusCode::SWITCHING_PROTOCOLS {
                            return Err(Failed::Sent(UpstreamError::Protocol(
                                "an unasked protocol switch (101)".into(),
                            )));
                        }
                        if head.status.is_informational() {
                            interim += 1;
                            if interim > MAX_INTERIM {
                                let why = format!("more than {MAX_INTERIM} interim (1xx) answers");
                                return Err(Failed::Sent(UpstreamError::Protocol(why)));
                            }
                            continue;
                        }
                        return Ok(head);
                    }
                    Ok(None) => {}
                    Err(e) => return Err(Failed::Sent(UpstreamError::Protocol(e.to_string()))),
                }
            }
            self.buf.reserve(READ_ROOM);
            match self.io.read_buf(&mut self.buf).await {
                Ok(0) => return Err(Failed::Sent(UpstreamError::Io("the connection closed before an answer".into()))),
                Ok(_) => {}
                Err(e) => return Err(Failed::Sent(UpstreamError::Io(Cause::of(e)))),
            }
        }
    }
}

/// The body of an answer on a driven connection: reading it reads the connection, and
/// the connection goes back to its pool once the body has been read to its end.
pub(crate) struct DrivenBody {
    decoder: BodyDecoder,
    /// Whether the connection may carry another request after this answer.
    keep_alive: bool,
    /// `None` once given back or closed.
    conn: Option<Conn>,
    /// The pool it goes back to, and under which authority.
    return_to: Option<(Weak<Pool>, Authority)>,
}

impl DrivenBody {
    /// A body of `length` on `conn`, which goes back to `pool` under `authority` once
    /// it has been read, if `keep_alive` says the connection lives on.
    pub(super) fn new(
        length: BodyLength,
        keep_alive: bool,
        conn: Conn,
        pool: &Arc<Pool>,
        authority: &Authority,
    ) -> DrivenBody {
        DrivenBody {
            decoder: BodyDecoder::new(length),
            keep_alive,
            conn: Some(conn),
            return_to: Some((Arc::downgrade(pool), authority.clone())),
        }
    }

    /// The body was read to its end: the connection goes back to its pool if it can
    /// carry another request.
    fn finish(&mut self) {
        if let (Some(conn), Some((pool, authority))) = (self.conn.take(), self.return_to.take())
            && self.keep_alive
            && let Some(pool) = pool.upgrade()
        {
            pool.check_in(authority, conn);
        }
    }

    /// A failure closes the connection.
    fn fail(&mut self, e: io::Error) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        self.conn = None;
        Poll::Ready(Some(Err(e)))
    }
}

impl Drop for DrivenBody {
    fn drop(&mut self) {
        // An answer read to its end but never polled past it (an empty body, such as a
        // 202's): its connection can still carry another request.
        if self.conn.is_some() && self.decoder.is_done() {
            self.finish();
        }
    }
}

impl Body for DrivenBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let this = &mut *self;
        loop {
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            match this.decoder.decode(&mut conn.buf) {
                Ok(Step::Data(data)) => {
                    if this.decoder.is_done() {
                        this.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Ok(Step::End) => {
                    this.finish();
                    return Poll::Ready(None);
                }
                Ok(Step::More) => {}
                Err(e) => return this.fail(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            let room = this
                .decoder
                .expected()
                .map_or(READ_ROOM, |n| usize::try_from(n).unwrap_or(MAX_READ_ROOM).clamp(READ_ROOM, MAX_READ_ROOM));
            conn.buf.reserve(room);
            match tokio_util::io::poll_read_buf(Pin::new(&mut conn.io), cx, &mut conn.buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => match this.decoder.eof() {
                    Ok(_) => {
                        // Ended by the close: nothing to give back.
                        this.conn = None;
                        return Poll::Ready(None);
                    }
                    Err(e) => return this.fail(io::Error::new(io::ErrorKind::UnexpectedEof, e)),
                },
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return this.fail(e),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.decoder.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        self.decoder.remaining().map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}
