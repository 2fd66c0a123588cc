//! What the demo server saw: the `--record` file (one JSON object per line,
//! flushed at once so tests can read it while the server runs) and the
//! counters behind `GET /admin/stats`.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde_json::{Value, json};

/// Appends one JSON line per event to the `--record` file.
#[derive(Debug)]
pub(crate) struct Recorder {
    file: Mutex<File>,
}

impl Recorder {
    /// Open (creating if needed) `path` for appending.
    pub(crate) fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self { file: Mutex::new(file) })
    }

    /// Append `event` as one line and flush. Write errors are logged, never fatal:
    /// the record is a test aid, not part of the protocol.
    pub(crate) fn write(&self, event: &Value) {
        let mut line = event.to_string();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|poison| poison.into_inner());
        if let Err(err) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
            tracing::warn!(error = %err, "demo: cannot write record file");
        }
    }
}

/// Counters served by `GET /admin/stats`.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    inner: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    calls: BTreeMap<String, u64>,
    requests: BTreeMap<String, u64>,
    cancelled: u64,
}

impl Stats {
    fn with<R>(&self, f: impl FnOnce(&mut Counts) -> R) -> R {
        let mut counts = self.inner.lock().unwrap_or_else(|poison| poison.into_inner());
        f(&mut counts)
    }

    /// Count one request for `method`.
    pub(crate) fn request(&self, method: &str) {
        self.with(|c| *c.requests.entry(method.to_owned()).or_default() += 1);
    }

    /// Count one `tools/call` of `tool`.
    pub(crate) fn call(&self, tool: &str) {
        self.with(|c| *c.calls.entry(tool.to_owned()).or_default() += 1);
    }

    /// Count one `notifications/cancelled`.
    pub(crate) fn cancelled(&self) {
        self.with(|c| c.cancelled += 1);
    }

    /// `{"calls": {tool: n}, "requests": {method: n}, "cancelled": n, "sessions": n}`.
    pub(crate) fn snapshot(&self, sessions: usize) -> Value {
        self.with(|c| {
            json!({
                "calls": c.calls,
                "requests": c.requests,
                "cancelled": c.cancelled,
                "sessions": sessions,
            })
        })
    }
}
