//! HTTP/1.x framing and request-smuggling vectors: each a client's bytes (`{host}`
//! stands for the gateway's address) and what seawall answers. Read by
//! `tests/framing.rs` against the real binary and against hyper's HTTP/1 server, and
//! kept as seeds of the fuzz target `h1` (fuzz/seeds/h1/<name>).

/// What seawall answers to a vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Read and answered with this status; the connection carries the next request.
    Answered(u16),
    /// Refused with this status (a JSON-RPC error) and closed: nothing after it on the
    /// connection is answered.
    Refused(u16),
}

/// One vector.
pub struct Vector {
    /// Its name, also its seed's file name.
    pub name: &'static str,
    /// The bytes, `{host}` standing for the gateway's address.
    pub wire: Vec<u8>,
    /// What seawall answers.
    pub expect: Expect,
}

/// The request sent after each vector in the same bytes: answered only when the vector
/// left the connection open and was framed as seawall read it.
pub const FOLLOW_UP: &[u8] = b"GET /follow-up HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n";

/// A request that must never be answered: hidden in a body by the framing a front proxy
/// might choose.
const SMUGGLED: &str = "GET /smuggled HTTP/1.1\r\nHost: {host}\r\n\r\n";

/// An `initialize` body, answered 200 by a gateway whatever its upstreams.
pub const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"framing","version":"1"}}}"#;

/// A POST to `/mcp` with `fields` (each ending in CRLF) after the usual ones, then the
/// empty line and `body` as it goes on the wire.
fn post(version: &str, fields: &str, body: &[u8]) -> Vec<u8> {
    let mut wire = format!(
        "POST /mcp HTTP/{version}\r\nHost: {{host}}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{fields}\r\n"
    )
    .into_bytes();
    wire.extend_from_slice(body);
    wire
}

fn post11(fields: &str, body: &[u8]) -> Vec<u8> {
    post("1.1", fields, body)
}

/// `INIT` with its length declared.
fn post_init(fields: &str) -> Vec<u8> {
    post11(&format!("{fields}Content-Length: {}\r\n", INIT.len()), INIT.as_bytes())
}

/// `INIT` in chunks, the first size line written as `size_line` (`{n}` the size).
fn chunked_init(size_line: &str) -> Vec<u8> {
    let (a, b) = INIT.split_at(20);
    format!("{}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n", size_line.replace("{n}", &format!("{:x}", a.len())), b.len())
        .into_bytes()
}

fn get(target: &str, fields: &str, body: &[u8]) -> Vec<u8> {
    let mut wire = format!("GET {target} HTTP/1.1\r\nHost: {{host}}\r\n{fields}\r\n").into_bytes();
    wire.extend_from_slice(body);
    wire
}

/// A head whose `Host`-carrying request line and field lines are given whole.
fn raw(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

/// Every vector.
pub fn all() -> Vec<Vector> {
    use Expect::{Answered, Refused};
    let te = "Transfer-Encoding: chunked\r\n";
    let smuggled_chunked = format!("0\r\n\r\n{SMUGGLED}");
    let v = |name, wire, expect| Vector { name, wire, expect };
    vec![
        // Well framed: read, answered, and the connection goes on.
        v("ok-content-length", post_init(""), Answered(200)),
        v("ok-chunked", post11(te, &chunked_init("{n}")), Answered(200)),
        v("ok-chunked-extensions", post11(te, &chunked_init(r#"{n} ; a ; b=tok ; c = "q\"uo;ted""#)), Answered(200)),
        v("ok-chunked-size-whitespace", post11(te, &chunked_init("{n} \t")), Answered(200)),
        v(
            "ok-chunked-trailer",
            post11(te, format!("{:x}\r\n{INIT}\r\n0\r\nX-Trailer: 1\r\n\r\n", INIT.len()).as_bytes()),
            Answered(200),
        ),
        v("ok-te-case", post11("Transfer-Encoding: CHUNKED\r\n", &chunked_init("{n}")), Answered(200)),
        v(
            "ok-http10-keep-alive",
            post("1.0", &format!("Connection: keep-alive\r\nContent-Length: {}\r\n", INIT.len()), INIT.as_bytes()),
            Answered(200),
        ),
        v("ok-get-length-zero", get("/nothing-here", "Content-Length: 0\r\n", b""), Answered(404)),
        v("ok-leading-empty-line", [&b"\r\n"[..], &post_init("")].concat(), Answered(200)),
        v(
            "ok-content-length-leading-zeros",
            post11(&format!("Content-Length: 00{}\r\n", INIT.len()), INIT.as_bytes()),
            Answered(200),
        ),
        v(
            "ok-absolute-form",
            [&b"POST http://{host}/mcp"[..], &post_init("")["POST /mcp".len()..]].concat(),
            Answered(200),
        ),
        // CL.TE and TE.CL: both framings in one request.
        v(
            "cl-te",
            post11(&format!("Content-Length: {}\r\n{te}", smuggled_chunked.len()), smuggled_chunked.as_bytes()),
            Refused(400),
        ),
        v("te-cl", post11(&format!("{te}Content-Length: 3\r\n"), smuggled_chunked.as_bytes()), Refused(400)),
        v(
            "cl-te-http10",
            post("1.0", &format!("Content-Length: 5\r\n{te}Connection: keep-alive\r\n"), smuggled_chunked.as_bytes()),
            Refused(400),
        ),
        // TE.TE: a Transfer-Encoding one reader takes and another does not.
        v(
            "te-http10",
            post("1.0", &format!("{te}Connection: keep-alive\r\n"), smuggled_chunked.as_bytes()),
            Refused(400),
        ),
        v(
            "te-chunked-twice",
            post11("Transfer-Encoding: chunked, chunked\r\n", smuggled_chunked.as_bytes()),
            Refused(400),
        ),
        v("te-chunked-two-fields", post11(&format!("{te}{te}"), smuggled_chunked.as_bytes()), Refused(400)),
        v("te-gzip-chunked", post11("Transfer-Encoding: gzip, chunked\r\n", smuggled_chunked.as_bytes()), Refused(501)),
        v(
            "te-gzip-field-then-chunked",
            post11(&format!("Transfer-Encoding: gzip\r\n{te}"), smuggled_chunked.as_bytes()),
            Refused(501),
        ),
        v("te-chunked-gzip", post11("Transfer-Encoding: chunked, gzip\r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v("te-identity", post11("Transfer-Encoding: identity\r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v("te-xchunked", post11("Transfer-Encoding: xchunked\r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v("te-quoted", post11("Transfer-Encoding: \"chunked\"\r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v("te-parameter", post11("Transfer-Encoding: chunked;q=1\r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v("te-trailing-comma", post11("Transfer-Encoding: chunked,\r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v("te-leading-comma", post11("Transfer-Encoding: , chunked\r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v("te-empty", post11("Transfer-Encoding: \r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v(
            "te-space-before-colon",
            post11("Transfer-Encoding : chunked\r\n", smuggled_chunked.as_bytes()),
            Refused(400),
        ),
        v("te-obs-fold", post11("Transfer-Encoding:\r\n chunked\r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v("te-vertical-tab", post11("Transfer-Encoding:\x0bchunked\r\n", smuggled_chunked.as_bytes()), Refused(400)),
        v("te-leading-space-line", post11(&format!("X-A: b\r\n {te}"), smuggled_chunked.as_bytes()), Refused(400)),
        // Content-Length: repeated, differing or not a plain decimal.
        v("cl-differing", post11("Content-Length: 3\r\nContent-Length: 5\r\n", b"{}   "), Refused(400)),
        v(
            "cl-repeated-same",
            post11(&format!("Content-Length: {0}\r\nContent-Length: {0}\r\n", INIT.len()), INIT.as_bytes()),
            Refused(400),
        ),
        v("cl-list", post11(&format!("Content-Length: {0}, {0}\r\n", INIT.len()), INIT.as_bytes()), Refused(400)),
        v("cl-plus", post11(&format!("Content-Length: +{}\r\n", INIT.len()), INIT.as_bytes()), Refused(400)),
        v("cl-negative", post11("Content-Length: -1\r\n", INIT.as_bytes()), Refused(400)),
        v("cl-hex", post11("Content-Length: 0x10\r\n", INIT.as_bytes()), Refused(400)),
        v("cl-inner-space", post11("Content-Length: 1 0\r\n", INIT.as_bytes()), Refused(400)),
        v("cl-decimal-point", post11("Content-Length: 10.0\r\n", INIT.as_bytes()), Refused(400)),
        v("cl-empty", post11("Content-Length: \r\n", INIT.as_bytes()), Refused(400)),
        v("cl-overflow", post11("Content-Length: 99999999999999999999999\r\n", INIT.as_bytes()), Refused(400)),
        v("cl-beyond-signed", post11("Content-Length: 9223372036854775808\r\n", INIT.as_bytes()), Refused(400)),
        // Chunk sizes, extensions, data and trailers.
        v("chunk-size-negative", post11(te, &chunked_init("-{n}")), Refused(400)),
        v("chunk-size-0x", post11(te, &chunked_init("0x{n}")), Refused(400)),
        v("chunk-size-leading-space", post11(te, &chunked_init(" {n}")), Refused(400)),
        v("chunk-size-inner-space", post11(te, &chunked_init("{n} 1")), Refused(400)),
        v("chunk-size-leading-zeros", post11(te, &chunked_init("00000000000000{n}")), Refused(400)),
        v("chunk-size-overflow", post11(te, b"fffffffffffffffff\r\nx\r\n0\r\n\r\n"), Refused(400)),
        v("chunk-size-bare-lf", post11(te, &chunked_init("{n}").replacen_crlf_first()), Refused(400)),
        v(
            "chunk-ext-quoted-crlf",
            post11(te, format!("1;a=\"\r\nX\r\n0\r\n\r\n{SMUGGLED}\"\r\n").as_bytes()),
            Refused(400),
        ),
        v("chunk-ext-bare-lf", post11(te, &chunked_init("{n};a\nb")), Refused(400)),
        v("chunk-ext-bare-cr", post11(te, &chunked_init("{n};a\rb")), Refused(400)),
        v("chunk-ext-nul", post11(te, &chunked_init("{n};a=\0")), Refused(400)),
        v("chunk-ext-no-name", post11(te, &chunked_init("{n};")), Refused(400)),
        v("chunk-data-longer", post11(te, format!("3\r\n{INIT}\r\n0\r\n\r\n").as_bytes()), Refused(400)),
        v("chunk-data-no-crlf", post11(te, format!("{:x}\r\n{INIT}0\r\n\r\n", INIT.len()).as_bytes()), Refused(400)),
        v(
            "chunk-trailer-obs-fold",
            post11(te, format!("{:x}\r\n{INIT}\r\n0\r\nX-T: 1\r\n folded\r\n\r\n", INIT.len()).as_bytes()),
            Refused(400),
        ),
        v(
            "chunk-trailer-no-colon",
            post11(te, format!("{:x}\r\n{INIT}\r\n0\r\n{SMUGGLED}", INIT.len()).as_bytes()),
            Refused(400),
        ),
        // Heads: line endings, folding, field names, NUL, the request line.
        v("head-bare-lf", post_init("").without_cr(), Refused(400)),
        v("head-one-bare-lf", post_init("X-A: b\n"), Refused(400)),
        v("head-bare-cr", post_init("X-A: b\rc\r\n"), Refused(400)),
        v("head-obs-fold", post_init("X-A: b\r\n c\r\n"), Refused(400)),
        v(
            "head-space-before-colon",
            post11(&format!("Content-Length : {}\r\n", INIT.len()), INIT.as_bytes()),
            Refused(400),
        ),
        v("head-nul-in-value", post_init("X-A: b\0c\r\n"), Refused(400)),
        v("head-nul-in-target", raw("GET /follow\0up HTTP/1.1\r\nHost: {host}\r\n\r\n"), Refused(400)),
        v("head-bad-field-name", post_init("X(A): b\r\n"), Refused(400)),
        v("head-empty-field-name", post_init(": b\r\n"), Refused(400)),
        v("head-double-space", raw("GET  /nothing-here HTTP/1.1\r\nHost: {host}\r\n\r\n"), Refused(400)),
        v("head-version-1.2", raw("GET /nothing-here HTTP/1.2\r\nHost: {host}\r\n\r\n"), Refused(400)),
        v("head-version-2", raw("GET /nothing-here HTTP/2.0\r\nHost: {host}\r\n\r\n"), Refused(400)),
        v("head-version-lowercase", raw("GET /nothing-here http/1.1\r\nHost: {host}\r\n\r\n"), Refused(400)),
        v("head-too-many-fields", get("/nothing-here", &"X-A: b\r\n".repeat(101), b""), Refused(431)),
        // Absolute form: the target's authority and Host must agree.
        v(
            "absolute-form-foreign",
            [&b"POST http://evil.example/mcp"[..], &post_init("")["POST /mcp".len()..]].concat(),
            Refused(400),
        ),
        // A body where none belongs.
        v("get-with-length", get("/nothing-here", "Content-Length: 5\r\n", b"hello"), Refused(400)),
        v("get-with-chunks", get("/nothing-here", te, b"5\r\nhello\r\n0\r\n\r\n"), Refused(400)),
        v(
            "get-with-smuggled-length",
            get("/nothing-here", &format!("Content-Length: {}\r\n", SMUGGLED.len()), SMUGGLED.as_bytes()),
            Refused(400),
        ),
        v(
            "head-with-length",
            raw("HEAD /nothing-here HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5\r\n\r\nhello"),
            Refused(400),
        ),
        v(
            "delete-with-length",
            raw("DELETE /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5\r\n\r\nhello"),
            Refused(400),
        ),
    ]
}

/// Byte edits the table uses.
trait Edit {
    /// Without any CR.
    fn without_cr(self) -> Vec<u8>;
    /// The first CRLF (the end of the first chunk-size line) made a bare LF.
    fn replacen_crlf_first(self) -> Vec<u8>;
}

impl Edit for Vec<u8> {
    fn without_cr(self) -> Vec<u8> {
        self.into_iter().filter(|&b| b != b'\r').collect()
    }

    fn replacen_crlf_first(mut self) -> Vec<u8> {
        if let Some(at) = self.windows(2).position(|w| w == b"\r\n") {
            self.remove(at);
        }
        self
    }
}

/// `wire` with `{host}` replaced.
pub fn with_host(wire: &[u8], host: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(wire.len() + host.len());
    let mut rest = wire;
    while let Some(at) = rest.windows(6).position(|w| w == b"{host}") {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(host.as_bytes());
        rest = &rest[at + 6..];
    }
    out.extend_from_slice(rest);
    out
}
