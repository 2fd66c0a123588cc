//! What the status page's recent series add to counting a request, in one run: the
//! time of `Recent::record` (the one call `metrics::request` makes into it) next to the
//! time of what `metrics::request` already did before it (a labelled counter and a
//! labelled histogram in the Prometheus recorder), from one thread and from two at
//! once on the same upstream, in rounds that alternate which goes first.
//!
//! `cargo bench --bench recent`. Figures are medians of the rounds; compare the ratio,
//! not the nanoseconds, across machines.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::{counter, histogram};
use seawall::telemetry::recent::Recent;

const CALLS: u32 = 400_000;
const ROUNDS: usize = 7;

/// What `metrics::request` does besides feeding the recent series.
fn count_in_prometheus(upstream: &str, outcome: &'static str, elapsed: Duration) {
    let method = "tools/call";
    let tool = "echo";
    counter!("seawall_requests_total", "upstream" => upstream.to_owned(), "method" => method, "tool" => tool.to_owned(), "outcome" => outcome)
        .increment(1);
    histogram!("seawall_request_duration_seconds", "upstream" => upstream.to_owned(), "method" => method, "tool" => tool.to_owned())
        .record(elapsed.as_secs_f64());
}

/// Nanoseconds per call of `f`, run `CALLS` times on each of `threads` threads at once.
fn per_call(threads: usize, f: Arc<dyn Fn(u32) + Send + Sync>) -> f64 {
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let f = Arc::clone(&f);
            std::thread::spawn(move || {
                for i in 0..CALLS {
                    f(black_box(i));
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("recent series benchmark: run it with `cargo bench --bench recent`");
        return;
    }
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder();
    if let Err(e) = recorder {
        eprintln!("cannot install the Prometheus recorder: {e}");
        std::process::exit(1);
    }
    let recent = Arc::new(Recent::new());
    let with_recent: Arc<dyn Fn(u32) + Send + Sync> = {
        let recent = Arc::clone(&recent);
        Arc::new(move |i| recent.record("remote", if i % 100 == 0 { "error" } else { "ok" }))
    };
    let prometheus: Arc<dyn Fn(u32) + Send + Sync> = Arc::new(|i| {
        count_in_prometheus("remote", if i % 100 == 0 { "error" } else { "ok" }, Duration::from_micros(250))
    });
    println!("{:<10} {:>22} {:>18} {:>8}", "threads", "metrics (ns/request)", "recent (ns/request)", "ratio");
    for threads in [1, 2] {
        let (mut m, mut r) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            if round % 2 == 0 {
                m.push(per_call(threads, Arc::clone(&prometheus)));
                r.push(per_call(threads, Arc::clone(&with_recent)));
            } else {
                r.push(per_call(threads, Arc::clone(&with_recent)));
                m.push(per_call(threads, Arc::clone(&prometheus)));
            }
        }
        let (m, r) = (median(m), median(r));
        println!("{threads:<10} {m:>22.1} {r:>18.1} {:>8.3}", r / m);
    }
    // The counts are real: everything recorded is in the series.
    let counted: u64 = recent.upstream("remote", Instant::now()).requests.iter().sum();
    println!("recorded {counted} requests in the recent series");
}
