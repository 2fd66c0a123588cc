//! Throughput and latency of `tools/call` directly against the demo upstream versus
//! through seawall, measured in one run on this machine, plus seawall's CPU time per
//! call and its memory.
//!
//! `cargo bench --bench gateway` (or `cargo bench`). Figures are ratios of runs made
//! back to back under the same load; absolute numbers depend on the machine.
//! `SEAWALL_BENCH_BIN=/path/to/seawall` runs that binary as the gateway; the demo
//! upstreams (HTTP and stdio) are always the binary cargo built, so two gateways can be
//! compared against the same upstream.

#[path = "../tests/support/mcp_client.rs"]
mod mcp_client;

use std::process::Stdio;
use std::time::{Duration, Instant};

use mcp_client::Client;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const WARMUP: Duration = Duration::from_millis(500);
const RUN: Duration = Duration::from_secs(3);
const DEMO_BIN: &str = env!("CARGO_BIN_EXE_seawall");

struct Figures {
    requests: u64,
    elapsed: Duration,
    latencies: Vec<Duration>,
    /// CPU time the gateway spent during the run, when a gateway was measured.
    cpu: Option<Duration>,
}

impl Figures {
    fn rps(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
    fn cpu_us_per_call(&self) -> Option<f64> {
        Some(self.cpu?.as_secs_f64() * 1e6 / self.requests as f64)
    }
    fn percentile(&self, p: f64) -> Duration {
        let mut l = self.latencies.clone();
        l.sort();
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1))).copied().unwrap_or_default()
    }
}

async fn spawn(bin: &str, args: &[&str], prefix: &str) -> (Child, String) {
    let mut child = Command::new(bin)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn seawall");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(url) = line.strip_prefix(prefix) {
                return url.trim().to_owned();
            }
        }
        panic!("no `{prefix}` line");
    })
    .await
    .expect("started in time");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time of process `pid` so far: the sum of its threads' nanoseconds on CPU from
/// `/proc/PID/task/*/schedstat` (`/proc/PID/schedstat` counts the main thread only), or
/// utime+stime from `/proc/PID/stat` in clock ticks where schedstat is missing.
fn cpu_time(pid: u32) -> Duration {
    let from_schedstat = std::fs::read_dir(format!("/proc/{pid}/task")).ok().and_then(|tasks| {
        tasks
            .map(|t| {
                let s = std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok()?;
                s.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum::<Option<u64>>()
    });
    if let Some(ns) = from_schedstat {
        return Duration::from_nanos(ns);
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the `(comm)`, which may hold spaces: state is field 3, utime 14, stime 15.
    let fields: Vec<u64> =
        stat.rsplit_once(')').expect("stat").1.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
    let ticks = fields[11] + fields[12];
    let getconf = std::process::Command::new("getconf").arg("CLK_TCK").output();
    let hz = getconf.ok().and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok()).unwrap_or(100u64);
    Duration::from_nanos(ticks * 1_000_000_000 / hz)
}

/// Drive `tool` at `concurrency` for `WARMUP`, then for `RUN`; `gateway` is the pid whose
/// CPU time is read around the measured run.
async fn load(url: &str, tool: &str, concurrency: usize, gateway: Option<u32>) -> Figures {
    let clients: Vec<Client> =
        futures::future::join_all((0..concurrency).map(|_| Client::connect(url, json!({})))).await;
    let run = |duration: Duration| {
        let clients = clients.clone();
        let tool = tool.to_owned();
        async move {
            let started = Instant::now();
            let tasks = clients.into_iter().map(|c| {
                let tool = tool.clone();
                tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    let mut id = 0u64;
                    while started.elapsed() < duration {
                        id += 1;
                        let t = Instant::now();
                        let r =
                            c.request(id, "tools/call", json!({"name": tool, "arguments": {"message": "bench"}})).await;
                        assert_eq!(r.status, 200);
                        latencies.push(t.elapsed());
                    }
                    latencies
                })
            });
            let mut latencies = Vec::new();
            for t in futures::future::join_all(tasks).await {
                latencies.extend(t.expect("client task"));
            }
            (latencies, started.elapsed())
        }
    };
    run(WARMUP).await;
    let cpu_before = gateway.map(cpu_time);
    let (latencies, elapsed) = run(RUN).await;
    let cpu = gateway.zip(cpu_before).map(|(pid, before)| cpu_time(pid).saturating_sub(before));
    Figures { requests: latencies.len() as u64, elapsed, latencies, cpu }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("gateway benchmark: run it with `cargo bench --bench gateway`");
        return;
    }
    let gateway_bin = std::env::var("SEAWALL_BENCH_BIN").unwrap_or_else(|_| DEMO_BIN.to_owned());
    let (_demo, demo_url) = spawn(DEMO_BIN, &["demo-upstream", "--listen", "127.0.0.1:0"], "listening on ").await;
    let dir = std::env::temp_dir().join(format!("seawall-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("bench.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:0\nadmin_listen: null\ndefaults:\n  concurrency: {{ max_in_flight: 1024, queue: 1024 }}\nupstreams:\n  - name: remote\n    url: {demo_url}\n  - name: local\n    command: {}\n    args: [demo-upstream, --stdio]\n",
            json!(DEMO_BIN)
        ),
    )
    .expect("config");
    let (gw, gw_url) =
        spawn(&gateway_bin, &["run", "--config", config.to_str().expect("utf-8 path")], "seawall listening on ").await;
    let gw_pid = gw.id().expect("pid");
    let measured = Some(gw_pid);
    let rss_idle = rss_kib(gw_pid);

    println!("tools/call echo, {} s per run, one machine, back to back; gateway {gateway_bin}", RUN.as_secs());
    println!("{:<34} {:>4} {:>10} {:>10} {:>10} {:>14}", "path", "conc", "req/s", "p50", "p99", "seawall CPU");
    for concurrency in [1, 16] {
        let direct = load(&demo_url, "echo", concurrency, None).await;
        let single = load(&format!("{gw_url}/remote"), "echo", concurrency, measured).await;
        let aggregate = load(&gw_url, "remote__echo", concurrency, measured).await;
        let stdio = load(&gw_url, "local__echo", concurrency, measured).await;
        for (name, f) in [
            ("direct (demo over HTTP)", &direct),
            ("seawall /mcp/remote (HTTP)", &single),
            ("seawall /mcp remote__echo", &aggregate),
            ("seawall /mcp local__echo (stdio)", &stdio),
        ] {
            let cpu = f.cpu_us_per_call().map_or_else(|| "-".to_owned(), |us| format!("{us:.1}µs/call"));
            println!(
                "{name:<34} {concurrency:>4} {:>10.0} {:>8.2}ms {:>8.2}ms {cpu:>14}",
                f.rps(),
                f.percentile(0.5).as_secs_f64() * 1e3,
                f.percentile(0.99).as_secs_f64() * 1e3
            );
        }
        println!(
            "  ratio through/direct at concurrency {concurrency}: throughput {:.2}, p50 latency {:.2}",
            single.rps() / direct.rps(),
            single.percentile(0.5).as_secs_f64() / direct.percentile(0.5).as_secs_f64()
        );
    }
    println!("seawall RSS: {} KiB idle, {} KiB after the runs", rss_idle, rss_kib(gw_pid));
    let _ = std::fs::remove_dir_all(&dir);
}
