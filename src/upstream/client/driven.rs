//! Plain-HTTP upstream connections driven by the call that uses them.
//!
//! For `http://` upstreams seawall keeps its own pool of HTTP/1.1 connections and speaks
//! HTTP/1.1 on them itself ([`super::h1`]): the call that checks a connection out writes
//! its request in one piece and reads the answer off the socket as it polls, so one task,
//! woken by its own socket, does the whole exchange (no connection task, no channel, no
//! wake-up across tasks). An idle connection is polled by nobody: it is looked at when it
//! is checked out (one the server closed, or that sent anything unasked, is dropped, and a
//! request that could not be written on it at all goes on another) and by a sweep that
//! closes those idle for longer than the pool keeps them.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::uri::Authority;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::call::{Cause, UpstreamError};
use crate::h1::{self, BodyDecoder, MAX_INTERIM, Step};
use crate::workers;

/// Idle connections kept per upstream; past it the longest idle is closed.
const MAX_IDLE: usize = 256;
/// How often idle connections are looked at, to close those past their time or closed
/// by the server.
const SWEEP: Duration = Duration::from_secs(15);
/// Room made in a connection's read buffer before each read.
const READ_ROOM: usize = 8 * 1024;
/// Most room made for a body piece of known length: a large answer (a list page) is
/// read in a few large reads, not in many of [`READ_ROOM`].
const MAX_READ_ROOM: usize = 1024 * 1024;

/// One upstream's idle plain-HTTP/1.1 connections, by the authority they reach.
pub(super) struct Pool {
    idle: Mutex<Vec<Idle>>,
    connect_timeout: Duration,
    idle_timeout: Duration,
    /// Whether the sweep task runs (it is started with the first connection, from a
    /// runtime).
    sweeping: AtomicBool,
}

struct Idle {
    authority: Authority,
    conn: Conn,
    since: Instant,
}

/// One HTTP/1.1 connection: its socket and what was read off it and not yet taken.
struct Conn {
    io: TcpStream,
    buf: BytesMut,
    /// The worker whose reactor its socket is registered with (see [`workers::home`]):
    /// it is reused only there.
    home: usize,
}

/// Why an exchange failed, and whether the request may have reached the upstream.
enum Failed {
    /// Not a byte of the request was written: it can go on another connection.
    Unsent(io::Error),
    /// The request was (possibly) sent.
    Sent(UpstreamError),
}

impl Conn {
    fn new(io: TcpStream) -> Conn {
        Conn { io, buf: BytesMut::with_capacity(READ_ROOM), home: workers::home() }
    }

    /// Whether an idle connection can take a request: nothing arrived on it since its
    /// last answer, neither bytes nor the server's close (looked at without a wait).
    fn usable(&self) -> bool {
        self.buf.is_empty()
            && matches!(self.io.try_read(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Writes `request` and reads the head of its answer (past any 1xx answers).
    async fn exchange(&mut self, request: &[u8]) -> Result<h1::Head, Failed> {
        let mut written = 0;
        while written < request.len() {
            match self.io.write(&request[written..]).await {
                Ok(0) => return Err(Failed::Sent(UpstreamError::Io("the connection closed while writing".into()))),
                Ok(n) => written += n,
                Err(e) if written == 0 => return Err(Failed::Unsent(e)),
                Err(e) => return Err(Failed::Sent(UpstreamError::Io(Cause::of(e)))),
            }
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

impl Pool {
    /// A pool whose connections are given `connect_timeout` to connect and closed after
    /// `idle_timeout` unused.
    pub(super) fn new(connect_timeout: Duration, idle_timeout: Duration) -> Arc<Pool> {
        Arc::new(Pool { idle: Mutex::new(Vec::new()), connect_timeout, idle_timeout, sweeping: AtomicBool::new(false) })
    }

    /// Sends a request to `uri` (an `http://` URI) on an idle connection, or a new one,
    /// and waits for the head of the answer. A request that could not be written at all
    /// on an idle connection (the server closed it) goes on another: it never left
    /// seawall.
    pub(super) async fn send(
        self: &Arc<Pool>,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        more: &[(HeaderName, HeaderValue)],
        body: &[u8],
    ) -> Result<Response<DrivenBody>, UpstreamError> {
        let authority = uri.authority().ok_or_else(|| UpstreamError::Connect("the URI names no host".into()))?;
        let target = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut request = Vec::new();
        h1::encode_request(&mut request, method, target, &host_header(authority), headers, more, body);
        loop {
            let (mut conn, reused) = match self.checkout(authority) {
                Some(conn) => (conn, true),
                None => (self.connect(authority).await?, false),
            };
            let head = match conn.exchange(&request).await {
                Ok(head) => head,
                Err(Failed::Unsent(_)) if reused => continue,
                Err(Failed::Unsent(e)) => return Err(UpstreamError::Io(Cause::of(e))),
                Err(Failed::Sent(e)) => return Err(e),
            };
            let framing = h1::framing(&head).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
            let body = DrivenBody {
                decoder: BodyDecoder::new(framing.body),
                keep_alive: framing.keep_alive,
                conn: Some(conn),
                return_to: Some((Arc::downgrade(self), authority.clone())),
            };
            let mut response = Response::new(body);
            *response.status_mut() = head.status;
            *response.version_mut() = head.version;
            *response.headers_mut() = head.headers;
            return Ok(response);
        }
    }

    /// The most recently used idle connection to `authority`, opened on this thread's
    /// worker, that is still usable; the unusable ones met on the way are closed.
    fn checkout(&self, authority: &Authority) -> Option<Conn> {
        let home = workers::home();
        let mut idle = self.idle.lock();
        let now = Instant::now();
        let mut i = idle.len();
        while i > 0 {
            i -= 1;
            // Authorities compare as written: the pool's own, not any equal one.
            if idle[i].authority.as_str() != authority.as_str() || idle[i].conn.home != home {
                continue;
            }
            let entry = idle.remove(i);
            if now.duration_since(entry.since) < self.idle_timeout && entry.conn.usable() {
                return Some(entry.conn);
            }
        }
        None
    }

    /// Puts a connection whose last answer was read to its end back, unless it closed.
    fn check_in(&self, authority: Authority, conn: Conn) {
        if !conn.usable() {
            return;
        }
        let mut idle = self.idle.lock();
        if idle.len() >= MAX_IDLE {
            idle.remove(0);
        }
        idle.push(Idle { authority, conn, since: Instant::now() });
    }

    /// A new connection to `authority` (port 80 when it names none), within the connect
    /// timeout across all its addresses.
    async fn connect(self: &Arc<Pool>, authority: &Authority) -> Result<Conn, UpstreamError> {
        self.start_sweeping();
        let host = authority.host();
        let port = authority.port_u16().unwrap_or(80);
        let stream = tokio::time::timeout(self.connect_timeout, open(host, port))
            .await
            .map_err(|_| {
                UpstreamError::Connect(format!("connecting timed out after {:?}", self.connect_timeout).into())
            })?
            .map_err(|e| UpstreamError::Connect(Cause::described(format!("tcp connect error: {e}"), e)))?;
        // Calls are small request/answer exchanges: never hold a segment back.
        let _ = stream.set_nodelay(true);
        Ok(Conn::new(stream))
    }

    /// Starts the task that closes stale idle connections, once, while the pool lives.
    fn start_sweeping(self: &Arc<Pool>) {
        if self.sweeping.swap(true, Ordering::Relaxed) {
            return;
        }
        let pool = Arc::downgrade(self);
        tokio::spawn(sweep(pool));
    }
}

/// Every [`SWEEP`], closes the idle connections past their time or closed by the
/// server; ends with the pool.
async fn sweep(pool: Weak<Pool>) {
    let mut ticks = tokio::time::interval(SWEEP);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(pool) = pool.upgrade() else {
            return;
        };
        let now = Instant::now();
        let timeout = pool.idle_timeout;
        let stale: Vec<Idle> = {
            let mut idle = pool.idle.lock();
            let (keep, stale) =
                std::mem::take(&mut *idle).into_iter().partition(|entry| now.duration_since(entry.since) < timeout);
            *idle = keep;
            idle.retain(|entry| entry.conn.usable());
            stale
        };
        // Closed outside the lock.
        drop(stale);
    }
}

/// A TCP connection to the first of `host`'s addresses that accepts one.
async fn open(host: &str, port: u16) -> io::Result<TcpStream> {
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let addresses: Vec<SocketAddr> = match literal.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((literal, port)).await?.collect(),
    };
    let mut last = None;
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the host has no address")))
}

/// The `Host` header for `authority`: its host and any port but the default, never its
/// user information.
fn host_header(authority: &Authority) -> std::borrow::Cow<'_, str> {
    // The usual authority is already the header, as written: seen from its text, as
    // parsing its port costs more than the rest of the request head.
    let text = authority.as_str();
    let port_text = text.rsplit_once(':').map(|(_, port)| port).filter(|port| !port.contains(']'));
    let default_port = port_text.is_some_and(|port| port.parse::<u16>() == Ok(80));
    if !default_port && !text.contains('@') {
        return text.into();
    }
    match authority.port_u16() {
        Some(port) if port != 80 => format!("{}:{port}", authority.host()).into(),
        _ => authority.host().into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_header_leaves_out_user_information_and_the_default_port() {
        let of = |s: &str| host_header(&s.parse::<Authority>().expect("authority")).into_owned();
        assert_eq!(of("user:secret@example.com"), "example.com");
        assert_eq!(of("example.com:80"), "example.com");
        assert_eq!(of("127.0.0.1:8080"), "127.0.0.1:8080");
        assert_eq!(of("[::1]:9000"), "[::1]:9000");
        assert_eq!(of("example.com"), "example.com");
        assert_eq!(of("user@[::1]:80"), "[::1]");
        assert_eq!(of("example.com:080"), "example.com");
        assert_eq!(of("[::1]"), "[::1]");
        assert_eq!(of("[::80]:8080"), "[::80]:8080");
    }

    async fn get(pool: &Arc<Pool>, uri: &Uri) {
        use http_body_util::BodyExt as _;
        let answer = pool.send(&Method::GET, uri, &HeaderMap::new(), &[], b"").await.unwrap();
        assert_eq!(answer.into_body().collect().await.unwrap().to_bytes(), "ok");
    }

    #[tokio::test]
    async fn a_connection_is_reused_only_on_the_worker_that_opened_it() {
        let ok: &'static [u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        let (uri, accepted) = scripted_server(Box::new(std::iter::repeat((ok, false)))).await;
        let pool = Pool::new(Duration::from_secs(5), Duration::from_secs(60));
        let workers = workers::Workers::start(1).unwrap();
        let on_worker = |pool: Arc<Pool>, uri: Uri| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            workers.spawn(async move {
                get(&pool, &uri).await;
                get(&pool, &uri).await;
                let _ = tx.send(());
            });
            rx
        };
        on_worker(Arc::clone(&pool), uri.clone()).await.unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "two calls on the worker, one connection");
        get(&pool, &uri).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "off the worker, the worker's connection is not taken");
        get(&pool, &uri).await;
        on_worker(Arc::clone(&pool), uri.clone()).await.unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "each side reuses its own");
    }

    /// The answers of a [`scripted_server`], and whether each closes its connection.
    type Script = Box<dyn Iterator<Item = (&'static [u8], bool)> + Send>;

    fn script(answers: Vec<(&'static [u8], bool)>) -> Script {
        Box::new(answers.into_iter())
    }

    /// A keep-alive server that answers the requests it is sent, in the order they come
    /// over all its connections, with `answers` (each written in pieces of 7 bytes, the
    /// connection closed after it when it says so); counts connections.
    async fn scripted_server(answers: Script) -> (Uri, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        let answers = Arc::new(Mutex::new(answers));
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let answers = Arc::clone(&answers);
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 1024];
                    while let Ok(n @ 1..) = socket.read(&mut buf).await {
                        seen.extend_from_slice(&buf[..n]);
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            let Some((answer, close)) = answers.lock().next() else { return };
                            for piece in answer.chunks(7) {
                                if socket.write_all(piece).await.is_err() {
                                    return;
                                }
                                tokio::task::yield_now().await;
                            }
                            if close {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (uri, accepted)
    }

    async fn body_of(pool: &Arc<Pool>, uri: &Uri) -> Result<Bytes, String> {
        use http_body_util::BodyExt as _;
        let answer = pool.send(&Method::GET, uri, &HeaderMap::new(), &[], b"").await.map_err(|e| e.to_string())?;
        answer.into_body().collect().await.map(|b| b.to_bytes()).map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn answers_of_every_framing_are_read_and_only_reusable_connections_reused() {
        let (uri, accepted) = scripted_server(script(vec![
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", false),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfghij", false),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nklm", false),
            (b"HTTP/1.1 200 OK\r\n\r\nuntil the close", true),
            (b"HTTP/1.1 204 No Content\r\n\r\n", false),
        ]))
        .await;
        let pool = Pool::new(Duration::from_secs(5), Duration::from_secs(60));
        assert_eq!(body_of(&pool, &uri).await.unwrap(), "abcde");
        assert_eq!(body_of(&pool, &uri).await.unwrap(), "fghij");
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "chunked and sized answers keep the connection");
        assert_eq!(body_of(&pool, &uri).await.unwrap(), "klm");
        assert_eq!(body_of(&pool, &uri).await.unwrap(), "until the close");
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "after `connection: close`, a new connection");
        assert_eq!(body_of(&pool, &uri).await.unwrap(), "");
        assert_eq!(accepted.load(Ordering::SeqCst), 3, "an answer ended by the close is not reused");
    }

    #[tokio::test]
    async fn a_large_answer_arrives_whole() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
        let page: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let sent = page.clone();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = socket.read(&mut buf).await;
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", sent.len());
            socket.write_all(head.as_bytes()).await.unwrap();
            socket.write_all(&sent).await.unwrap();
            let _ = socket.read(&mut buf).await;
        });
        let pool = Pool::new(Duration::from_secs(5), Duration::from_secs(60));
        assert_eq!(body_of(&pool, &uri).await.unwrap(), page);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_not_used() {
        let (uri, accepted) = scripted_server(script(vec![
            (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirst", true),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsecond", false),
        ]))
        .await;
        let pool = Pool::new(Duration::from_secs(5), Duration::from_secs(60));
        assert_eq!(body_of(&pool, &uri).await.unwrap(), "first");
        // The server's close reaches the idle connection.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(body_of(&pool, &uri).await.unwrap(), "second");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    /// Nine interim answers, one more than an exchange takes.
    const INTERIM_FLOOD: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n\
        HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n\
        HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n\
        HTTP/1.1 100 Continue\r\n\r\n";

    #[tokio::test]
    async fn an_answer_cut_short_or_garbled_is_an_error_and_its_connection_is_dropped() {
        let (uri, accepted) = scripted_server(script(vec![
            (b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\nonly this", true),
            (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", true),
            (INTERIM_FLOOD, false),
            (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", false),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", false),
        ]))
        .await;
        let pool = Pool::new(Duration::from_secs(5), Duration::from_secs(60));
        let cut = body_of(&pool, &uri).await.unwrap_err();
        assert!(cut.contains("closed before the end"), "{cut}");
        let garbled = body_of(&pool, &uri).await.unwrap_err();
        assert!(garbled.contains("invalid HTTP response head"), "{garbled}");
        let endless = body_of(&pool, &uri).await.unwrap_err();
        assert!(endless.contains("interim (1xx) answers"), "{endless}");
        let chunk = body_of(&pool, &uri).await.unwrap_err();
        assert!(chunk.contains("invalid chunked body"), "{chunk}");
        assert_eq!(body_of(&pool, &uri).await.unwrap(), "ok");
        assert_eq!(accepted.load(Ordering::SeqCst), 5, "no broken connection was reused");
    }
}
