//! A child's stderr in seawall's log (target `seawall::upstream::stderr`).
//!
//! Logs are read by more people than the upstream's owner, so each line loses its
//! credentials (the sanitiser's secret detectors; paths and hosts stay, they help find
//! the fault), has its control bytes escaped and is cut to [`LOGGED_LINE`] bytes. A
//! chatty or looping child cannot flood the log either: a burst of [`BURST`] lines
//! passes, then [`RATE`] a second; the lines over that are counted, and the count is
//! logged every [`REPORT_EVERY`] while lines are being left out, and when stderr ends.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use tokio::io::AsyncBufRead;
use tokio::time::Instant;

use crate::ndjson::{Line, read_line_bounded};

/// Longest stderr line read; the rest of a longer one is skipped.
const MAX_STDERR_LINE: usize = 8 * 1024;
/// Longest line logged (bytes, escapes counted), ending in `...` when cut.
const LOGGED_LINE: usize = 1024;
/// Lines logged at once before the rate applies.
const BURST: u32 = 100;
/// Lines logged per second, once the burst is spent.
const RATE: u32 = 20;
/// How often the count of left-out lines is logged while lines are left out.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Lines of stderr kept for when the process fails.
const TAIL_LINES: usize = 8;

/// The last lines a process wrote on stderr, as written (each at most the longest line
/// read, the lines of a key block already withheld), whether they were logged or left
/// out: what it said before it failed. Whoever shows them scrubs them for their reader.
#[derive(Debug, Default)]
pub(super) struct StderrTail {
    lines: Mutex<VecDeque<String>>,
}

impl StderrTail {
    fn push(&self, line: &str) {
        let mut lines = self.lines.lock();
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line.to_owned());
    }

    /// The lines kept, oldest first.
    pub(super) fn lines(&self) -> Vec<String> {
        self.lines.lock().iter().cloned().collect()
    }
}

/// Which lines of one child are logged: a token bucket of lines, and the count of
/// those left out since the last report.
#[derive(Debug)]
struct LineBudget {
    /// Lines that may be logged now (whole ones count).
    tokens: f64,
    refilled: Instant,
    /// Lines left out since the last report.
    left_out: u64,
    /// When the count of left-out lines is due; `None` while none are.
    report_at: Option<Instant>,
}

impl LineBudget {
    fn new(now: Instant) -> LineBudget {
        LineBudget { tokens: f64::from(BURST), refilled: now, left_out: 0, report_at: None }
    }

    /// Whether a line arriving at `now` is logged; one that is not is counted.
    fn admit(&mut self, now: Instant) -> bool {
        let earned = now.saturating_duration_since(self.refilled).as_secs_f64() * f64::from(RATE);
        self.tokens = (self.tokens + earned).min(f64::from(BURST));
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        self.left_out += 1;
        self.report_at.get_or_insert(now + REPORT_EVERY);
        false
    }

    /// The lines left out since the last report, when there are any: the count starts
    /// again from zero.
    fn take_left_out(&mut self) -> Option<u64> {
        self.report_at = None;
        Some(std::mem::take(&mut self.left_out)).filter(|n| *n > 0)
    }
}

/// Most lines a key block is taken to span: past it, lines are judged on their own again.
const MAX_KEY_BLOCK_LINES: u32 = 200;

/// A PEM block (`-----BEGIN … KEY-----` … `-----END …-----`) spans lines, and the
/// sanitiser sees one line at a time: the lines inside a block are withheld whole.
#[derive(Debug, Default)]
struct KeyBlock {
    /// Lines withheld so far of the block being read; `None` outside a block.
    inside: Option<u32>,
}

impl KeyBlock {
    /// The line as logged: itself, or a marker while a block is open.
    fn filter<'l>(&mut self, line: &'l str) -> &'l str {
        const WITHHELD: &str = "[redacted]";
        if let Some(n) = self.inside {
            self.inside = (!line.contains("-----END ") && n < MAX_KEY_BLOCK_LINES).then_some(n + 1);
            return WITHHELD;
        }
        if let Some(begin) = line.find("-----BEGIN ")
            && !line[begin..].contains("-----END ")
        {
            self.inside = Some(0);
        }
        line
    }
}

fn report_left_out(name: &str, budget: &mut LineBudget) {
    if let Some(lines) = budget.take_left_out() {
        tracing::warn!(
            target: "seawall::upstream::stderr",
            upstream = %name,
            lines,
            "stderr lines left out of the log (more than {BURST} at once or {RATE} a second)"
        );
    }
}

/// Logs the child's stderr until it ends, keeping its last lines in `tail`.
pub(super) async fn log_stderr(name: Arc<str>, mut stderr: impl AsyncBufRead + Unpin, tail: Arc<StderrTail>) {
    let mut buf = Vec::new();
    let mut budget = LineBudget::new(Instant::now());
    let mut key_block = KeyBlock::default();
    loop {
        let line = {
            let read = read_line_bounded(&mut stderr, &mut buf, MAX_STDERR_LINE);
            tokio::pin!(read);
            // The read is never abandoned midway: a due report is written beside it.
            loop {
                let Some(due) = budget.report_at else { break (&mut read).await };
                tokio::select! {
                    line = &mut read => break line,
                    () = tokio::time::sleep_until(due) => report_left_out(&name, &mut budget),
                }
            }
        };
        if matches!(line, Line::Eof) {
            report_left_out(&name, &mut budget);
            return;
        }
        let text = String::from_utf8_lossy(&buf);
        let text = key_block.filter(text.trim_end());
        if matches!(line, Line::Text) && !text.is_empty() {
            tail.push(text);
        }
        if !budget.admit(Instant::now()) {
            continue;
        }
        match line {
            Line::Text => {
                let logged = crate::sanitize::redact_credentials(text, LOGGED_LINE);
                tracing::info!(target: "seawall::upstream::stderr", upstream = %name, "{logged}");
            }
            Line::TooLong => {
                tracing::info!(target: "seawall::upstream::stderr", upstream = %name, "(over-long stderr line skipped)")
            }
            Line::Eof => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines() {
        let tail = StderrTail::default();
        for n in 0..TAIL_LINES + 3 {
            tail.push(&format!("line {n}"));
        }
        let lines = tail.lines();
        assert_eq!((lines.len(), lines[0].as_str()), (TAIL_LINES, "line 3"));
    }

    #[test]
    fn the_lines_of_a_key_block_are_withheld() {
        let mut block = KeyBlock::default();
        let lines = [
            "key:",
            "-----BEGIN RSA PRIVATE KEY-----",
            "MIIEpAIBAAKC",
            "QEA7",
            "-----END RSA PRIVATE KEY-----",
            "after",
        ];
        let logged: Vec<&str> = lines.iter().map(|l| block.filter(l)).collect();
        assert_eq!(
            logged,
            ["key:", "-----BEGIN RSA PRIVATE KEY-----", "[redacted]", "[redacted]", "[redacted]", "after"]
        );
        let one_line = "-----BEGIN KEY----- x -----END KEY-----";
        assert_eq!((block.filter(one_line), block.filter("next")), (one_line, "next"));
    }

    #[test]
    fn a_burst_passes_then_the_rate_and_the_rest_is_counted() {
        let start = Instant::now();
        let mut budget = LineBudget::new(start);
        let logged = (0..BURST + 50).filter(|_| budget.admit(start)).count();
        assert_eq!(logged, BURST as usize);
        assert_eq!(budget.report_at, Some(start + REPORT_EVERY));
        // One second later RATE more lines pass.
        let later = start + Duration::from_secs(1);
        let logged = (0..BURST).filter(|_| budget.admit(later)).count();
        assert_eq!(logged, RATE as usize);
        assert_eq!(budget.take_left_out(), Some(50 + u64::from(BURST - RATE)));
        assert_eq!(budget.take_left_out(), None, "the count starts again");
        assert_eq!(budget.report_at, None);
    }
}
