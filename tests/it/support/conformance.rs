//! The MCP conformance suite: runs it, reads its checks, and starts the dual-era server it
//! is run against (`tests/interop/python/everything_server.py`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::START_TIMEOUT;
use super::interop::Interop;
use super::process::{Proc, Stream, run_script};

/// One check from a `conformance server -o DIR` run.
#[derive(Debug, Clone)]
pub struct ConformanceCheck {
    /// Scenario (from the result directory name, e.g. `tools-call-simple-text`).
    pub scenario: String,
    /// Check id within the scenario (from checks.json), made unique with `#n`.
    pub id: String,
    /// `SUCCESS`, `FAILURE`, `WARNING`, `INFO`, ...
    pub status: String,
    /// `errorMessage`, if any.
    pub error: Option<String>,
    /// `description` (INFO checks explain themselves here).
    pub description: Option<String>,
    /// `details`: what the suite saw on the wire (responses, frames, statuses).
    pub details: Option<serde_json::Value>,
}

impl ConformanceCheck {
    pub fn key(&self) -> String {
        format!("{}/{}", self.scenario, self.id)
    }

    pub fn passed(&self) -> bool {
        self.status == "SUCCESS"
    }
}

/// Runs `conformance server --url URL -o DIR [--requirements REVISION]` with Node 22 and
/// parses every `DIR/<server-scenario-timestamp>/checks.json`. Without `requirements` the
/// suite runs its default (active) scenarios at 2025-11-25; with one, exactly the
/// scenarios that revision requires (and the ones it runs unscored), at its wire version.
/// The suite exits non-zero whenever a check fails, so the exit status is not judged
/// here; only its output files are.
pub async fn run_conformance(
    interop: &Interop,
    label: &str,
    url: &str,
    requirements: Option<&str>,
    out: &Path,
) -> Vec<ConformanceCheck> {
    run_suite(interop, Suite::Current, label, url, requirements, out).await
}

/// Which release of the conformance suite runs (both are pinned in
/// `tests/interop/package.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// `@modelcontextprotocol/conformance` 0.2.0-alpha.12.
    Current,
    /// 0.1.16, installed as `conformance-0.1.16`: its default run differs in which
    /// scenarios it holds and how its client times them.
    V0_1_16,
}

impl Suite {
    fn entry(self) -> &'static str {
        match self {
            Suite::Current => "node_modules/@modelcontextprotocol/conformance/dist/index.js",
            Suite::V0_1_16 => "node_modules/conformance-0.1.16/dist/index.js",
        }
    }
}

/// [`run_conformance`] with the suite's release chosen.
pub async fn run_suite(
    interop: &Interop,
    suite: Suite,
    label: &str,
    url: &str,
    requirements: Option<&str>,
    out: &Path,
) -> Vec<ConformanceCheck> {
    let mut cmd = interop.node_command([
        interop.path(suite.entry()).as_os_str(),
        "server".as_ref(),
        "--url".as_ref(),
        url.as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    if let Some(revision) = requirements {
        cmd.args(["--requirements", revision]);
    }
    let res = run_script(&format!("conformance {label}"), cmd, Duration::from_secs(300)).await;
    let checks = parse_conformance_dir(out);
    assert!(
        !checks.is_empty(),
        "conformance ({label}) wrote no checks.json under {} (exit {}).\n--- stdout ---\n{}--- stderr ---\n{}",
        out.display(),
        res.status,
        res.stdout,
        res.stderr
    );
    checks
}

/// Parses a conformance `-o` directory.
pub fn parse_conformance_dir(out: &Path) -> Vec<ConformanceCheck> {
    let mut checks = Vec::new();
    let Ok(entries) = std::fs::read_dir(out) else {
        return checks;
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    dirs.sort();
    for dir in dirs {
        let file = dir.join("checks.json");
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let scenario = scenario_name(&dir.file_name().unwrap_or_default().to_string_lossy());
        let list = json.as_array().cloned().unwrap_or_default();
        let mut seen: Vec<String> = Vec::new();
        for c in list {
            let base = c["id"].as_str().unwrap_or("?").to_owned();
            let n = seen.iter().filter(|s| **s == base).count();
            seen.push(base.clone());
            let id = if n == 0 { base } else { format!("{base}#{}", n + 1) };
            checks.push(ConformanceCheck {
                scenario: scenario.clone(),
                id,
                status: c["status"].as_str().unwrap_or("?").to_owned(),
                error: c["errorMessage"].as_str().map(str::to_owned),
                description: c["description"].as_str().map(str::to_owned),
                details: c.get("details").cloned(),
            });
        }
    }
    checks
}

/// `server-tools-call-simple-text-2026-12-01T00-52-55-245Z` → `tools-call-simple-text`.
fn scenario_name(dir: &str) -> String {
    let s = dir.strip_prefix("server-").unwrap_or(dir);
    // Cut at the first `-YYYY-MM-DDT`.
    let b = s.as_bytes();
    for i in 0..b.len() {
        let rest = &b[i..];
        if rest.len() >= 12
            && rest[0] == b'-'
            && rest[1..5].iter().all(u8::is_ascii_digit)
            && rest[5] == b'-'
            && rest[6..8].iter().all(u8::is_ascii_digit)
            && rest[8] == b'-'
            && rest[9..11].iter().all(u8::is_ascii_digit)
            && rest[11] == b'T'
        {
            return s[..i].to_owned();
        }
    }
    s.to_owned()
}

/// `N passed / M` for a run, plus the failed, warning and info counts when non-zero.
pub fn tally(checks: &[ConformanceCheck]) -> String {
    let count = |status: &str| checks.iter().filter(|c| c.status == status).count();
    let mut s = format!("{} passed / {}", count("SUCCESS"), checks.len());
    for (status, label) in [("FAILURE", "failed"), ("WARNING", "warnings"), ("INFO", "info")] {
        let n = count(status);
        if n > 0 {
            let _ = write!(s, ", {n} {label}");
        }
    }
    s
}

/// How one run compares with another, check by check.
#[derive(Debug, Default)]
pub struct Comparison {
    /// SUCCESS in the base run; FAILURE, WARNING, SKIPPED, anything unknown, or missing
    /// in the other.
    pub lost: Vec<Lost>,
    /// SUCCESS in the base run, INFO in the other: the suite's word for "optional
    /// behaviour not exercised", e.g. a server answering JSON where SSE is optional. Not a
    /// failure (the suite itself only fails on FAILURE and WARNING), but listed.
    pub info: Vec<String>,
    /// SUCCESS only in the other.
    pub gained: Vec<String>,
}

/// A check that passes in the base run but not in the other.
#[derive(Debug)]
pub struct Lost {
    /// `scenario/check-id`.
    pub key: String,
    /// `  scenario/check-id: STATUS: message`.
    pub line: String,
}

/// The lost checks, one line each.
pub fn lines(lost: &[Lost]) -> String {
    lost.iter().map(|l| l.line.as_str()).collect::<Vec<_>>().join("\n")
}

/// How `other` compares with `base`.
pub fn compare(base: &[ConformanceCheck], other: &[ConformanceCheck]) -> Comparison {
    let other_by_key: std::collections::BTreeMap<String, &ConformanceCheck> =
        other.iter().map(|c| (c.key(), c)).collect();
    let mut cmp = Comparison::default();
    for b in base {
        let o = other_by_key.get(&b.key());
        let line = |o: &ConformanceCheck| {
            let detail = o.error.as_deref().or(o.description.as_deref()).unwrap_or("(no message)");
            format!("  {}: {}: {}", b.key(), o.status, detail)
        };
        match o {
            None if b.passed() => cmp.lost.push(Lost { key: b.key(), line: format!("  {}: missing", b.key()) }),
            Some(o) if b.passed() && o.status == "INFO" => cmp.info.push(line(o)),
            Some(o) if b.passed() && !o.passed() => cmp.lost.push(Lost { key: b.key(), line: line(o) }),
            Some(o) if !b.passed() && o.passed() => cmp.gained.push(format!("  {}", b.key())),
            _ => {}
        }
    }
    cmp
}

/// A check's `details` (what the suite saw), on one line and cut to a readable length.
pub fn wire(check: Option<&ConformanceCheck>) -> String {
    let Some(details) = check.and_then(|c| c.details.as_ref()) else {
        return "(no details)".to_owned();
    };
    let text = details.to_string();
    match text.char_indices().nth(900) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// An upstream that passes the conformance suite's checks directly, so that a check lost
/// through seawall shows: on 127.0.0.1 and a free port, printing its URL as
/// `listening on http://127.0.0.1:PORT/mcp`.
pub struct ConformanceUpstream {
    /// Held for its `Drop`, which stops the process.
    _proc: Proc,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl ConformanceUpstream {
    /// `tests/interop/ts/conformance_server.mjs`, on the official TypeScript SDK: the
    /// legacy eras, with sampling and elicitation sent on the session's standalone GET
    /// stream as most TypeScript servers send them.
    pub async fn typescript(interop: &Interop) -> ConformanceUpstream {
        let script = interop.path("ts/conformance_server.mjs");
        let mut cmd = interop.node_command([script.as_os_str()]);
        cmd.env("PORT", "0");
        ConformanceUpstream::started("conformance_server.mjs", cmd).await
    }

    /// `tests/interop/python/everything_server.py`, on the official Python SDK: both eras
    /// on one endpoint; `args` as its command line takes them (`--listen-framing ndjson`).
    pub async fn python(interop: &Interop, args: &[&str]) -> ConformanceUpstream {
        let script = interop.path("python/everything_server.py");
        let mut cmd = interop.python_command([script.as_os_str()]);
        cmd.args(args);
        ConformanceUpstream::started("everything_server.py", cmd).await
    }

    async fn started(label: &str, cmd: tokio::process::Command) -> ConformanceUpstream {
        let mut proc = Proc::spawn(label, cmd);
        let url = proc
            .wait_for_line(Stream::Stdout, START_TIMEOUT, "`listening on http://...`", |l| {
                l.trim().strip_prefix("listening on ").map(|u| u.trim().to_owned())
            })
            .await;
        ConformanceUpstream { _proc: proc, url }
    }
}
