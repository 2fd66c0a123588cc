//! Throughput and latency of `tools/call` directly against the demo upstream versus
//! through seawall, measured in one run on this machine, plus seawall's CPU time per
//! call and its memory. A second gateway runs the whole policy stack (an API key, an
//! authorisation rule under `default: deny`, a rate limit per principal, the
//! per-principal caps and CORS); its CPU time per call is compared with the default
//! gateway's in runs side by side, so that both see the same load from the rest of the
//! machine. A third runs with tracing on, every trace sampled, exporting over OTLP/HTTP
//! to a receiver inside the bench, and is compared with the default one the same way.
//!
//! `cargo bench --bench gateway` (or `cargo bench`). Figures are ratios of runs made
//! back to back under the same load; absolute numbers depend on the machine.
//! `SEAWALL_BENCH_BIN=/path/to/seawall` runs that binary as the gateway; the demo
//! upstreams (HTTP and stdio) are always the binary cargo built, so two gateways can be
//! compared against the same upstream.

// The integration tests' helpers; the bench uses a part of each.
#[allow(dead_code)]
#[path = "../tests/it/support/mcp_client.rs"]
mod mcp_client;
#[allow(dead_code)]
#[path = "../tests/it/support/otlp.rs"]
mod otlp;

use std::process::Stdio;
use std::time::{Duration, Instant};

use mcp_client::Client;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const WARMUP: Duration = Duration::from_millis(500);
const RUN: Duration = Duration::from_secs(3);
const DEMO_BIN: &str = env!("CARGO_BIN_EXE_seawall");
/// Runs of the default and the policy gateway side by side per concurrency, and the
/// length of each.
const POLICY_ROUNDS: usize = 6;
const POLICY_RUN: Duration = Duration::from_secs(2);
/// The API key of the policy gateway's one principal.
const BENCH_KEY: &str = "bench-key-0123456789abcdef";

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

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Drives `a` and `b` at the same time, `POLICY_ROUNDS` times (alternating which starts
/// first), and returns their CPU times and p50 latencies per call, run by run.
async fn side_by_side(a: &Target<'_>, b: &Target<'_>, concurrency: usize) -> Paired {
    let mut paired = Paired::default();
    for round in 0..POLICY_ROUNDS {
        let (fa, fb) = if round % 2 == 0 {
            tokio::join!(load(a, concurrency, POLICY_RUN), load(b, concurrency, POLICY_RUN))
        } else {
            let (fb, fa) = tokio::join!(load(b, concurrency, POLICY_RUN), load(a, concurrency, POLICY_RUN));
            (fa, fb)
        };
        paired.cpu.0.push(fa.cpu_us_per_call().unwrap_or(0.0));
        paired.cpu.1.push(fb.cpu_us_per_call().unwrap_or(0.0));
        paired.p50.0.push(fa.percentile(0.5).as_secs_f64() * 1e6);
        paired.p50.1.push(fb.percentile(0.5).as_secs_f64() * 1e6);
        paired.calls += fb.requests;
    }
    paired
}

/// Per-run figures of two targets driven side by side: (first, second).
#[derive(Default)]
struct Paired {
    cpu: (Vec<f64>, Vec<f64>),
    p50: (Vec<f64>, Vec<f64>),
    /// Calls answered by the second target.
    calls: u64,
}

/// Prints one comparison of `what` (µs): medians, their ratio, and the median of the
/// per-pair differences.
fn compare(concurrency: usize, what: &str, (off, on): &(Vec<f64>, Vec<f64>), labels: (&str, &str)) {
    let (off_us, on_us) = (median(off.clone()), median(on.clone()));
    let paired = median(on.iter().zip(off).map(|(on, off)| on - off).collect());
    println!(
        "  concurrency {concurrency:>2}, {what}: {} {off_us:.1}µs, {} {on_us:.1}µs, difference {:+.1}µs ({:+.1} %, ratio {:.3}), per pair {paired:+.1}µs",
        labels.0,
        labels.1,
        on_us - off_us,
        (on_us / off_us - 1.0) * 100.0,
        on_us / off_us,
    );
    println!("    runs {:<3} {}\n    runs {:<3} {}", labels.0, runs(off), labels.1, runs(on));
}

fn runs(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.1}")).collect::<Vec<_>>().join("/")
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

/// What a run drives: `tool` at `url`, with `token` as a bearer token when given;
/// `gateway` is the pid whose CPU time is read around the measured run.
struct Target<'a> {
    url: String,
    tool: &'a str,
    gateway: Option<u32>,
    token: Option<&'a str>,
}

impl<'a> Target<'a> {
    fn new(url: &str, tool: &'a str, gateway: Option<u32>) -> Target<'a> {
        Target { url: url.to_owned(), tool, gateway, token: None }
    }

    fn with_token(self, token: &'a str) -> Target<'a> {
        Target { token: Some(token), ..self }
    }
}

/// Drive `target` at `concurrency` for `WARMUP`, then for `duration`.
async fn load(target: &Target<'_>, concurrency: usize, duration: Duration) -> Figures {
    let (url, tool, gateway) = (target.url.as_str(), target.tool, target.gateway);
    let client = || match target.token {
        Some(token) => Client::with_bearer(url, token),
        None => Client::new(url),
    };
    let clients: Vec<Client> =
        futures::future::join_all((0..concurrency).map(|_| client().initialize(json!({})))).await;
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
    let (latencies, elapsed) = run(duration).await;
    let cpu = gateway.zip(cpu_before).map(|(pid, before)| cpu_time(pid).saturating_sub(before));
    // Sessions end with their run, so that runs do not fill the session table.
    futures::future::join_all(clients.iter().filter(|c| c.session.is_some()).map(Client::delete)).await;
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
    // The same gateway with the whole policy stack on, in front of the same upstream.
    let policy_config = dir.join("bench-policy.yaml");
    std::fs::write(
        &policy_config,
        format!(
            "listen: 127.0.0.1:0\nadmin_listen: null\ndefaults:\n  concurrency: {{ max_in_flight: 1024, queue: 1024 }}\n\
             session: {{ max_sessions_per_principal: 1024 }}\nlimits: {{ max_in_flight_per_principal: 1024 }}\n\
             security:\n  cors: {{ allowed_origins: ['https://app.example'] }}\n\
             auth:\n  api_keys: [{{ name: bench, key: {BENCH_KEY} }}]\n\
             authorization:\n  default: deny\n  rules: [{{ principals: [bench], allow: {{ tools: ['*'] }} }}]\n\
             rate_limits:\n  limits: [{{ per: principal, rate: 1000000/s }}]\n\
             upstreams:\n  - name: remote\n    url: {demo_url}\n"
        ),
    )
    .expect("policy config");
    let (policy_gw, policy_url) =
        spawn(&gateway_bin, &["run", "--config", policy_config.to_str().expect("utf-8 path")], "seawall listening on ")
            .await;
    let policy_pid = Some(policy_gw.id().expect("pid"));
    // The same gateway with tracing on: every trace sampled, exported to a receiver here.
    let collector = otlp::Collector::start(false, otlp::Behaviour::Count).await;
    let traced_config = dir.join("bench-traced.yaml");
    std::fs::write(
        &traced_config,
        format!(
            "listen: 127.0.0.1:0\nadmin_listen: null\ndefaults:\n  concurrency: {{ max_in_flight: 1024, queue: 1024 }}\n\
             tracing: {{ enabled: true, endpoint: {}, sample_ratio: 1.0, batch_delay: 200ms }}\n\
             upstreams:\n  - name: remote\n    url: {demo_url}\n",
            collector.url
        ),
    )
    .expect("traced config");
    let (traced_gw, traced_url) =
        spawn(&gateway_bin, &["run", "--config", traced_config.to_str().expect("utf-8 path")], "seawall listening on ")
            .await;
    let traced_pid = Some(traced_gw.id().expect("pid"));

    println!("tools/call echo, {} s per run, one machine, back to back; gateway {gateway_bin}", RUN.as_secs());
    println!("{:<34} {:>4} {:>10} {:>10} {:>10} {:>14}", "path", "conc", "req/s", "p50", "p99", "seawall CPU");
    let mut comparisons = Vec::new();
    let mut traced_comparisons = Vec::new();
    let policy_off = Target::new(&format!("{gw_url}/remote"), "echo", measured);
    let policy_on = Target::new(&format!("{policy_url}/remote"), "echo", policy_pid).with_token(BENCH_KEY);
    let traced = Target::new(&format!("{traced_url}/remote"), "echo", traced_pid);
    for concurrency in [1, 16] {
        let direct = load(&Target::new(&demo_url, "echo", None), concurrency, RUN).await;
        let single = load(&policy_off, concurrency, RUN).await;
        let policy = load(&policy_on, concurrency, RUN).await;
        let aggregate = load(&Target::new(&gw_url, "remote__echo", measured), concurrency, RUN).await;
        let stdio = load(&Target::new(&gw_url, "local__echo", measured), concurrency, RUN).await;
        for (name, f) in [
            ("direct (demo over HTTP)", &direct),
            ("seawall /mcp/remote (HTTP)", &single),
            ("  the same, policy stack on", &policy),
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
        // Policy off and on at the same time, each at this concurrency, so that both see
        // the same load from the rest of the machine; which one starts first alternates.
        let paired = side_by_side(&policy_off, &policy_on, concurrency).await;
        comparisons.push((concurrency, paired.cpu.0, paired.cpu.1));
        // Tracing off and on, the same way.
        traced_comparisons.push((concurrency, side_by_side(&policy_off, &traced, concurrency).await));
    }
    println!(
        "seawall CPU per call on /mcp/remote, policy off vs on ({POLICY_ROUNDS} runs of {:.1} s side by side; medians):",
        POLICY_RUN.as_secs_f64()
    );
    for (concurrency, off, on) in comparisons {
        let (off_us, on_us) = (median(off.clone()), median(on.clone()));
        let paired = median(on.iter().zip(&off).map(|(on, off)| on - off).collect());
        println!(
            "  concurrency {concurrency:>2}: off {off_us:.1}µs/call, on {on_us:.1}µs/call, difference {:+.1}µs/call ({:+.1} %), per pair {paired:+.1}µs/call",
            on_us - off_us,
            (on_us / off_us - 1.0) * 100.0,
        );
        println!("    runs off {}\n    runs on  {}", runs(&off), runs(&on));
    }
    println!(
        "seawall CPU and p50 latency per call on /mcp/remote, tracing off vs on (every trace sampled, OTLP/HTTP to a receiver in the bench; {POLICY_ROUNDS} runs of {:.1} s side by side; medians):",
        POLICY_RUN.as_secs_f64()
    );
    let mut traced_calls = 0;
    for (concurrency, paired) in &traced_comparisons {
        compare(*concurrency, "CPU per call", &paired.cpu, ("off", "on"));
        compare(*concurrency, "p50 latency", &paired.p50, ("off", "on"));
        traced_calls += paired.calls;
    }
    // Let the last batch go before counting what the receiver got.
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "  the receiver got {} spans; the traced gateway answered {traced_calls} calls in the measured runs (their warm-ups not counted)",
        collector.counted()
    );
    println!("seawall RSS: {} KiB idle, {} KiB after the runs", rss_idle, rss_kib(gw_pid));
    let _ = std::fs::remove_dir_all(&dir);
}
