//! seawall next to nginx and next to no proxy at all, in one run on this machine:
//! `tools/call echo` at 16 connections closed-loop and at 500 req/s
//! open-loop against the upstream directly, through nginx as a plain reverse proxy,
//! and through seawall (`/mcp/<upstream>` and the aggregated `/mcp`) with its default
//! stack; then seawall's memory per idle session, an aggregated `tools/list` over 10
//! upstreams of 200 tools, and a stdio upstream under 16 callers. Every answer is
//! checked (its id, and the text it echoes); any wrong answer fails the run.
//!
//! `scripts/bench` builds, installs nginx when missing and runs this
//! (`cargo bench --bench side_by_side`); `--quick` shortens every run for a smoke test.
//! The upstream is the bench's own echo server (`echo.rs`, one thread), so that it is
//! never what limits a run; the demo upstream is measured directly for comparison.
//! `SEAWALL_BENCH_BIN=/path/to/seawall` measures that binary as the gateway;
//! `SEAWALL_BENCH_BASELINE=/path/to/another/seawall` adds that one as a row of the same
//! rounds (a change's before and after in one run), `SEAWALL_BENCH_ROUNDS=N` sets the
//! rounds of the closed-loop runs, and `--calls-only` skips all but the proxied calls.

mod client;
mod echo;
mod load;
mod plot;
mod procs;
mod report;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use client::Endpoint;
use load::{Figures, Target, Watched};
use procs::Proc;
use report::{Report, Row};

const SEAWALL_BIN: &str = env!("CARGO_BIN_EXE_seawall");
/// Connections of the closed-loop runs and of the open-loop ones.
const CONNECTIONS: usize = 16;
/// The open-loop rate, calls per second.
const OPEN_RATE: f64 = 500.0;
/// Upstreams and tools per upstream of the aggregated `tools/list`.
const LIST_UPSTREAMS: usize = 10;
const LIST_TOOLS: usize = 200;
/// Idle sessions opened to measure what one costs.
const SESSIONS: usize = 10_000;
/// A pause between runs, for the last run's connections to close.
const PAUSE: Duration = Duration::from_millis(200);
/// The row of the demo upstream measured directly, closed-loop only.
const DEMO_ROW: &str = "direct, demo upstream";
/// The row of a gateway with one worker thread (`workers: 1`), as nginx runs one worker
/// process: the two proxies on equal terms, each an event loop on one thread.
const ONE_WORKER_ROW: &str = "seawall /mcp/echo, 1 worker";

/// How long each part runs. The closed- and open-loop runs go in rounds, each round
/// driving every target once in turn, so that whatever else loads the machine meanwhile
/// falls on every target alike; a target's figures are those of all its rounds.
pub struct Durations {
    pub rounds: usize,
    pub warmup: Duration,
    pub closed: Duration,
    pub open_rounds: usize,
    pub open: Duration,
    list_calls: usize,
    /// Only the proxied calls (`--calls-only`): a quicker comparison of builds.
    calls_only: bool,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("echo-server") {
        let tools = args.iter().position(|a| a == "--tools").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(1);
        return match echo::run(tools) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("echo server: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if !args.iter().any(|a| a == "--bench") {
        println!("side-by-side benchmark: run it with `scripts/bench` or `cargo bench --bench side_by_side`");
        return ExitCode::SUCCESS;
    }
    let mut durations = if args.iter().any(|a| a == "--quick") {
        Durations {
            rounds: 1,
            warmup: Duration::from_millis(300),
            closed: Duration::from_secs(1),
            open_rounds: 1,
            open: Duration::from_secs(2),
            list_calls: 50,
            calls_only: false,
        }
    } else {
        Durations {
            rounds: 3,
            warmup: Duration::from_millis(500),
            closed: Duration::from_secs(2),
            open_rounds: 5,
            open: Duration::from_secs(2),
            list_calls: 300,
            calls_only: false,
        }
    };
    durations.calls_only = args.iter().any(|a| a == "--calls-only");
    if let Some(rounds) = std::env::var("SEAWALL_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()) {
        durations.rounds = rounds;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let wrong = runtime.block_on(run(&durations));
    if wrong > 0 {
        println!("\nFAILED: {wrong} wrong answers (see above)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The whole run; returns the number of wrong answers.
async fn run(d: &Durations) -> u64 {
    let dir = std::env::temp_dir().join(format!("seawall-side-by-side-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let wrong = measure(d, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    wrong
}

/// The binaries a run starts: this bench (whose `echo-server` is the upstream) and the
/// gateway.
struct Bins {
    me: PathBuf,
    gateway: PathBuf,
}

async fn measure(d: &Durations, dir: &Path) -> u64 {
    let bins = Bins {
        me: std::env::current_exe().expect("own path"),
        gateway: PathBuf::from(std::env::var("SEAWALL_BENCH_BIN").unwrap_or_else(|_| SEAWALL_BIN.to_owned())),
    };
    let mut report = Report::new(&bins.gateway);
    proxied_calls(d, dir, &bins, &mut report).await;
    if !d.calls_only {
        aggregated_list(d, dir, &bins, &mut report).await;
        stdio_upstream(d, dir, &bins, &mut report).await;
        idle_sessions(dir, &bins, &mut report).await;
    }
    // A partial run's plot is not the one the docs show.
    let plot = if d.calls_only { "target/bench/calls-only-latency.svg" } else { "dashboards/bench-latency.svg" };
    report.finish(&Path::new(env!("CARGO_MANIFEST_DIR")).join(plot))
}

/// `tools/call echo` directly, through nginx and through seawall: closed-loop, then
/// open-loop, in rounds.
async fn proxied_calls(d: &Durations, dir: &Path, bins: &Bins, report: &mut Report) {
    let (echo, echo_url) = start_echo(bins, dir, 1);
    let (demo, demo_url) = Proc::start(
        "demo upstream",
        Path::new(SEAWALL_BIN),
        &["demo-upstream", "--listen", "127.0.0.1:0"],
        &dir.join("demo.log"),
        "listening on ",
    );
    let echo_ep = Endpoint::parse(&echo_url);
    let nginx = start_nginx(dir, &echo_ep);
    let (gw, gw_url) = start_gateway(&bins.gateway, dir, "seawall", &single_upstream(&echo_url, ""));
    tokio::time::sleep(Duration::from_millis(500)).await;
    report.idle_rss_kib = procs::status_kib(&[gw.pid()], "VmRSS");
    let gw_ep = Endpoint::parse(&gw_url);

    let target = |endpoint: Endpoint, tool: &str| Target { endpoint, tool: tool.to_owned() };
    let via = |proxy: &Proc| Watched { proxy: proxy.family(), upstream: vec![echo.pid()] };
    let mut rows: Vec<(Row, Target, Watched)> = vec![
        (
            Row::new("direct", None),
            target(echo_ep.clone(), "echo"),
            Watched { proxy: vec![], upstream: vec![echo.pid()] },
        ),
        (
            Row::new(DEMO_ROW, None),
            target(Endpoint::parse(&demo_url), "echo"),
            Watched { proxy: vec![], upstream: vec![demo.pid()] },
        ),
    ];
    if let Some((proc, ep)) = &nginx {
        rows.push((Row::new("nginx", Some(proc.family())), target(ep.clone(), "echo"), via(proc)));
    }
    let seawall = Some(vec![gw.pid()]);
    rows.push((Row::new("seawall /mcp/echo", seawall.clone()), target(gw_ep.at("/mcp/echo"), "echo"), via(&gw)));
    rows.push((Row::new("seawall /mcp", seawall), target(gw_ep.clone(), "echo__echo"), via(&gw)));
    let (one, one_url) =
        start_gateway(&bins.gateway, dir, "seawall-1-worker", &single_upstream(&echo_url, "workers: 1\n"));
    let one_ep = Endpoint::parse(&one_url).at("/mcp/echo");
    rows.push((Row::new(ONE_WORKER_ROW, Some(vec![one.pid()])), target(one_ep, "echo"), via(&one)));
    // Another build of seawall, measured in the same rounds: a change's before and after.
    let baseline = std::env::var_os("SEAWALL_BENCH_BASELINE")
        .map(|bin| start_gateway(Path::new(&bin), dir, "seawall-baseline", &single_upstream(&echo_url, "")));
    if let Some((base, base_url)) = &baseline {
        let ep = Endpoint::parse(base_url).at("/mcp/echo");
        rows.push((Row::new("baseline /mcp/echo", Some(vec![base.pid()])), target(ep, "echo"), via(base)));
    }

    let all: Vec<_> = rows.iter().map(|(_, t, w)| (t, w)).collect();
    let closed = in_rounds(d.rounds, &all, |t, w| load::closed_loop(t, CONNECTIONS, d.warmup, d.closed, w)).await;
    report.begin_closed(d);
    for ((row, _, _), figures) in rows.iter_mut().zip(closed) {
        row.peak_rss_kib = row.proxy.as_ref().map(|pids| procs::status_kib(pids, "VmHWM"));
        report.closed(row, figures);
    }

    // The demo upstream was there to show why the echo server stands in for it.
    let open_rows: Vec<_> = rows.iter().filter(|(row, _, _)| row.name != DEMO_ROW).collect();
    let some: Vec<_> = open_rows.iter().map(|(_, t, w)| (t, w)).collect();
    let open =
        in_rounds(d.open_rounds, &some, |t, w| load::open_loop(t, OPEN_RATE, CONNECTIONS, d.warmup, d.open, w)).await;
    report.begin_open(d);
    for ((row, _, _), figures) in open_rows.iter().zip(open) {
        report.open(&row.name, figures);
    }
}

/// Runs `run` on every target in turn, `rounds` times; the figures of each target, all
/// its rounds merged.
async fn in_rounds<'a, F, Fut>(rounds: usize, targets: &[(&'a Target, &'a Watched)], run: F) -> Vec<Figures>
where
    F: Fn(&'a Target, &'a Watched) -> Fut,
    Fut: std::future::Future<Output = Figures>,
{
    let mut figures: Vec<Figures> = targets.iter().map(|_| Figures::default()).collect();
    for _ in 0..rounds {
        for ((target, watched), merged) in targets.iter().zip(&mut figures) {
            merged.merge(run(target, watched).await);
            tokio::time::sleep(PAUSE).await;
        }
    }
    figures
}

/// `tools/list` over 10 upstreams of 200 tools each, all served by one echo server.
async fn aggregated_list(d: &Durations, dir: &Path, bins: &Bins, report: &mut Report) {
    let (_many, many_url) = start_echo(bins, dir, LIST_TOOLS);
    let upstreams: String = (0..LIST_UPSTREAMS).map(|n| format!("  - name: u{n}\n    url: {many_url}\n")).collect();
    let (_gw, gw_url) = start_gateway(&bins.gateway, dir, "seawall-lists", &format!("upstreams:\n{upstreams}"));
    let direct_names = ["echo".to_owned(), "tool_".to_owned()];
    let direct = load::list_tools(&Endpoint::parse(&many_url), 20, d.list_calls, LIST_TOOLS, &direct_names).await;
    let prefixes: Vec<String> = (0..LIST_UPSTREAMS).map(|n| format!("u{n}__")).collect();
    let through =
        load::list_tools(&Endpoint::parse(&gw_url), 20, d.list_calls, LIST_UPSTREAMS * LIST_TOOLS, &prefixes).await;
    report.lists(direct, through);
    // The other build, in front of the same upstreams, right after.
    if let Some(bin) = std::env::var_os("SEAWALL_BENCH_BASELINE") {
        let config = format!("upstreams:\n{upstreams}");
        let (_base, base_url) = start_gateway(Path::new(&bin), dir, "seawall-baseline-lists", &config);
        let base =
            load::list_tools(&Endpoint::parse(&base_url), 20, d.list_calls, LIST_UPSTREAMS * LIST_TOOLS, &prefixes)
                .await;
        report.baseline_lists(base);
    }
}

/// A stdio upstream (the demo, one process shared by every session) under 16 callers.
async fn stdio_upstream(d: &Durations, dir: &Path, bins: &Bins, report: &mut Report) {
    let config =
        format!("upstreams:\n  - name: demo\n    command: {SEAWALL_BIN:?}\n    args: [demo-upstream, --stdio]\n");
    let (gw, gw_url) = start_gateway(&bins.gateway, dir, "seawall-stdio", &config);
    let target = Target { endpoint: Endpoint::parse(&gw_url).at("/mcp/demo"), tool: "echo".into() };
    // The gateway's children: the stdio process.
    let watched = Watched { proxy: vec![gw.pid()], upstream: gw.family().split_off(1) };
    let window = d.closed * d.rounds as u32;
    report.stdio(load::closed_loop(&target, CONNECTIONS, d.warmup, window, &watched).await);
}

/// What 10,000 more idle sessions cost in resident memory.
async fn idle_sessions(dir: &Path, bins: &Bins, report: &mut Report) {
    let (_echo, echo_url) = start_echo(bins, dir, 1);
    let caps = format!("session: {{ max_sessions: {}, max_sessions_per_peer: 0 }}\n", SESSIONS + 100);
    let (gw, gw_url) = start_gateway(&bins.gateway, dir, "seawall-sessions", &single_upstream(&echo_url, &caps));
    let endpoint = Endpoint::parse(&gw_url);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A first session per connection, so that what every session shares is in place.
    let warm = load::open_sessions(&endpoint, CONNECTIONS, CONNECTIONS).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = procs::status_kib(&[gw.pid()], "VmRSS");
    let opened = load::open_sessions(&endpoint, SESSIONS, CONNECTIONS).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = procs::status_kib(&[gw.pid()], "VmRSS");
    report.sessions(warm, opened, before, after);
}

/// The bench's echo server offering `tools` tools; returns it and its URL.
fn start_echo(bins: &Bins, dir: &Path, tools: usize) -> (Proc, String) {
    let log = dir.join(format!("echo-{tools}.log"));
    Proc::start("echo upstream", &bins.me, &["echo-server", "--tools", &tools.to_string()], &log, "listening on ")
}

/// The gateway's file: loopback listeners on free ports, everything else as the
/// defaults have it (`extra` adds top-level keys), one HTTP upstream `echo`.
fn single_upstream(url: &str, extra: &str) -> String {
    format!("{extra}upstreams:\n  - name: echo\n    url: {url}\n")
}

/// Starts a gateway on `body` (upstreams and any other keys) with its listeners on
/// free loopback ports; returns it and its MCP URL. Its file goes in a directory of its
/// own, as deployments keep configuration apart from logs: seawall watches the directory
/// that holds its file, and every line of a log written there would wake the watcher.
fn start_gateway(bin: &Path, dir: &Path, name: &str, body: &str) -> (Proc, String) {
    let config_dir = dir.join(format!("{name}-config"));
    std::fs::create_dir_all(&config_dir).expect("config dir");
    let config = config_dir.join(format!("{name}.yaml"));
    std::fs::write(&config, format!("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n{body}")).expect("config");
    let config = config.to_str().expect("utf-8 path").to_owned();
    Proc::start(name, bin, &["run", "--config", &config], &dir.join(format!("{name}.log")), "seawall listening on ")
}

/// nginx in front of the echo upstream, when nginx is installed.
fn start_nginx(dir: &Path, upstream: &Endpoint) -> Option<(Proc, Endpoint)> {
    let Some(bin) = procs::nginx_binary() else {
        println!("nginx is not installed: its rows are left out (scripts/bench installs it)");
        return None;
    };
    let port = procs::free_port();
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, procs::nginx_config(dir, port, upstream.addr)).expect("nginx.conf");
    let (conf, prefix, early_log) =
        (conf.display().to_string(), dir.display().to_string(), dir.join("nginx-early.log"));
    let early_log = early_log.display().to_string();
    let args = ["-p", &prefix, "-c", &conf, "-e", &early_log];
    let ready = || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    let proc = Proc::start_quiet("nginx", &bin, &args, &dir.join("nginx.log"), ready);
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp"));
    Some((proc, endpoint))
}

/// A [`Figures`] that ran into wrong answers says so at once.
fn show_wrong(what: &str, f: &Figures) {
    if f.wrong > 0 {
        println!("  !! {what}: {} wrong answers, e.g.", f.wrong);
        for e in &f.examples {
            println!("     {e}");
        }
    }
}
