//! What the "nothing leaks" suite (`tests/leaks.rs`) looks for in what it captured:
//! the planted needles (and raw bytes outside printable ASCII) in whatever a client
//! received, and the client's credentials in whatever an upstream received — every
//! byte seawall sent to the HTTP upstreams, and the environment and stdin of every
//! stdio upstream process, with the configured upstream credentials as the positive
//! control.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::leak_fronts::CLIENT_SECRETS;
use crate::support::planted;
use crate::support::tap::Tap;

/// One thing that should not have been where it was.
pub struct Leak {
    pub place: String,
    /// What was found: a planted item's label and needle, a client credential, or a raw byte.
    pub what: String,
    pub context: String,
}

impl std::fmt::Display for Leak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} in ...{:?}...", self.place, self.what, self.context)
    }
}

fn context(bytes: &[u8], at: usize, len: usize) -> String {
    let from = at.saturating_sub(60);
    String::from_utf8_lossy(&bytes[from..(at + len + 60).min(bytes.len())]).into_owned()
}

/// Every planted needle in `bytes`, and any byte outside printable ASCII but for line
/// ends and tabs (seawall escapes what it quotes).
pub fn planted_leaks(place: &str, bytes: &[u8]) -> Vec<Leak> {
    let mut out: Vec<Leak> = planted::leaks_in(bytes)
        .into_iter()
        .map(|(label, needle, context)| Leak {
            place: place.to_owned(),
            what: format!("{label} ({needle:?})"),
            context,
        })
        .collect();
    let printable = |b: u8| b == b'\r' || b == b'\n' || b == b'\t' || (0x20..0x7f).contains(&b);
    if let Some(at) = bytes.iter().position(|&b| !printable(b)) {
        out.push(Leak {
            place: place.to_owned(),
            what: "a raw byte outside printable ASCII".into(),
            context: context(bytes, at, 1),
        });
    }
    out
}

/// What the inspection found, and how much it read.
#[derive(Default)]
pub struct Findings {
    pub leaks: Vec<Leak>,
    pub bytes_to_clients: usize,
    pub bytes_to_upstreams: usize,
}

impl Findings {
    pub fn planted(&mut self, place: &str, bytes: &[u8]) {
        self.leaks.extend(planted_leaks(place, bytes));
    }

    /// Every client secret in `bytes` (what `place` received or holds).
    pub fn credentials(&mut self, place: &str, bytes: &[u8]) {
        for (label, secret) in CLIENT_SECRETS {
            if let Some(at) = planted::find(bytes, secret) {
                let what = format!("the client's {label}");
                self.leaks.push(Leak { place: place.to_owned(), what, context: context(bytes, at, secret.len()) });
            }
        }
    }
}

impl Findings {
    /// Panics with the leaks grouped by place and kind, each one written to `file`.
    pub fn assert_none(&self, file: &Path) {
        if self.leaks.is_empty() {
            return;
        }
        let lines: Vec<String> = self.leaks.iter().map(Leak::to_string).collect();
        let _ = std::fs::write(file, lines.join("\n"));
        let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
        for leak in &self.leaks {
            *by_kind.entry(format!("{}: {}", leak.place, leak.what)).or_default() += 1;
        }
        let by_kind: Vec<String> = by_kind.into_iter().map(|(k, n)| format!("{n:5} {k}")).collect();
        panic!("{} leaks (each in {}):\n{}", self.leaks.len(), file.display(), by_kind.join("\n"));
    }
}

/// How often `needle` occurs in `hay`, ignoring ASCII case.
pub fn count(hay: &[u8], needle: &str) -> usize {
    String::from_utf8_lossy(hay).to_ascii_lowercase().matches(&needle.to_ascii_lowercase()).count()
}

/// What seawall sent to the HTTP upstreams: no client credential, and the configured
/// header on every request.
pub fn inspect_http_upstreams(tap: &Tap, header: (&str, &str), findings: &mut Findings) -> usize {
    let mut requests = 0;
    for conversation in tap.conversations() {
        let sent = &conversation.sent;
        findings.bytes_to_upstreams += sent.len();
        let heads = count(sent, " HTTP/1.1\r\n");
        let configured = count(sent, &format!("\r\n{}: {}\r\n", header.0, header.1));
        assert_eq!(heads, configured, "every request to an HTTP upstream carries the configured header");
        requests += heads;
    }
    for view in tap.views(true) {
        findings.credentials("bytes seawall sent to an HTTP upstream", &view);
    }
    requests
}

/// The environment and stdin of every stdio upstream process: no client credential,
/// the configured variable in every environment.
pub fn inspect_stdio_upstreams(records: &Path, env_var: (&str, &str), findings: &mut Findings) -> usize {
    let (mut processes, mut requests) = (0, 0);
    let entries = std::fs::read_dir(records).expect("records");
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let bytes = std::fs::read(&path).unwrap_or_default();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        findings.bytes_to_upstreams += bytes.len();
        if name.starts_with("env-") {
            processes += 1;
            let env: BTreeMap<String, String> = serde_json::from_slice(&bytes).expect("env record");
            assert_eq!(env.get(env_var.0).map(String::as_str), Some(env_var.1), "{name}");
            findings.credentials(&format!("environment of stdio upstream ({name})"), &bytes);
        } else {
            requests += count(&bytes, "\"method\"");
            findings.credentials(&format!("stdin of stdio upstream ({name})"), &bytes);
        }
    }
    assert!(requests > 0, "the stdio upstreams' stdin was recorded");
    processes
}
