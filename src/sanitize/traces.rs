//! Stack traces: frames go, the headline a handler wrote on purpose stays.
//!
//! Python, Java, JavaScript, Rust and Go traces are recognised line by line with a small
//! state machine ([`Trace`]); a trace with no headline at all becomes `[trace]`.

use std::borrow::Cow;

use super::bytes::escape_at;
use super::markers::MARK_TRACE;

/// Where in a multi-line trace the previous line left us.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Trace {
    /// Not inside a trace.
    Outside,
    /// After `Traceback (most recent call last):` or a `File "…", line N` frame.
    Python,
    /// After Rust's `stack backtrace:`.
    RustBacktrace,
    /// After Go's `goroutine N [running]:`.
    Go,
}

/// What happens to one line.
enum Verdict {
    Keep,
    Drop,
    Replace(String),
}

/// Drops the frame lines of stack traces, keeping the headline exception lines.
pub(super) fn reduce_traces(text: &str) -> Cow<'_, str> {
    let mut kept: Vec<Cow<'_, str>> = Vec::new();
    let mut changed = false;
    // Blank lines that separated a dropped trace from its neighbours go with it.
    let mut after_drop = false;
    let mut state = Trace::Outside;
    for raw in split_lines(text) {
        let line = raw.strip_suffix('\r').or_else(|| raw.strip_suffix("\\x0d")).unwrap_or(raw);
        match classify(line, &mut state, 0) {
            Verdict::Keep if after_drop && is_blank(line) => {}
            Verdict::Keep => {
                kept.push(Cow::Borrowed(raw));
                after_drop = false;
            }
            Verdict::Drop => {
                while kept.last().is_some_and(|l| is_blank(l)) {
                    kept.pop();
                }
                changed = true;
                after_drop = true;
            }
            Verdict::Replace(headline) => {
                kept.push(Cow::Owned(headline));
                changed = true;
                after_drop = false;
            }
        }
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    if kept.iter().all(|line| is_blank(line)) {
        return Cow::Borrowed(MARK_TRACE);
    }
    Cow::Owned(kept.join("\n"))
}

/// Splits at `\n` and at the escape `\x0a` that stands for it in sanitised text, so that
/// a second pass sees the lines the first one saw.
fn split_lines(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    std::iter::from_fn(move || {
        if start > b.len() {
            return None;
        }
        while i < b.len() {
            let width = match b[i] {
                b'\n' => 1,
                b'\\' if escape_at(b, i) && b[i + 2] == b'0' && matches!(b[i + 3], b'a' | b'A') => 4,
                _ => 0,
            };
            if width > 0 {
                let line = text.get(start..i).unwrap_or("");
                i += width;
                start = i;
                return Some(line);
            }
            i += 1;
        }
        let line = text.get(start..).unwrap_or("");
        start = b.len() + 1;
        Some(line)
    })
}

/// Only ASCII whitespace counts: a second pass sees other blanks escaped.
fn ascii_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_ascii_whitespace())
}

fn is_blank(s: &str) -> bool {
    ascii_trim(s).is_empty()
}

/// How deep the verdict on a line may rest on the verdict on a part of it (a panic's
/// message, the text before a Python header). No line needs more than three levels
/// today; the bound keeps a future rule from letting a crafted line exhaust the stack.
const MAX_NESTING: usize = 4;

/// The verdict on `line`, `depth` levels inside the line it is part of.
fn classify(line: &str, state: &mut Trace, depth: usize) -> Verdict {
    if depth > MAX_NESTING {
        return Verdict::Drop;
    }
    let t = ascii_trim(line);
    let indented = line.starts_with([' ', '\t']);
    let continues = match *state {
        Trace::Outside => false,
        Trace::Python => indented || t.is_empty(),
        Trace::RustBacktrace => indented || t.is_empty() || is_numbered_frame(t),
        Trace::Go => {
            indented || t.is_empty() || is_go_call(t) || t.starts_with("created by ") || is_goroutine_header(t)
        }
    };
    if continues {
        return Verdict::Drop;
    }
    *state = Trace::Outside;

    if let Some(prefix) = python_header_prefix(t) {
        // What a handler or logger wrote before the header stays, judged as the line it
        // will be on a second pass; the header goes.
        let verdict = match classify(prefix, state, depth + 1) {
            Verdict::Keep if !prefix.is_empty() => Verdict::Replace(prefix.to_owned()),
            Verdict::Keep => Verdict::Drop,
            other => other,
        };
        *state = Trace::Python;
        return verdict;
    }
    if is_python_frame(t) {
        *state = Trace::Python;
        return Verdict::Drop;
    }
    if t == "stack backtrace:" {
        *state = Trace::RustBacktrace;
        return Verdict::Drop;
    }
    if is_goroutine_header(t) {
        *state = Trace::Go;
        return Verdict::Drop;
    }
    if let Some(verdict) = rust_panic(t) {
        // The message is judged as the line it will be on a second pass.
        return match verdict {
            Verdict::Replace(message) => match classify(&message, state, depth + 1) {
                Verdict::Keep => Verdict::Replace(message),
                other => other,
            },
            other => other,
        };
    }
    let frame = is_at_frame(t, indented)
        || is_more_frames(t)
        || is_caret_marker(t)
        || t == "During handling of the above exception, another exception occurred:"
        || t == "The above exception was the direct cause of the following exception:"
        || t.starts_with("Caused by:")
        || t.starts_with("Suppressed:")
        || t.starts_with("note: run with `RUST_BACKTRACE=")
        || t.starts_with("note: Some details are omitted")
        || t.starts_with("[signal ");
    if frame { Verdict::Drop } else { Verdict::Keep }
}

/// For a line ending in Python's `Traceback (most recent call last):`, what precedes the
/// header (and any copies of it): empty for the header alone, or what a handler put in
/// front of it (`bad argument: Traceback …`).
fn python_header_prefix(t: &str) -> Option<&str> {
    const HEADER: &str = "Traceback (most recent call last):";
    let mut prefix = ascii_trim(t.strip_suffix(HEADER)?);
    while let Some(shorter) = prefix.strip_suffix(HEADER) {
        prefix = ascii_trim(shorter);
    }
    Some(prefix)
}

/// `File "/srv/app/x.py", line 12, in handler`
fn is_python_frame(t: &str) -> bool {
    t.starts_with("File \"") && t.contains("\", line ")
}

/// Java `at com.x.Y.m(Y.java:12)`, JavaScript `at fn (/app/x.js:1:2)`, `at async …`,
/// `at /app/x.js:1:2`. Unindented lines must end in something that looks like a source
/// location, so that prose starting with "at " survives.
fn is_at_frame(t: &str, indented: bool) -> bool {
    let Some(rest) = t.strip_prefix("at ") else {
        return false;
    };
    let rest = rest.strip_prefix("async ").unwrap_or(rest);
    if let Some(body) = rest.strip_suffix(')') {
        return match body.rfind('(') {
            Some(open) => {
                let inner = body.get(open + 1..).unwrap_or("");
                indented
                    || ends_with_line_number(inner)
                    || matches!(inner, "Native Method" | "Unknown Source" | "<anonymous>")
            }
            None => false,
        };
    }
    !rest.is_empty() && !rest.contains(' ') && ends_with_line_number(rest)
}

/// `…:12` or `…:12:5`.
fn ends_with_line_number(s: &str) -> bool {
    let digits = s.trim_end_matches(|c: char| c.is_ascii_digit());
    digits.len() < s.len() && digits.ends_with(':')
}

/// Java's `... 5 more` / `... 12 common frames omitted`.
fn is_more_frames(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("... ") else {
        return false;
    };
    let tail = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    tail.len() < rest.len() && (tail == " more" || tail == " common frames omitted")
}

/// Python 3.11's `^^^^^` under a frame's source line, and Node's `^` under a thrown one.
fn is_caret_marker(t: &str) -> bool {
    !t.is_empty() && t.bytes().all(|c| matches!(c, b'^' | b'~' | b' '))
}

/// Rust backtrace frame `12: std::rt::lang_start`.
fn is_numbered_frame(t: &str) -> bool {
    let rest = t.trim_start_matches(|c: char| c.is_ascii_digit());
    rest.len() < t.len() && rest.starts_with(':')
}

/// Go's `goroutine 1 [running]:`.
fn is_goroutine_header(t: &str) -> bool {
    t.starts_with("goroutine ") && t.ends_with("]:")
}

/// Go frame function line `main.(*Server).handle(0xc000010000, {0x4b7b8e, 0x3})`.
fn is_go_call(t: &str) -> bool {
    t.ends_with(')') && t.find('(').is_some_and(|p| p > 0 && !t[..p].contains(' '))
}

/// Rust's `thread 'main' panicked at src/x.rs:1:2:` (the message follows on the next
/// line, which is kept) or the older `thread 'main' panicked at 'boom', src/x.rs:1:2`
/// (reduced to the message, unwrapping panics that quote panics).
fn rust_panic(t: &str) -> Option<Verdict> {
    let mut after = panic_location(t)?;
    loop {
        let Some(quoted) = after.strip_prefix('\'') else {
            return Some(Verdict::Drop);
        };
        let message = quoted.rfind("', ").map_or(quoted, |end| &quoted[..end]);
        match panic_location(message) {
            Some(inner) => after = inner,
            None => return Some(Verdict::Replace(message.to_owned())),
        }
    }
}

/// What follows `thread '…' panicked at `.
fn panic_location(t: &str) -> Option<&str> {
    const AT: &str = "' panicked at ";
    let rest = t.strip_prefix("thread '")?;
    rest.get(rest.find(AT)? + AT.len()..)
}

#[cfg(test)]
mod tests {
    //! Stack traces lose their frames and keep their headlines.

    use crate::sanitize::test_support::big;
    use crate::sanitize::scrub;

    #[test]
    fn python_trace_is_reduced_to_its_headline() {
        let trace = "Traceback (most recent call last):\n  \
            File \"/srv/app/.venv/lib/python3.12/site-packages/httpx/_transports/default.py\", line 69, in map_httpcore_exceptions\n    \
            yield\n  \
            File \"/srv/app/server.py\", line 42, in call_tool\n    \
            return await client.get(url)\n           ^^^^^^^^^^^^^^^^^^^^^\n\
            ConnectionRefusedError: [Errno 111] Connection refused to http://10.0.3.7:5432/db\n";
        assert_eq!(big(trace), "ConnectionRefusedError: [Errno 111] Connection refused to [url]");
    }

    #[test]
    fn chained_python_traces_keep_each_exception_line() {
        let trace = "Traceback (most recent call last):\n  \
            File \"/app/db.py\", line 10, in connect\n    sock.connect(addr)\n\
            ConnectionRefusedError: [Errno 111] Connection refused\n\n\
            During handling of the above exception, another exception occurred:\n\n\
            Traceback (most recent call last):\n  \
            File \"/app/tool.py\", line 5, in run\n    db.connect()\n\
            RuntimeError: database unavailable";
        assert_eq!(
            big(trace),
            "ConnectionRefusedError: [Errno 111] Connection refused\\x0aRuntimeError: database unavailable"
        );
    }

    #[test]
    fn python_trace_header_never_survives() {
        // What a handler or logger put in front of the header stays; the header goes.
        let prefixed = "Error executing tool fetch: Traceback (most recent call last):\n  \
            File \"/srv/app/server.py\", line 42, in call_tool\n    \
            return await client.get(url)\n\
            ConnectionRefusedError: [Errno 111] Connection refused http://10.0.3.7:5432/db";
        assert_eq!(
            big(prefixed),
            "Error executing tool fetch:\\x0aConnectionRefusedError: [Errno 111] Connection refused [url]"
        );
        let chained = "ERROR:root:Traceback (most recent call last):\n  \
            File \"/app/db.py\", line 10, in connect\n\
            ConnectionRefusedError: [Errno 111] Connection refused\n\n\
            During handling of the above exception, another exception occurred:\n\n\
            Traceback (most recent call last):\n  \
            File \"/app/tool.py\", line 5, in run\n\
            RuntimeError: database unavailable";
        assert_eq!(
            big(chained),
            "ERROR:root:\\x0aConnectionRefusedError: [Errno 111] Connection refused\\x0aRuntimeError: database unavailable"
        );
        assert!(!scrub(chained).contains("Traceback"));
        // A line of headers, each judged by what precedes it, does not exhaust the stack.
        let headers = |n| format!("boom {}", "Traceback (most recent call last):".repeat(n));
        assert_eq!(scrub(&headers(30_000)), "boom");
        assert_eq!(big(&headers(1_500)), "boom");
    }

    #[test]
    fn java_trace_is_reduced_to_its_headline() {
        let trace = "java.lang.IllegalStateException: tool 'export' failed\n\
            \tat com.acme.tools.Export.run(Export.java:87)\n\
            \tat com.acme.mcp.Dispatcher.lambda$call$0(Dispatcher.java:41)\n\
            \tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1144)\n\
            \tat java.base/java.lang.Thread.run(Native Method)\n\
            Caused by: java.net.ConnectException: Connection refused: db.prod.internal/10.1.2.3:5432\n\
            \tat java.base/sun.nio.ch.Net.connect0(Native Method)\n\
            \t... 12 more\n";
        assert_eq!(big(trace), "java.lang.IllegalStateException: tool 'export' failed");
    }

    #[test]
    fn javascript_trace_is_reduced_to_its_headline() {
        let trace = "TypeError: Cannot read properties of undefined (reading 'id')\n    \
            at getUser (/home/deploy/app/src/users.js:12:19)\n    \
            at async Server.callTool (file:///home/deploy/app/node_modules/@modelcontextprotocol/sdk/dist/server.js:88:7)\n    \
            at async Promise.all (index 0)\n    \
            at /home/deploy/app/src/index.js:5:3\n    \
            at node:internal/process/task_queues:95:5";
        assert_eq!(big(trace), "TypeError: Cannot read properties of undefined (reading 'id')");
    }

    #[test]
    fn rust_panic_keeps_the_message_only() {
        let panic = "thread 'tokio-runtime-worker' panicked at src/tools/fetch.rs:41:18:\n\
            called `Result::unwrap()` on an `Err` value: Timeout\n\
            stack backtrace:\n   \
            0: rust_begin_unwind\n             \
            at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/std/src/panicking.rs:665:5\n   \
            1: core::result::unwrap_failed\n   \
            2: server::tools::fetch\n\
            note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.";
        assert_eq!(big(panic), "called `Result::unwrap()` on an `Err` value: Timeout");
        let old = "thread 'main' panicked at 'index out of bounds', /home/u/src/main.rs:2:5\n\
            note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";
        assert_eq!(big(old), "index out of bounds");
    }

    #[test]
    fn go_panic_keeps_the_panic_line() {
        let panic = "panic: runtime error: index out of range [5] with length 3\n\n\
            goroutine 1 [running]:\n\
            main.(*Server).handle(0xc0000a6000, {0x4b7b8e, 0x3})\n\
            \t/home/ci/go/src/acme/server/main.go:27 +0x1d\n\
            main.main()\n\
            \t/home/ci/go/src/acme/server/main.go:12 +0x25\n\
            created by net/http.(*Server).Serve in goroutine 1\n\
            \t/usr/local/go/src/net/http/server.go:3285 +0x4b4\n\
            exit status 2";
        assert_eq!(big(panic), "panic: runtime error: index out of range [5] with length 3\\x0aexit status 2");
    }

    #[test]
    fn a_trace_without_headline_becomes_a_marker() {
        let frames = "  File \"/app/x.py\", line 1, in <module>\n    main()\n";
        assert_eq!(big(frames), "[trace]");
        let java = "\tat com.x.Y.m(Y.java:12)\n\tat com.x.Z.n(Z.java:3)";
        assert_eq!(big(java), "[trace]");
    }

    #[test]
    fn prose_that_resembles_a_frame_survives() {
        let s = "at least one of 'query' or 'id' is required (see docs)";
        assert_eq!(big(s), s);
        let s = "Error: retry at 5 s (attempt 2)";
        assert_eq!(big(s), s);
    }
}
