//! A real Prometheus server (Debian's `prometheus`, which `tests/run` installs when it is
//! missing) on a free loopback port, scraping one target every second and evaluating a
//! rule file every second, with its HTTP API for queries.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use super::TestDir;
use super::process::{Proc, Stream};

/// A running Prometheus; dropping it stops the process.
pub struct Prometheus {
    /// Held for its `Drop`, which stops the process.
    _proc: Proc,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    http: reqwest::Client,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (`host:port`, path `/metrics`) with the rules
    /// in `rules` (a rule file's text), keeping its data under `dir`.
    pub async fn start(dir: &TestDir, target: &str, rules: &str) -> Prometheus {
        let rules_path = dir.write("rules.yaml", rules);
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: seawall\n    static_configs:\n      - targets: ['{target}']\n",
            rules_path.display()
        );
        let config_path = dir.write("prometheus.yml", &config);
        // Prometheus cannot report a port it chose: use one the OS just handed out.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
            listener.local_addr().expect("local addr").port()
        };
        let mut cmd = Command::new(prometheus_binary("prometheus"));
        cmd.arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=info");
        let mut proc = Proc::spawn("prometheus", cmd);
        proc.wait_for_line(Stream::Stderr, Duration::from_secs(30), "Server is ready", |l| {
            l.contains("Server is ready to receive web requests").then_some(())
        })
        .await;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
        Prometheus { _proc: proc, url: format!("http://127.0.0.1:{port}"), http }
    }

    /// The `data` of an API answer at `path` (e.g. `/api/v1/alerts`), which must succeed.
    pub async fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let url = reqwest::Url::parse_with_params(&format!("{}{path}", self.url), query).expect("API URL");
        let resp = self.http.get(url).send().await.expect("Prometheus API");
        let text = resp.text().await.expect("Prometheus API answer");
        let body: Value = serde_json::from_str(&text).expect("Prometheus API JSON");
        assert_eq!(body["status"], "success", "{path} {query:?}: {body}");
        body["data"].clone()
    }

    /// The result vector of an instant query.
    pub async fn query(&self, promql: &str) -> Vec<Value> {
        let data = self.api("/api/v1/query", &[("query", promql)]).await;
        data["result"].as_array().cloned().unwrap_or_default()
    }
}

/// `promtool` and `prometheus` from the system, with a clear message when missing.
pub fn prometheus_binary(name: &str) -> String {
    for dir in ["/usr/bin", "/usr/local/bin"] {
        let path = Path::new(dir).join(name);
        if path.exists() {
            return path.display().to_string();
        }
    }
    panic!("{name} not found: install Debian's `prometheus` package (bash tests/run does)");
}
