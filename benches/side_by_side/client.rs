//! The load generator's client: HTTP/1.1 written by hand over one keep-alive TCP
//! connection (no pool, no extra task), holding one MCP session opened the way MCP
//! clients of the session era open it (`initialize`, then `notifications/initialized`;
//! `Mcp-Session-Id` and `MCP-Protocol-Version` on every later request). Every answer is
//! checked: HTTP status, the JSON-RPC id sent, and a well-formed result.

use std::borrow::Cow;
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The protocol version the client asks for.
pub const VERSION: &str = "2025-11-25";

/// Where requests go: an address and a path (`/mcp`, `/mcp/echo`).
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub path: String,
}

impl Endpoint {
    /// From `http://IP:PORT/path`.
    pub fn parse(url: &str) -> Endpoint {
        let rest = url.strip_prefix("http://").unwrap_or(url);
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        Endpoint { addr: host.parse().unwrap_or_else(|e| panic!("{url}: {e}")), path: format!("/{path}") }
    }

    /// The same server at another path.
    pub fn at(&self, path: &str) -> Endpoint {
        Endpoint { addr: self.addr, path: path.to_owned() }
    }
}

/// A wrong answer (or none).
#[derive(Debug, Clone)]
pub enum Wrong {
    Io(String),
    Http(String),
    Status(u16),
    Json(String),
    Id { sent: u64, got: Option<u64> },
    Result(String),
}

impl fmt::Display for Wrong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wrong::Io(e) => write!(f, "connection: {e}"),
            Wrong::Http(e) => write!(f, "HTTP: {e}"),
            Wrong::Status(s) => write!(f, "HTTP status {s}"),
            Wrong::Json(e) => write!(f, "not a JSON-RPC answer: {e}"),
            Wrong::Id { sent, got } => write!(f, "id {sent} sent, {got:?} answered"),
            Wrong::Result(e) => write!(f, "wrong result: {e}"),
        }
    }
}

/// One HTTP answer.
pub struct Answer {
    pub status: u16,
    pub session: Option<String>,
    /// The JSON-RPC message: the body, or the SSE event that answers.
    pub body: Vec<u8>,
}

/// One keep-alive connection with (after [`Conn::open_session`]) one MCP session.
pub struct Conn {
    stream: TcpStream,
    endpoint: Endpoint,
    host: String,
    session: Option<String>,
    version: String,
    read: Vec<u8>,
    write: Vec<u8>,
}

impl Conn {
    pub async fn connect(endpoint: &Endpoint) -> Result<Conn, Wrong> {
        let stream = TcpStream::connect(endpoint.addr).await.map_err(|e| Wrong::Io(e.to_string()))?;
        stream.set_nodelay(true).map_err(|e| Wrong::Io(e.to_string()))?;
        Ok(Conn {
            stream,
            host: endpoint.addr.to_string(),
            endpoint: endpoint.clone(),
            session: None,
            version: VERSION.to_owned(),
            read: Vec::with_capacity(16 * 1024),
            write: Vec::with_capacity(1024),
        })
    }

    /// A connection with a session open on it.
    pub async fn with_session(endpoint: &Endpoint) -> Result<Conn, Wrong> {
        let mut conn = Conn::connect(endpoint).await?;
        conn.open_session(0).await?;
        Ok(conn)
    }

    /// `initialize` (with id `id`) and `notifications/initialized`; later requests
    /// carry the session. Replaces a session already open on this connection.
    pub async fn open_session(&mut self, id: u64) -> Result<(), Wrong> {
        self.session = None;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{VERSION}","capabilities":{{}},"clientInfo":{{"name":"seawall-bench","version":"1"}}}}}}"#
        );
        let answer = self.post(body.as_bytes()).await?;
        if answer.status != 200 {
            return Err(Wrong::Status(answer.status));
        }
        let session = answer.session.ok_or_else(|| Wrong::Http("initialize answered no Mcp-Session-Id".into()))?;
        let init: Envelope<InitResult> = parse(&answer.body)?;
        let result = init.checked(id)?;
        self.version = result.protocol_version.into_owned();
        self.session = Some(session);
        let note = self.post(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await?;
        if note.status != 202 {
            return Err(Wrong::Status(note.status));
        }
        Ok(())
    }

    /// Ends the session with a `DELETE`, as a client that is done with it does, so that
    /// a run's sessions do not stay open against the gateway's per-peer cap
    /// (`session.max_sessions_per_peer`) until they idle out. Without a session, nothing.
    pub async fn end_session(&mut self) -> Result<(), Wrong> {
        use std::fmt::Write as _;
        let Some(session) = self.session.take() else { return Ok(()) };
        let mut head = String::with_capacity(256);
        let _ = write!(
            head,
            "DELETE {} HTTP/1.1\r\nHost: {}\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: {}\r\nContent-Length: 0\r\n\r\n",
            self.endpoint.path, self.host, self.version
        );
        self.stream.write_all(head.as_bytes()).await.map_err(|e| Wrong::Io(e.to_string()))?;
        match self.read_answer().await?.status {
            200 | 202 | 204 => Ok(()),
            status => Err(Wrong::Status(status)),
        }
    }

    /// `tools/call` of `tool` with `{"message": "bench-<id>"}`: checks that the answer has
    /// the same id and echoes that message.
    pub async fn call_echo(&mut self, id: u64, tool: &str) -> Result<(), Wrong> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"message":"bench-{id}"}}}}}}"#
        );
        let answer = self.post(body.as_bytes()).await?;
        if answer.status != 200 {
            return Err(Wrong::Status(answer.status));
        }
        let reply: Envelope<CallResult> = parse(&answer.body)?;
        let result = reply.checked(id)?;
        let text = match result.content.as_slice() {
            [Content { kind, text: Some(text) }] if kind == "text" => text,
            _ => return Err(Wrong::Result("not one text content".into())),
        };
        if result.is_error {
            return Err(Wrong::Result(format!("isError: {text}")));
        }
        if text.strip_prefix("bench-").and_then(|n| n.parse::<u64>().ok()) != Some(id) {
            return Err(Wrong::Result(format!("echoed {text:?} for id {id}")));
        }
        Ok(())
    }

    /// `tools/list`: checks the id and that it lists `expected` tools, each named
    /// `<prefix>…` for one of `prefixes`, without a further page.
    /// `tools/list`, checked: the time the check of the answer took (reading it).
    pub async fn list_tools(
        &mut self,
        id: u64,
        expected: usize,
        prefixes: &[String],
    ) -> Result<(Instant, Duration), Wrong> {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
        let answer = self.post(body.as_bytes()).await?;
        let received = Instant::now();
        if answer.status != 200 {
            return Err(Wrong::Status(answer.status));
        }
        let checking = Instant::now();
        let reply: Envelope<ListResult> = parse(&answer.body)?;
        let result = reply.checked(id)?;
        if result.next_cursor.is_some() {
            return Err(Wrong::Result("tools/list answered a further page".into()));
        }
        if result.tools.len() != expected {
            return Err(Wrong::Result(format!("{} tools listed, {expected} expected", result.tools.len())));
        }
        if let Some(t) = result.tools.iter().find(|t| !prefixes.iter().any(|p| t.name.starts_with(p.as_str()))) {
            return Err(Wrong::Result(format!("tool {:?} has none of the expected prefixes", t.name)));
        }
        Ok((received, checking.elapsed()))
    }

    /// POSTs one JSON-RPC message and reads the whole answer.
    pub async fn post(&mut self, body: &[u8]) -> Result<Answer, Wrong> {
        use std::fmt::Write as _;
        let mut head = String::with_capacity(320);
        let _ = write!(
            head,
            "POST {} HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.endpoint.path,
            self.host,
            body.len()
        );
        if let Some(session) = &self.session {
            let _ = write!(head, "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: {}\r\n", self.version);
        }
        head.push_str("\r\n");
        self.write.clear();
        self.write.extend_from_slice(head.as_bytes());
        self.write.extend_from_slice(body);
        self.stream.write_all(&self.write).await.map_err(|e| Wrong::Io(e.to_string()))?;
        self.read_answer().await
    }

    async fn read_answer(&mut self) -> Result<Answer, Wrong> {
        loop {
            if let Some((answer, used)) = parse_http(&self.read)? {
                self.read.drain(..used);
                return Ok(answer);
            }
            self.read.reserve(16 * 1024);
            let n = self.stream.read_buf(&mut self.read).await.map_err(|e| Wrong::Io(e.to_string()))?;
            if n == 0 {
                return Err(Wrong::Io("closed by the server".into()));
            }
        }
    }
}

/// A complete HTTP/1.1 response at the start of `buf`, and how many bytes it used;
/// `None` while more bytes are needed.
fn parse_http(buf: &[u8]) -> Result<Option<(Answer, usize)>, Wrong> {
    let Some(end) = find(buf, b"\r\n\r\n") else { return Ok(None) };
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| Wrong::Http("head is not UTF-8".into()))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| Wrong::Http(format!("status line {status_line:?}")))?;
    let (mut length, mut chunked, mut sse, mut session) = (None, false, false, None);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().map_err(|_| Wrong::Http(format!("content-length {value:?}")))?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        } else if name.eq_ignore_ascii_case("content-type") {
            sse = value.starts_with("text/event-stream");
        } else if name.eq_ignore_ascii_case("mcp-session-id") {
            session = Some(value.to_owned());
        } else if name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case("close") {
            return Err(Wrong::Http("the server closes the connection".into()));
        }
    }
    let start = end + 4;
    let (body, used) = if chunked {
        match dechunk(&buf[start..])? {
            Some((body, n)) => (body, start + n),
            None => return Ok(None),
        }
    } else {
        let length = length.unwrap_or(0);
        if buf.len() < start + length {
            return Ok(None);
        }
        (buf[start..start + length].to_vec(), start + length)
    };
    let body = if sse { sse_answer(&body)? } else { body };
    Ok(Some((Answer { status, session, body }, used)))
}

/// A chunked body and its length on the wire, once it is complete.
fn dechunk(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, Wrong> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let Some(eol) = find(&buf[at..], b"\r\n") else { return Ok(None) };
        let line = std::str::from_utf8(&buf[at..at + eol]).map_err(|_| Wrong::Http("chunk size".into()))?;
        let hex = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(hex, 16).map_err(|_| Wrong::Http(format!("chunk size {hex:?}")))?;
        at += eol + 2;
        if size == 0 {
            // Trailers (none expected) end with an empty line.
            let Some(end) = find(&buf[at..], b"\r\n") else { return Ok(None) };
            if end != 0 {
                return Err(Wrong::Http("trailers after a chunked body".into()));
            }
            return Ok(Some((body, at + 2)));
        }
        if buf.len() < at + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&buf[at..at + size]);
        at += size + 2;
    }
}

/// The data of the last SSE event that is a JSON-RPC answer (has `result` or `error`).
fn sse_answer(body: &[u8]) -> Result<Vec<u8>, Wrong> {
    let text = std::str::from_utf8(body).map_err(|_| Wrong::Http("SSE body is not UTF-8".into()))?;
    let mut answer = None;
    for event in text.split("\n\n") {
        let data: Vec<&str> =
            event.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        let data = data.join("\n");
        if data.contains("\"result\"") || data.contains("\"error\"") {
            answer = Some(data);
        }
    }
    answer.map(String::into_bytes).ok_or_else(|| Wrong::Json("no answer on the SSE stream".into()))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[derive(Deserialize)]
struct Envelope<'a, R> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: Option<u64>,
    result: Option<R>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

impl<R> Envelope<'_, R> {
    fn checked(self, id: u64) -> Result<R, Wrong> {
        if self.jsonrpc != "2.0" {
            return Err(Wrong::Json(format!("jsonrpc {:?}", self.jsonrpc)));
        }
        if self.id != Some(id) {
            return Err(Wrong::Id { sent: id, got: self.id });
        }
        if let Some(error) = self.error {
            return Err(Wrong::Result(format!("error {}", error.get())));
        }
        self.result.ok_or_else(|| Wrong::Json("neither result nor error".into()))
    }
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Wrong> {
    serde_json::from_slice(body).map_err(|e| Wrong::Json(format!("{e}: {}", String::from_utf8_lossy(body))))
}

#[derive(Deserialize)]
struct InitResult<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Cow<'a, str>,
}

#[derive(Deserialize)]
struct CallResult<'a> {
    #[serde(borrow)]
    content: Vec<Content<'a>>,
    #[serde(rename = "isError", default)]
    is_error: bool,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ListResult<'a> {
    #[serde(borrow)]
    tools: Vec<ToolEntry<'a>>,
    #[serde(rename = "nextCursor", borrow)]
    next_cursor: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ToolEntry<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}
