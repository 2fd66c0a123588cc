//! Plain-HTTP upstream connections driven by the call that uses them.
//!
//! hyper's pooled client runs every connection as a task of its own: a call hands its
//! request to that task over a channel and is woken by it with the answer, each time a
//! wake-up across tasks and often across worker threads. For `http://` upstreams seawall
//! keeps its own pool of HTTP/1.1 connections instead: the call that checks one out polls
//! the connection itself while it sends its request and reads the answer, so one task,
//! woken by its own sockets, does the whole exchange. An idle connection is polled by
//! nobody: it is looked at when it is checked out (one the server closed meanwhile is
//! dropped, and a request it could not take is sent on another) and by a sweep that
//! closes those idle for longer than the pool keeps them.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::task::AtomicWaker;
use http::uri::{Authority, PathAndQuery};
use http::{HeaderValue, Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::TrySendError;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::net::TcpStream;

use super::chain;
use crate::call::UpstreamError;
use crate::workers;

/// Idle connections kept per upstream; past it the longest idle is closed.
const MAX_IDLE: usize = 256;
/// How often idle connections are looked at, to close those past their time or closed
/// by the server.
const SWEEP: Duration = Duration::from_secs(15);

/// One upstream's idle plain-HTTP/1.1 connections, by the authority they reach.
pub(super) struct Pool {
    idle: Mutex<Vec<Idle>>,
    connect_timeout: Duration,
    idle_timeout: Duration,
    /// Whether the sweep task runs (it is started with the first connection, from a
    /// runtime).
    sweeping: std::sync::atomic::AtomicBool,
}

struct Idle {
    authority: Authority,
    conn: Conn,
    since: Instant,
}

/// The state machine of one connection.
type Driver = Pin<Box<Connection<TokioIo<TcpStream>, String>>>;

/// One HTTP/1.1 connection: the handle requests are sent on and the state machine that
/// reads and writes the socket, polled by whoever holds it.
struct Conn {
    send: SendRequest<String>,
    /// The worker whose reactor its socket is registered with (see [`workers::home`]):
    /// it is reused only there.
    home: usize,
    /// `None` once the connection has ended.
    driver: Option<Driver>,
    /// What the connection and the answer's body wake (see [`Doorbell`]).
    bell: Arc<Doorbell>,
    waker: Waker,
}

/// The waker a connection and its answer's body are polled with. It tells apart the
/// wake-ups the call causes itself while it polls them — reading the body tells the
/// connection it wants more, the connection hands the body what it read — which are
/// answered by polling again at once, from those that come from outside (the socket
/// became ready), which wake the call's task. Without it each of the former would wake
/// the task once more, and with it, often, another worker thread.
struct Doorbell {
    state: AtomicU8,
    task: AtomicWaker,
}

/// The call is polling the connection.
const POLLING: u8 = 1;
/// The connection or the body rang while it did.
const RUNG: u8 = 2;
/// Rounds of polling within one poll of the call before it yields to its runtime.
const MAX_ROUNDS: usize = 32;

impl Wake for Doorbell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.fetch_or(RUNG, Ordering::AcqRel) & POLLING == 0 {
            self.task.wake();
        }
    }
}

impl Conn {
    fn new(send: SendRequest<String>, driver: Connection<TokioIo<TcpStream>, String>) -> Conn {
        let bell = Arc::new(Doorbell { state: AtomicU8::new(0), task: AtomicWaker::new() });
        let waker = Waker::from(bell.clone());
        Conn { send, home: workers::home(), driver: Some(Box::pin(driver)), bell, waker }
    }

    /// Polls `step` (which waits on something the connection produces), driving the
    /// connection before each try, until it is ready or nothing is left to do but wait
    /// for the socket.
    fn poll_driven<T>(&mut self, cx: &mut Context<'_>, mut step: impl FnMut(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
        let Conn { driver, bell, waker, .. } = self;
        bell.task.register(cx.waker());
        bell.state.store(POLLING, Ordering::Release);
        let mut inner = Context::from_waker(waker);
        for _ in 0..MAX_ROUNDS {
            drive(driver, &mut inner);
            if let Poll::Ready(value) = step(&mut inner) {
                bell.state.store(0, Ordering::Release);
                return Poll::Ready(value);
            }
            if bell.state.compare_exchange(POLLING, 0, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return Poll::Pending;
            }
            // It rang while being polled: there is more to do now.
            bell.state.store(POLLING, Ordering::Release);
        }
        bell.state.store(0, Ordering::Release);
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Whether an idle connection can take a request: still open (looked at without
    /// registering anyone to wake) and ready for one.
    fn usable(&mut self) -> bool {
        drive(&mut self.driver, &mut Context::from_waker(Waker::noop())) && self.send.is_ready()
    }

    /// Sends `request` and waits for the head of its answer, driving the connection.
    async fn send(&mut self, request: Request<String>) -> Result<Response<Incoming>, TrySendError<Request<String>>> {
        let mut answer = std::pin::pin!(self.send.try_send_request(request));
        std::future::poll_fn(|cx| self.poll_driven(cx, |inner| answer.as_mut().poll(inner))).await
    }
}

/// Lets the connection read and write what it can; whether it is still open.
fn drive(driver: &mut Option<Driver>, cx: &mut Context<'_>) -> bool {
    if let Some(connection) = driver
        && connection.as_mut().poll(cx).is_ready()
    {
        // Dropping it fails what it still held, so that nothing waits on it.
        *driver = None;
    }
    driver.is_some()
}

impl Pool {
    /// A pool whose connections are given `connect_timeout` to connect and closed after
    /// `idle_timeout` unused.
    pub(super) fn new(connect_timeout: Duration, idle_timeout: Duration) -> Arc<Pool> {
        Arc::new(Pool {
            idle: Mutex::new(Vec::new()),
            connect_timeout,
            idle_timeout,
            sweeping: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Sends `request` to `uri` (an `http://` URI) on an idle connection, or a new one,
    /// and waits for the head of the answer. A request an idle connection turns out not
    /// to take (the server closed it) goes on another: it never left seawall.
    pub(super) async fn send(
        self: &Arc<Pool>,
        uri: &Uri,
        mut request: Request<String>,
    ) -> Result<Response<DrivenBody>, UpstreamError> {
        let authority = uri.authority().ok_or_else(|| UpstreamError::Connect("the URI names no host".into()))?;
        *request.uri_mut() = origin_form(uri);
        if !request.headers().contains_key(http::header::HOST) {
            let host = HeaderValue::from_str(host_header(authority).as_ref())
                .map_err(|_| UpstreamError::Connect("the URI's host is not a valid Host header".into()))?;
            request.headers_mut().insert(http::header::HOST, host);
        }
        loop {
            let (mut conn, reused) = match self.checkout(authority) {
                Some(conn) => (conn, true),
                None => (self.connect(authority).await?, false),
            };
            match conn.send(request).await {
                Ok(response) => {
                    let (head, body) = response.into_parts();
                    let body = DrivenBody {
                        body,
                        conn: Some(conn),
                        return_to: Some((Arc::downgrade(self), authority.clone())),
                    };
                    return Ok(Response::from_parts(head, body));
                }
                Err(mut e) => match e.take_message() {
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(UpstreamError::Io(chain(e.error()))),
                },
            }
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
            if idle[i].authority != *authority || idle[i].conn.home != home {
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
    fn check_in(self: &Arc<Pool>, authority: Authority, mut conn: Conn) {
        // Idle, it wakes nobody (looking at it registers no one).
        conn.bell.task.take();
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
            .map_err(|_| UpstreamError::Connect(format!("connecting timed out after {:?}", self.connect_timeout)))?
            .map_err(|e| UpstreamError::Connect(format!("tcp connect error: {e}")))?;
        // Calls are small request/answer exchanges: never hold a segment back.
        let _ = stream.set_nodelay(true);
        let (send, driver) =
            http1::handshake(TokioIo::new(stream)).await.map_err(|e| UpstreamError::Connect(chain(&e)))?;
        Ok(Conn::new(send, driver))
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

/// A TCP connection to the first of `host`'s addresses that accepts one.
async fn open(host: &str, port: u16) -> std::io::Result<TcpStream> {
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
    Err(last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "the host has no address")))
}

/// `uri`'s path and query alone, as HTTP/1.1 sends them to an origin server.
fn origin_form(uri: &Uri) -> Uri {
    let path = uri.path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));
    Uri::from(path)
}

/// The `Host` header for `authority`: its host and any port but the default, never its
/// user information.
fn host_header(authority: &Authority) -> std::borrow::Cow<'_, str> {
    match authority.port_u16() {
        Some(port) if port != 80 => format!("{}:{port}", authority.host()).into(),
        _ => authority.host().into(),
    }
}

/// The body of an answer on a driven connection: reading it drives the connection, and
/// the connection goes back to its pool once the body has been read to its end.
pub(crate) struct DrivenBody {
    body: Incoming,
    /// `None` once given back.
    conn: Option<Conn>,
    /// The pool it goes back to, and under which authority.
    return_to: Option<(Weak<Pool>, Authority)>,
}

impl DrivenBody {
    fn finish(&mut self) {
        if let (Some(conn), Some((pool, authority))) = (self.conn.take(), self.return_to.take())
            && let Some(pool) = pool.upgrade()
        {
            pool.check_in(authority, conn);
        }
    }
}

impl Body for DrivenBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let body = &mut this.body;
        let polled = match &mut this.conn {
            Some(conn) => conn.poll_driven(cx, |inner| Pin::new(&mut *body).poll_frame(inner)),
            None => Pin::new(body).poll_frame(cx),
        };
        match &polled {
            Poll::Ready(None) => this.finish(),
            Poll::Ready(Some(Err(_))) => this.conn = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
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
    }

    /// A keep-alive HTTP/1.1 server answering `ok` to every request; counts connections.
    async fn counting_server() -> (Uri, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 1024];
                    while let Ok(n @ 1..) = socket.read(&mut buf).await {
                        seen.extend_from_slice(&buf[..n]);
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if socket.write_all(answer).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (uri, accepted)
    }

    async fn get(pool: &Arc<Pool>, uri: &Uri) {
        use http_body_util::BodyExt as _;
        let answer = pool.send(uri, Request::new(String::new())).await.unwrap();
        assert_eq!(answer.into_body().collect().await.unwrap().to_bytes(), "ok");
    }

    #[tokio::test]
    async fn a_connection_is_reused_only_on_the_worker_that_opened_it() {
        let (uri, accepted) = counting_server().await;
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

    #[test]
    fn origin_form_keeps_the_path_and_query() {
        let uri: Uri = "http://example.com:8080/mcp?x=1".parse().expect("uri");
        assert_eq!(origin_form(&uri), "/mcp?x=1");
        let bare: Uri = "http://example.com".parse().expect("uri");
        assert_eq!(origin_form(&bare), "/");
    }
}
