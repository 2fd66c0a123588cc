//! Upstream connections driven by the call that uses them.
//!
//! seawall keeps its own pool of HTTP/1.1 connections to HTTP upstreams, plain for
//! `http://` ones and TLS ([`super::tls`]) for `https://` ones, and speaks HTTP/1.1 on them
//! itself ([`crate::h1`]): the call that checks a connection out writes its request in one
//! piece and reads the answer off the socket as it polls, so one task, woken by its own
//! socket, does the whole exchange (no connection task, no channel, no wake-up across
//! tasks). An idle connection is polled by nobody: it is looked at when it is checked out
//! (one the server closed, or that sent anything unasked, is dropped, and a request that
//! could not be written on it at all goes on another) and by a sweep that closes those
//! idle for longer than the pool keeps them.

mod conn;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use http::uri::{Authority, Scheme};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, Uri};
use parking_lot::Mutex;
use tokio::net::TcpStream;

pub(crate) use self::conn::DrivenBody;
use self::conn::{Conn, Failed, Io};
use super::tls;
use crate::call::{Cause, UpstreamError};
use crate::h1;
use crate::workers;

/// How long a connection is silent before TCP keep-alive probes ask after its peer.
const KEEPALIVE: Duration = Duration::from_secs(30);
/// Idle connections kept per upstream; past it the longest idle is closed.
const MAX_IDLE: usize = 256;
/// How often idle connections are looked at, to close those past their time or closed
/// by the server.
const SWEEP: Duration = Duration::from_secs(15);

/// One upstream's idle connections, by the scheme and authority they reach.
pub(super) struct Pool {
    idle: Mutex<Vec<Idle>>,
    connect_timeout: Duration,
    idle_timeout: Duration,
    /// The TLS settings of `https://` connections.
    tls: tls::Connector,
    /// Whether the sweep task runs (it is started with the first connection, from a
    /// runtime).
    sweeping: AtomicBool,
}

struct Idle {
    authority: Authority,
    conn: Conn,
    since: Instant,
}

impl Pool {
    /// A pool whose connections are given `connect_timeout` to connect (and for TLS,
    /// to finish the handshake) and closed after `idle_timeout` unused.
    pub(super) fn new(connect_timeout: Duration, idle_timeout: Duration, tls: tls::Connector) -> Arc<Pool> {
        let idle = Mutex::new(Vec::new());
        Arc::new(Pool { idle, connect_timeout, idle_timeout, tls, sweeping: AtomicBool::new(false) })
    }

    /// Sends a request to `uri` (an `http://` or `https://` URI) on an idle connection,
    /// or a new one, and waits for the head of the answer. A request that could not be written at all
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
        let tls = match uri.scheme() {
            Some(scheme) if *scheme == Scheme::HTTP => false,
            Some(scheme) if *scheme == Scheme::HTTPS => true,
            _ => return Err(UpstreamError::Connect("the URI's scheme is neither http nor https".into())),
        };
        let target = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut request = Vec::new();
        let host = host_header(authority, default_port(tls));
        h1::encode_request(&mut request, method, target, &host, headers, more, body);
        loop {
            let (mut conn, reused) = match self.checkout(tls, authority) {
                Some(conn) => (conn, true),
                None => (self.connect(tls, authority).await?, false),
            };
            let head = match conn.exchange(&request).await {
                Ok(head) => head,
                Err(Failed::Unsent(_)) if reused => continue,
                Err(Failed::Unsent(e)) => return Err(UpstreamError::Io(Cause::of(e))),
                Err(Failed::Sent(e)) => return Err(e),
            };
            let framing = h1::framing(&head).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
            let mut response = Response::new(DrivenBody::new(framing.body, framing.keep_alive, conn, self, authority));
            *response.status_mut() = head.status;
            *response.version_mut() = head.version;
            *response.headers_mut() = head.headers;
            return Ok(response);
        }
    }

    /// The most recently used idle connection to `authority` (over TLS or not, as
    /// `tls` says), opened on this thread's worker, that is still usable; the unusable
    /// ones met on the way are closed.
    fn checkout(&self, tls: bool, authority: &Authority) -> Option<Conn> {
        let home = workers::home();
        let mut idle = self.idle.lock();
        let now = Instant::now();
        let mut i = idle.len();
        while i > 0 {
            i -= 1;
            // Authorities compare as written: the pool's own, not any equal one.
            let entry = &idle[i];
            if entry.authority.as_str() != authority.as_str() || entry.conn.home != home || entry.conn.is_tls() != tls {
                continue;
            }
            let mut entry = idle.remove(i);
            if now.duration_since(entry.since) < self.idle_timeout && entry.conn.usable() {
                return Some(entry.conn);
            }
        }
        None
    }

    /// Puts a connection whose last answer was read to its end back, unless it closed.
    fn check_in(&self, authority: Authority, mut conn: Conn) {
        if !conn.usable() {
            return;
        }
        let mut idle = self.idle.lock();
        if idle.len() >= MAX_IDLE {
            idle.remove(0);
        }
        idle.push(Idle { authority, conn, since: Instant::now() });
    }

    /// A new connection to `authority` (on the scheme's default port when it names
    /// none), TLS when `tls` says so, within the connect timeout across all its
    /// addresses and the handshake.
    async fn connect(self: &Arc<Pool>, tls: bool, authority: &Authority) -> Result<Conn, UpstreamError> {
        self.start_sweeping();
        // A name, or an address without the brackets of an IPv6 literal.
        let host = authority.host();
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let port = authority.port_u16().unwrap_or(default_port(tls));
        let opening = async {
            let stream = open(host, port)
                .await
                .map_err(|e| UpstreamError::Connect(Cause::described(format!("tcp connect error: {e}"), e)))?;
            // Calls are small request/answer exchanges: never hold a segment back.
            let _ = stream.set_nodelay(true);
            // An event stream may stay quiet for as long as its session lives: probes
            // notice a peer that vanished without closing the connection.
            let probes = socket2::TcpKeepalive::new().with_time(KEEPALIVE);
            let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&probes);
            if !tls {
                return Ok(Io::Plain(stream));
            }
            Ok(Io::Tls(Box::new(self.tls.handshake(host, stream).await?)))
        };
        let io = tokio::time::timeout(self.connect_timeout, opening).await.map_err(|_| {
            UpstreamError::Connect(format!("connecting timed out after {:?}", self.connect_timeout).into())
        })??;
        Ok(Conn::new(io))
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
            idle.retain_mut(|entry| entry.conn.usable());
            stale
        };
        // Closed outside the lock.
        drop(stale);
    }
}

/// A TCP connection to the first of `host`'s addresses (`host` a name or an address)
/// that accepts one.
async fn open(host: &str, port: u16) -> io::Result<TcpStream> {
    let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port)).await?.collect(),
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

/// The port of a scheme's URIs that name none: 443 for TLS, 80 for plain HTTP.
fn default_port(tls: bool) -> u16 {
    if tls { 443 } else { 80 }
}

/// The `Host` header for `authority`: its host and any port but the scheme's
/// `default`, never its user information.
fn host_header(authority: &Authority, default: u16) -> std::borrow::Cow<'_, str> {
    // The usual authority is already the header, as written: seen from its text, as
    // parsing its port costs more than the rest of the request head.
    let text = authority.as_str();
    let port_text = text.rsplit_once(':').map(|(_, port)| port).filter(|port| !port.contains(']'));
    let default_port = port_text.is_some_and(|port| port.parse::<u16>() == Ok(default));
    if !default_port && !text.contains('@') {
        return text.into();
    }
    match authority.port_u16() {
        Some(port) if port != default => format!("{}:{port}", authority.host()).into(),
        _ => authority.host().into(),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn host_header_leaves_out_user_information_and_the_default_port() {
        let of = |s: &str| host_header(&s.parse::<Authority>().expect("authority"), 80).into_owned();
        assert_eq!(of("user:secret@example.com"), "example.com");
        assert_eq!(of("example.com:80"), "example.com");
        assert_eq!(of("127.0.0.1:8080"), "127.0.0.1:8080");
        assert_eq!(of("[::1]:9000"), "[::1]:9000");
        assert_eq!(of("example.com"), "example.com");
        assert_eq!(of("user@[::1]:80"), "[::1]");
        assert_eq!(of("example.com:080"), "example.com");
        assert_eq!(of("[::1]"), "[::1]");
        assert_eq!(of("[::80]:8080"), "[::80]:8080");
        let tls = |s: &str| host_header(&s.parse::<Authority>().expect("authority"), 443).into_owned();
        assert_eq!(tls("example.com:443"), "example.com");
        assert_eq!(tls("example.com:80"), "example.com:80");
    }

    /// A pool with the usual timeouts.
    fn pool() -> Arc<Pool> {
        Pool::new(Duration::from_secs(5), Duration::from_secs(60), tls::Connector::new().unwrap())
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
        let pool = pool();
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
        let pool = pool();
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
        let pool = pool();
        assert_eq!(body_of(&pool, &uri).await.unwrap(), page);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_not_used() {
        let (uri, accepted) = scripted_server(script(vec![
            (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirst", true),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsecond", false),
        ]))
        .await;
        let pool = pool();
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
        let pool = pool();
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
