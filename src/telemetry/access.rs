//! The access log (`access_log:`): one line per client request (the client stack's
//! [`AccessLayer`](crate::client::AccessLayer) hands each over) — when it was answered, how long it took, which
//! session and principal asked, the method, tool and id, what became of it (outcome,
//! JSON-RPC error code, HTTP status of a refusal, correlation id), and the trace: the
//! trace and span id of seawall's span when tracing is on, the trace id the client sent
//! when it sent one. JSON lines, or readable text on a terminal.
//!
//! Lines go to a bounded queue that a thread of their own writes (to stderr or a file)
//! in batches gathered over 10 ms, so a slow disk never slows a request and a busy
//! gateway wakes the writer at most 100 times a second; a line that does not fit is dropped and counted
//! (`seawall_access_log_dropped_total`).

use std::io::IsTerminal as _;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Instant, SystemTime};

use serde_json::value::RawValue;

use crate::call::Reply;
use crate::config::{AccessLogConfig, AccessLogFormat};
use crate::identity::Principal;
use crate::jsonrpc;
use crate::mcp::trace_context::TraceContext;

/// Lines waiting for the writer before new ones are dropped.
const QUEUE: usize = 8192;
/// How long the writer lets lines gather after the first one: at most this late, and
/// at most one wake-up of the writer per interval whatever the request rate.
const GATHER: std::time::Duration = std::time::Duration::from_millis(10);

/// The writer's buffer: a batch of lines up to this size is one `write`.
const BATCH_BYTES: usize = 64 * 1024;

/// Writes the lines `rx` brings in batches until every sender is gone: the first line
/// of a batch, then what else arrived within [`GATHER`], then one flush.
fn write_batches(rx: &std::sync::mpsc::Receiver<String>, out: &mut impl std::io::Write) {
    while let Ok(line) = rx.recv() {
        let _ = out.write_all(line.as_bytes());
        // Let lines gather before writing them all and flushing once: while this
        // thread sleeps, a request queuing its line wakes nobody.
        std::thread::sleep(GATHER);
        while let Ok(more) = rx.try_recv() {
            let _ = out.write_all(more.as_bytes());
        }
        let _ = out.flush();
    }
}

/// Where access lines go.
#[derive(Clone)]
pub struct AccessLog {
    tx: SyncSender<String>,
    json: bool,
}

impl AccessLog {
    /// The log `config` asks for, with its writer thread started; `None` when it is off.
    pub fn start(config: &AccessLogConfig) -> anyhow::Result<Option<AccessLog>> {
        if !config.is_on() {
            return Ok(None);
        }
        let out: Box<dyn std::io::Write + Send> = match &config.path {
            Some(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| anyhow::anyhow!("cannot open the access log {}: {e}", path.display()))?,
            ),
            None => Box::new(std::io::stderr()),
        };
        // A batch goes out in as few writes as its size allows, not one per line.
        let mut out = std::io::BufWriter::with_capacity(BATCH_BYTES, out);
        let json = match config.format {
            AccessLogFormat::Json => true,
            AccessLogFormat::Text => false,
            AccessLogFormat::Auto => config.path.is_some() || !std::io::stderr().is_terminal(),
        };
        let (tx, rx) = std::sync::mpsc::sync_channel::<String>(QUEUE);
        std::thread::Builder::new().name("seawall-access-log".into()).spawn(move || write_batches(&rx, &mut out))?;
        Ok(Some(AccessLog { tx, json }))
    }

    /// Writes the line of one answered request.
    pub(crate) fn record(&self, request: Recorded<'_>, reply: &Reply, outcome: &'static str, status: Option<u16>) {
        let (code, correlation_id) = error_of(reply);
        let (correlation_id, rewritten) = match correlation_id {
            Some(cid) => (Some(cid), None),
            None => match rewritten_result(reply) {
                Some(cid) => (Some(cid), Some("scrubbed")),
                None => (None, None),
            },
        };
        let entry = Entry {
            time: SystemTime::now(),
            session: request.session,
            principal: request.principal.map(Principal::label),
            method: request.method,
            tool: request.tool,
            id: request.id,
            outcome,
            code,
            status,
            correlation_id,
            rewritten,
            trace_id: request.span.map(TraceContext::trace_id_hex),
            span_id: request.span.map(TraceContext::span_id_hex),
            client_trace_id: request.client_trace.map(TraceContext::trace_id_hex),
            duration: request.started.elapsed(),
        };
        self.write(&entry);
    }

    fn write(&self, entry: &Entry<'_>) {
        let line = if self.json { json_line(entry) } else { entry.text() };
        match self.tx.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                super::metrics::access_log_dropped();
            }
        }
    }
}

/// `now` as RFC 3339 with milliseconds, UTC (`2026-12-05T03:08:07.264Z`, as
/// `humantime::format_rfc3339_millis` writes it).
#[cfg(test)]
fn timestamp(now: SystemTime) -> String {
    let mut out = String::new();
    push_timestamp(&mut out, now);
    out
}

/// Appends `now` as [`timestamp`] writes it. The date and time of day are formatted once
/// a second per thread; each line adds its milliseconds.
fn push_timestamp(out: &mut String, now: SystemTime) {
    thread_local! {
        /// The second last formatted, and its text without the `Z`.
        static SECOND: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let since = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let (secs, millis) = (since.as_secs(), since.subsec_millis());
    SECOND.with_borrow_mut(|(second, text)| {
        if *second != secs {
            let whole = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            *text = humantime::format_rfc3339_seconds(whole).to_string();
            text.pop();
            *second = secs;
        }
        out.push_str(text);
    });
    out.push('.');
    push_digits(out, u64::from(millis), 3);
    out.push('Z');
}

/// Appends `n` in decimal, with at least `width` digits (leading zeros).
fn push_digits(out: &mut String, mut n: u64, width: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while n > 0 || digits.len() - at < width.max(1) {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

/// Appends a duration in milliseconds with three decimals (microseconds).
fn push_millis(out: &mut String, duration: std::time::Duration) {
    let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
    push_digits(out, micros / 1000, 1);
    out.push('.');
    push_digits(out, micros % 1000, 3);
}

/// One JSON line, written by hand into a buffer sized for a usual line: the keys are
/// constants, and only values that need it are escaped.
fn json_line(entry: &Entry<'_>) -> String {
    let mut out = String::with_capacity(320);
    out.push_str("{\"time\":\"");
    push_timestamp(&mut out, entry.time);
    out.push_str("\",\"session\":");
    push_digits(&mut out, entry.session, 1);
    if let Some(principal) = &entry.principal {
        out.push_str(",\"principal\":");
        jsonrpc::push_json_str(&mut out, principal);
    }
    out.push_str(",\"method\":");
    jsonrpc::push_json_str(&mut out, entry.method);
    if let Some(tool) = entry.tool {
        out.push_str(",\"tool\":");
        jsonrpc::push_json_str(&mut out, tool);
    }
    // The id is JSON as the client sent it (a string or an integer).
    out.push_str(",\"id\":");
    out.push_str(entry.id.get());
    out.push_str(",\"outcome\":");
    jsonrpc::push_json_str(&mut out, entry.outcome);
    if let Some(code) = entry.code {
        out.push_str(",\"code\":");
        if code < 0 {
            out.push('-');
        }
        push_digits(&mut out, code.unsigned_abs(), 1);
    }
    if let Some(status) = entry.status {
        out.push_str(",\"status\":");
        push_digits(&mut out, u64::from(status), 1);
    }
    if let Some(rewritten) = entry.rewritten {
        out.push_str(",\"rewritten\":");
        jsonrpc::push_json_str(&mut out, rewritten);
    }
    for (key, value) in [
        (",\"correlationId\":", &entry.correlation_id),
        (",\"trace_id\":", &entry.trace_id),
        (",\"span_id\":", &entry.span_id),
        (",\"client_trace_id\":", &entry.client_trace_id),
    ] {
        if let Some(value) = value {
            out.push_str(key);
            jsonrpc::push_json_str(&mut out, value);
        }
    }
    out.push_str(",\"duration_ms\":");
    push_millis(&mut out, entry.duration);
    out.push_str("}\n");
    out
}

/// What the access log says of the request itself.
pub(crate) struct Recorded<'a> {
    /// When it arrived.
    pub(crate) started: Instant,
    /// The session's key (0 when none was opened).
    pub(crate) session: u64,
    /// Who asked, when clients authenticate.
    pub(crate) principal: Option<&'a Principal>,
    /// The method.
    pub(crate) method: &'a str,
    /// The tool, for `tools/call`.
    pub(crate) tool: Option<&'a str>,
    /// The client's id.
    pub(crate) id: &'a RawValue,
    /// seawall's span for the request, when tracing is on.
    pub(crate) span: Option<&'a TraceContext>,
    /// The trace context the client sent, if any.
    pub(crate) client_trace: Option<&'a TraceContext>,
}

/// One access line.
struct Entry<'a> {
    time: SystemTime,
    session: u64,
    principal: Option<String>,
    method: &'a str,
    tool: Option<&'a str>,
    id: &'a RawValue,
    outcome: &'static str,
    code: Option<i64>,
    status: Option<u16>,
    correlation_id: Option<String>,
    /// How seawall changed a result it relayed (`scrubbed`), when it did.
    rewritten: Option<&'static str>,
    trace_id: Option<String>,
    span_id: Option<String>,
    client_trace_id: Option<String>,
    duration: std::time::Duration,
}

impl Entry<'_> {
    fn text(&self) -> String {
        let mut line = String::with_capacity(160);
        push_timestamp(&mut line, self.time);
        line.push_str(&format!(
            " session={} method={} id={} outcome={} {:.1}ms",
            self.session,
            self.method,
            self.id.get(),
            self.outcome,
            self.duration.as_secs_f64() * 1000.0
        ));
        for (key, value) in [
            ("principal", self.principal.clone()),
            ("tool", self.tool.map(str::to_owned)),
            ("code", self.code.map(|c| c.to_string())),
            ("status", self.status.map(|s| s.to_string())),
            ("rewritten", self.rewritten.map(str::to_owned)),
            ("correlation_id", self.correlation_id.clone()),
            ("trace_id", self.trace_id.clone()),
            ("span_id", self.span_id.clone()),
            ("client_trace_id", self.client_trace_id.clone()),
        ] {
            if let Some(value) = value {
                line.push_str(&format!(" {key}={value}"));
            }
        }
        line.push('\n');
        line
    }
}

/// The JSON-RPC error code and correlation id of an error answer.
fn error_of(reply: &Reply) -> (Option<i64>, Option<String>) {
    let Err(error) = reply else { return (None, None) };
    let error = jsonrpc::view::<jsonrpc::ErrorView>(Some(error));
    let code = error.as_ref().and_then(|e| e.code);
    (code, error.and_then(|e| e.data).and_then(|d| d.correlation_id))
}

/// The correlation id of a result seawall changed (it is in the result's `_meta`).
fn rewritten_result(reply: &Reply) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct ResultView {
        #[serde(rename = "_meta", default)]
        meta: Option<serde_json::Map<String, serde_json::Value>>,
    }
    let Ok(result) = reply else { return None };
    if !jsonrpc::may_name(result.get(), crate::mcp::meta::CORRELATION_ID_KEY) {
        return None;
    }
    let meta = jsonrpc::view::<ResultView>(Some(result))?.meta?;
    meta.get(crate::mcp::meta::CORRELATION_ID_KEY)?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Counts the writes that reach the file.
    #[derive(Debug, Default)]
    struct CountingFile {
        writes: usize,
        bytes: Vec<u8>,
    }

    impl std::io::Write for CountingFile {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.writes += 1;
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn timestamps_read_as_humantime_writes_them() {
        let base = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_796_441_287_264);
        for offset_ms in [0u64, 1, 9, 10, 99, 100, 735, 736, 999, 1000, 86_400_000, 31_536_000_123] {
            let at = base + std::time::Duration::from_millis(offset_ms);
            assert_eq!(timestamp(at), humantime::format_rfc3339_millis(at).to_string(), "{offset_ms}");
        }
        assert_eq!(timestamp(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn a_json_line_is_one_object_and_a_newline() {
        let id = RawValue::from_string("7".into()).unwrap();
        let entry = Entry {
            time: SystemTime::now(),
            session: 3,
            principal: Some("a \"quoted\" name".into()),
            method: "tools/call",
            tool: Some("echo"),
            id: &id,
            outcome: "ok",
            code: None,
            status: None,
            correlation_id: Some("c1".into()),
            rewritten: Some("scrubbed"),
            trace_id: None,
            span_id: None,
            client_trace_id: None,
            duration: std::time::Duration::from_micros(250),
        };
        let line = json_line(&entry);
        assert!(line.ends_with("}\n") && line.matches('\n').count() == 1, "{line}");
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["principal"], "a \"quoted\" name");
        assert_eq!(parsed["id"], 7);
        assert_eq!(parsed["duration_ms"], 0.25);
        assert_eq!((parsed["rewritten"].as_str(), parsed["correlationId"].as_str()), (Some("scrubbed"), Some("c1")));
    }

    #[test]
    fn a_batch_of_lines_is_one_write_to_the_file() {
        let (tx, rx) = std::sync::mpsc::sync_channel::<String>(QUEUE);
        for n in 0..200 {
            tx.send(format!("line {n}\n")).unwrap();
        }
        drop(tx);
        let mut out = std::io::BufWriter::with_capacity(BATCH_BYTES, CountingFile::default());
        write_batches(&rx, &mut out);
        let file = out.into_inner().unwrap();
        assert_eq!(file.writes, 1, "200 lines queued at once are written together");
        let text = String::from_utf8(file.bytes).unwrap();
        assert_eq!(text.lines().count(), 200);
        assert!(text.starts_with("line 0\nline 1\n") && text.ends_with("line 199\n"), "in order");
    }

    #[test]
    fn error_answers_give_their_code_and_correlation_id() {
        let raw = |v: serde_json::Value| jsonrpc::to_raw(&v);
        assert_eq!(error_of(&Ok(raw(json!({"content": [], "isError": true})))), (None, None));
        let error = raw(json!({"code": -32013, "message": "x", "data": {"correlationId": "c1"}}));
        assert_eq!(error_of(&Err(error)), (Some(-32013), Some("c1".to_owned())));
        assert_eq!(error_of(&Err(raw(json!({"code": -32601, "message": "x"})))), (Some(-32601), None));
    }
}
