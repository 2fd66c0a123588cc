//! The gateway under test: a generated config and the running binary.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::Command;

use super::process::{Proc, Stream};
use super::{START_TIMEOUT, TestDir, seawall_bin};

/// One upstream entry of a generated config.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// `command: seawall`, `args: [demo-upstream, --stdio, EXTRA...]`.
    DemoStdio { name: String, per_session: bool, extra_args: Vec<String> },
    /// A stdio upstream running any command.
    Stdio { name: String, command: String, args: Vec<String>, per_session: bool },
    /// A Streamable HTTP upstream.
    Http { name: String, url: String },
    /// An HTTP+SSE (2024-11-05) upstream: `url` is its event stream.
    Sse { name: String, url: String },
}

impl Upstream {
    pub fn demo_stdio(name: &str, per_session: bool) -> Upstream {
        Upstream::DemoStdio { name: name.to_owned(), per_session, extra_args: Vec::new() }
    }

    pub fn http(name: &str, url: &str) -> Upstream {
        Upstream::Http { name: name.to_owned(), url: url.to_owned() }
    }

    pub fn sse(name: &str, url: &str) -> Upstream {
        Upstream::Sse { name: name.to_owned(), url: url.to_owned() }
    }
}

/// YAML for a config listening on port 0 with these upstreams and `extra` appended
/// verbatim at the top level (e.g. `"defaults:\n  timeouts:\n    tool_call: 5s\n"`).
pub fn config_yaml(upstreams: &[Upstream], extra: &str) -> String {
    // JSON strings are valid YAML double-quoted scalars.
    let q = |s: &str| serde_json::to_string(s).expect("string");
    let list = |v: &[String]| format!("[{}]", v.iter().map(|s| q(s)).collect::<Vec<_>>().join(", "));
    let mut y = String::from("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n");
    for u in upstreams {
        match u {
            Upstream::DemoStdio { name, per_session, extra_args } => {
                let mut args = vec!["demo-upstream".to_owned(), "--stdio".to_owned()];
                args.extend(extra_args.iter().cloned());
                let _ = writeln!(y, "  - name: {}\n    command: seawall\n    args: {}", q(name), list(&args));
                if *per_session {
                    y.push_str("    share: per_session\n");
                }
            }
            Upstream::Stdio { name, command, args, per_session } => {
                let _ = writeln!(y, "  - name: {}\n    command: {}\n    args: {}", q(name), q(command), list(args));
                if *per_session {
                    y.push_str("    share: per_session\n");
                }
            }
            Upstream::Http { name, url } => {
                let _ = writeln!(y, "  - name: {}\n    url: {}", q(name), q(url));
            }
            Upstream::Sse { name, url } => {
                let _ = writeln!(y, "  - name: {}\n    url: {}\n    transport: sse", q(name), q(url));
            }
        }
    }
    y.push_str(extra);
    y
}

/// A running gateway.
pub struct Seawall {
    pub proc: Proc,
    /// `http://127.0.0.1:PORT/mcp` (the aggregate endpoint).
    pub url: String,
    /// `http://127.0.0.1:PORT` of the admin listener.
    pub admin_url: String,
    pub config_path: PathBuf,
    /// Held for its `Drop`, which removes the directory.
    pub _dir: TestDir,
}

impl Seawall {
    /// Writes `config_yaml` to a temp dir and runs `seawall run --config FILE --listen
    /// 127.0.0.1:0 --admin-listen 127.0.0.1:0`, waiting for both `listening` lines.
    pub async fn start(config_yaml: &str) -> Seawall {
        Seawall::start_with_args(config_yaml, &[]).await
    }

    /// Like [`Seawall::start`], with extra command-line arguments.
    pub async fn start_with_args(config_yaml: &str, extra_args: &[&str]) -> Seawall {
        Seawall::start_with(config_yaml, extra_args, &[]).await
    }

    /// Like [`Seawall::start_with_args`], with environment variables. `OTEL_*` variables
    /// of the test's own environment are never passed on: only those in `env`.
    pub async fn start_with(config_yaml: &str, extra_args: &[&str], env: &[(&str, &str)]) -> Seawall {
        let dir = TestDir::new("seawall");
        let config_path = dir.write("seawall.yaml", config_yaml);
        let mut cmd = Command::new(seawall_bin());
        cmd.arg("run")
            .arg("--config")
            .arg(&config_path)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(extra_args)
            .current_dir(dir.path())
            .env("RUST_BACKTRACE", "1");
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("OTEL_") {
                cmd.env_remove(name);
            }
        }
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        cmd.envs(env.iter().copied());
        let mut proc = Proc::spawn("seawall", cmd);
        let mut url = None;
        let mut admin_url = None;
        while url.is_none() || admin_url.is_none() {
            let (kind, u) = proc
                .wait_for_line(Stream::Stdout, START_TIMEOUT, "its `listening` lines", |l| {
                    if let Some(u) = l.strip_prefix("seawall admin listening on ") {
                        Some(("admin", u.trim().to_owned()))
                    } else {
                        l.strip_prefix("seawall listening on ").map(|u| ("mcp", u.trim().to_owned()))
                    }
                })
                .await;
            if kind == "admin" {
                admin_url = Some(u);
            } else {
                url = Some(u);
            }
        }
        let url = url.expect("url");
        assert!(url.starts_with("http://127.0.0.1:"), "seawall listens on {url}, not loopback");
        Seawall { proc, url, admin_url: admin_url.expect("admin url"), config_path, _dir: dir }
    }

    /// `http://127.0.0.1:PORT/mcp/<upstream>`: one upstream, names unchanged.
    pub fn upstream_url(&self, upstream: &str) -> String {
        format!("{}/{upstream}", self.url.trim_end_matches('/'))
    }

    /// The admin listener's `/metrics` text.
    pub async fn metrics(&self) -> String {
        let response = reqwest::get(format!("{}/metrics", self.admin_url)).await.expect("GET /metrics");
        response.text().await.expect("the metrics text")
    }

    /// SIGTERM and wait for a clean exit (up to `grace`, then SIGKILL).
    pub async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.proc.stop(grace).await
    }
}
