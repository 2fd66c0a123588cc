//! What the run prints: each figure as it is measured, then the ratios, the issue's
//! targets with PASS or MISS, a Markdown table for docs/src/internals/performance.md, and the latency plot.

use std::path::Path;

use crate::load::Figures;
use crate::plot::{self, Panel, QUANTILES};
use crate::{CONNECTIONS, DEMO_ROW, Durations, LIST_TOOLS, LIST_UPSTREAMS, ONE_WORKER_ROW, OPEN_RATE, show_wrong};

/// The seawall rows the targets are checked on: the default configuration on
/// both endpoints, and `/mcp/echo` with one worker thread, as nginx has one worker.
const MEASURED: [&str; 3] = ["seawall /mcp/echo", "seawall /mcp", ONE_WORKER_ROW];

/// One closed-loop target: its name, the pids of its proxy, their peak RSS after the run.
#[derive(Clone)]
pub struct Row {
    pub name: String,
    pub proxy: Option<Vec<u32>>,
    pub peak_rss_kib: Option<u64>,
}

impl Row {
    pub fn new(name: &str, proxy: Option<Vec<u32>>) -> Row {
        Row { name: name.to_owned(), proxy, peak_rss_kib: None }
    }
}

pub struct Report {
    pub idle_rss_kib: u64,
    closed: Vec<(Row, Figures)>,
    open: Vec<(String, Figures)>,
    lists: Option<(Figures, Figures)>,
    stdio: Option<Figures>,
    /// Sessions opened, RSS before and after, in KiB.
    sessions: Option<(u64, u64, u64)>,
    wrong: u64,
}

impl Report {
    pub fn new(gateway: &Path) -> Report {
        println!(
            "seawall side by side: one run, {} cores shared by the load generator, the proxies and the upstreams",
            cores()
        );
        println!(
            "client: MCP Streamable HTTP, session era ({}): one session per connection (initialize +",
            crate::client::VERSION
        );
        println!("        notifications/initialized, then Mcp-Session-Id and MCP-Protocol-Version on every call),");
        println!("        HTTP/1.1 keep-alive; every answer checked: status, the id sent back, the text echoed");
        println!("upstream: the bench's echo server (one thread, hyper HTTP/1.1); the demo upstream is shown directly");
        println!("gateway: {} with its default stack (listen and admin_listen on free ports)", gateway.display());
        Report {
            idle_rss_kib: 0,
            closed: Vec::new(),
            open: Vec::new(),
            lists: None,
            stdio: None,
            sessions: None,
            wrong: 0,
        }
    }

    fn count(&mut self, what: &str, f: &Figures) {
        show_wrong(what, f);
        self.wrong += f.wrong;
    }

    pub fn begin_closed(&self, d: &Durations) {
        println!(
            "\n## tools/call echo, {CONNECTIONS} connections closed-loop ({} of {:.1} s warm-up + {:.1} s measured, targets in turn)",
            rounds(d.rounds),
            d.warmup.as_secs_f64(),
            d.closed.as_secs_f64()
        );
        println!(
            "{:<29} {:>8} {:>7} {:>7} {:>7} {:>7} {:>11} {:>8} {:>11} {:>11} {:>10} {:>9}",
            "target",
            "req/s",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "proxy CPU",
            "kernel",
            "upstr. CPU",
            "gen. CPU",
            "proxy HWM",
            "switches"
        );
        println!(
            "{:<29} {:>8} {:>7} {:>7} {:>7} {:>7} {:>11} {:>8} {:>11} {:>11} {:>10} {:>9}",
            "", "", "ms", "ms", "ms", "ms", "µs/call", "µs/call", "µs/call", "µs/call", "MiB", "per call"
        );
    }

    pub fn closed(&mut self, row: &Row, f: Figures) {
        self.count(&row.name, &f);
        let proxy = row.proxy.as_ref().map_or_else(|| "-".into(), |_| format!("{:.1}", f.per_call(f.cpu.proxy)));
        let hwm = row.peak_rss_kib.map_or_else(|| "-".into(), |k| format!("{:.1}", k as f64 / 1024.0));
        let switches = row.proxy.as_ref().map_or_else(|| "-".into(), |_| format!("{:.2}", f.switches_per_call()));
        let kernel = row.proxy.as_ref().map_or_else(|| "-".into(), |_| format!("{:.1}", f.per_call(f.cpu.proxy_sys)));
        println!(
            "{:<29} {:>8.0} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {proxy:>11} {kernel:>8} {:>11.1} {:>11.1} {hwm:>10} {switches:>9}",
            row.name,
            f.rps(),
            f.ms(0.5),
            f.ms(0.9),
            f.ms(0.99),
            f.ms(0.999),
            f.per_call(f.cpu.upstream),
            f.per_call(f.cpu.generator),
        );
        self.closed.push((row.clone(), f));
    }

    pub fn begin_open(&self, d: &Durations) {
        println!(
            "\n## tools/call echo, open-loop at {OPEN_RATE:.0} req/s over {CONNECTIONS} connections ({} of {:.1} s warm-up + {:.1} s measured;",
            rounds(d.open_rounds),
            d.warmup.as_secs_f64(),
            d.open.as_secs_f64()
        );
        println!("   latency from the time each call was due, so a stall also counts for the calls it delays)");
        println!(
            "{:<29} {:>8} {:>7} {:>7} {:>7} {:>7} {:>11} {:>12}",
            "target", "req/s", "p50", "p90", "p99", "p99.9", "proxy CPU", "p99 added"
        );
        println!("{:<29} {:>8} {:>7} {:>7} {:>7} {:>7} {:>11} {:>12}", "", "", "ms", "ms", "ms", "ms", "µs/call", "ms");
    }

    pub fn open(&mut self, name: &str, f: Figures) {
        self.count(name, &f);
        let proxied = !name.starts_with("direct");
        let proxy = if proxied { format!("{:.1}", f.per_call(f.cpu.proxy)) } else { "-".into() };
        let added = match self.open.first() {
            Some((_, direct)) if proxied => format!("{:+.3}", f.ms(0.99) - direct.ms(0.99)),
            _ => "-".into(),
        };
        println!(
            "{name:<29} {:>8.0} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {proxy:>11} {added:>12}",
            f.rps(),
            f.ms(0.5),
            f.ms(0.9),
            f.ms(0.99),
            f.ms(0.999)
        );
        self.open.push((name.to_owned(), f));
    }

    pub fn lists(&mut self, direct: Figures, through: Figures) {
        self.count("tools/list direct", &direct);
        self.count("tools/list through seawall", &through);
        println!("\n## tools/list, warm, one session, {} calls one after another", through.calls());
        println!(
            "direct, one upstream of {LIST_TOOLS} tools:            p50 {:.3} ms, p99 {:.3} ms",
            direct.ms(0.5),
            direct.ms(0.99)
        );
        println!(
            "seawall /mcp, {LIST_UPSTREAMS} upstreams x {LIST_TOOLS} tools (aggregated): p50 {:.3} ms, p99 {:.3} ms",
            through.ms(0.5),
            through.ms(0.99)
        );
        let check = |f: &Figures| f.check_p50.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
        println!(
            "not counted in them: the generator's parsing and checking of each answer once it is in, p50: direct {:.3} ms, through seawall {:.3} ms",
            check(&direct),
            check(&through)
        );
        self.lists = Some((direct, through));
    }

    /// The aggregated list through the baseline build (`SEAWALL_BENCH_BASELINE`).
    pub fn baseline_lists(&mut self, f: Figures) {
        self.count("tools/list through the baseline", &f);
        println!(
            "baseline /mcp, {LIST_UPSTREAMS} upstreams x {LIST_TOOLS} tools (aggregated): p50 {:.3} ms, p99 {:.3} ms",
            f.ms(0.5),
            f.ms(0.99)
        );
    }

    pub fn stdio(&mut self, f: Figures) {
        self.count("stdio upstream", &f);
        println!(
            "\n## stdio upstream (the demo, one process shared by all sessions), {CONNECTIONS} callers closed-loop"
        );
        println!(
            "seawall /mcp/demo: {:.0} calls/s, p50 {:.3} ms, p99 {:.3} ms; seawall CPU {:.1} µs/call, the stdio process {:.1} µs/call",
            f.rps(),
            f.ms(0.5),
            f.ms(0.99),
            f.per_call(f.cpu.proxy),
            f.per_call(f.cpu.upstream)
        );
        self.stdio = Some(f);
    }

    pub fn sessions(&mut self, warm: Figures, opened: Figures, before: u64, after: u64) {
        self.count("warm-up sessions", &warm);
        self.count("sessions", &opened);
        let n = opened.calls();
        println!("\n## idle sessions (an upstream with no GET stream; {} KiB RSS idle at start)", self.idle_rss_kib);
        println!(
            "opened {n} sessions in {:.1} s (p50 {:.3} ms each); RSS {before} KiB -> {after} KiB: {:.2} KiB per session",
            opened.window.as_secs_f64(),
            opened.ms(0.5),
            after.saturating_sub(before) as f64 / n.max(1) as f64
        );
        self.sessions = Some((n, before, after));
    }

    fn closed_figures(&self, name: &str) -> Option<&Figures> {
        self.closed.iter().find(|(r, _)| r.name == name).map(|(_, f)| f)
    }

    fn open_figures(&self, name: &str) -> Option<&Figures> {
        self.open.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }

    /// Prints the ratios, the targets and the Markdown table, writes the plot; returns
    /// the number of wrong answers of the whole run.
    pub fn finish(self, svg_path: &Path) -> u64 {
        let nginx = self.closed_figures("nginx");
        println!("\n## seawall / nginx, {CONNECTIONS} connections closed-loop");
        for name in MEASURED {
            match (self.closed_figures(name), nginx) {
                (Some(s), Some(n)) => println!(
                    "{name:<29} CPU per call {:.2}x nginx's, throughput {:.2}x nginx's",
                    s.per_call(s.cpu.proxy) / n.per_call(n.cpu.proxy),
                    s.rps() / n.rps()
                ),
                _ => println!("{name:<29} no nginx figures"),
            }
        }
        let targets = self.targets();
        println!("\n## targets");
        for t in &targets {
            println!("{:<4} {:<52} {:>14}   goal {}", t.verdict(), t.what, t.shown, t.goal);
        }
        self.markdown(&targets);
        let svg = self.plot();
        match std::fs::write(svg_path, svg) {
            Ok(()) => println!("\nlatency plot written to {}", svg_path.display()),
            Err(e) => println!("\ncannot write {}: {e}", svg_path.display()),
        }
        if self.wrong == 0 {
            println!("every answer checked: none wrong");
        }
        self.wrong
    }

    fn targets(&self) -> Vec<Goal> {
        let mut goals = Vec::new();
        let nginx = self.closed_figures("nginx");
        for name in MEASURED {
            let Some(s) = self.closed_figures(name) else { continue };
            let cpu = s.per_call(s.cpu.proxy);
            goals.push(Goal::at_most(&format!("{name}: CPU per proxied call"), cpu, 20.0, "µs", "≤ 20 µs"));
            if let Some(n) = nginx {
                let ratio = cpu / n.per_call(n.cpu.proxy);
                goals.push(Goal::at_most(&format!("{name}: CPU per call / nginx's"), ratio, 2.0, "x", "≤ 2x"));
                let ratio = s.rps() / n.rps();
                goals.push(Goal::at_least(&format!("{name}: throughput / nginx's"), ratio, 0.8, "x", "≥ 0.8x"));
            }
        }
        if let Some(direct) = self.open_figures("direct") {
            for name in MEASURED {
                if let Some(s) = self.open_figures(name) {
                    let added = s.ms(0.99) - direct.ms(0.99);
                    goals.push(Goal::at_most(&format!("{name}: p99 added at 500 req/s"), added, 1.0, "ms", "≤ 1 ms"));
                }
            }
        }
        goals.push(Goal::at_most(
            "seawall idle RSS at start",
            self.idle_rss_kib as f64 / 1024.0,
            20.0,
            "MiB",
            "≤ 20 MiB",
        ));
        if let Some((n, before, after)) = self.sessions {
            let per = after.saturating_sub(before) as f64 / n.max(1) as f64;
            goals.push(Goal::at_most("RSS per idle legacy session", per, 16.0, "KiB", "≤ 16 KiB"));
        }
        if let Some((_, through)) = &self.lists {
            let what = format!("aggregated tools/list, {LIST_UPSTREAMS} x {LIST_TOOLS} tools, warm, p50");
            goals.push(Goal::at_most(&what, through.ms(0.5), 1.0, "ms", "≤ 1 ms"));
        }
        goals
    }

    fn markdown(&self, targets: &[Goal]) {
        println!("\n## Markdown\n");
        println!(
            "`tools/call echo`, {CONNECTIONS} connections closed-loop (HTTP/1.1 keep-alive, one MCP session each):\n"
        );
        println!("| target | req/s | p50 | p90 | p99 | p99.9 | proxy CPU per call | proxy peak RSS |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        for (row, f) in &self.closed {
            let cpu = row.proxy.as_ref().map_or_else(|| "—".into(), |_| format!("{:.1} µs", f.per_call(f.cpu.proxy)));
            let hwm = row.peak_rss_kib.map_or_else(|| "—".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
            println!(
                "| {} | {} | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms | {cpu} | {hwm} |",
                row.name,
                thousands(f.rps()),
                f.ms(0.5),
                f.ms(0.9),
                f.ms(0.99),
                f.ms(0.999)
            );
        }
        println!("\nOpen-loop at {OPEN_RATE:.0} req/s (latency from the time each call was due):\n");
        println!("| target | p50 | p90 | p99 | p99.9 | p99 added |");
        println!("|---|---:|---:|---:|---:|---:|");
        let direct_p99 = self.open.first().map(|(_, f)| f.ms(0.99));
        for (name, f) in &self.open {
            let added = match direct_p99 {
                Some(d) if !name.starts_with("direct") => format!("{:+.3} ms", f.ms(0.99) - d),
                _ => "—".into(),
            };
            println!(
                "| {name} | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms | {added} |",
                f.ms(0.5),
                f.ms(0.9),
                f.ms(0.99),
                f.ms(0.999)
            );
        }
        println!("\n| other figures | |");
        println!("|---|---:|");
        println!("| seawall idle RSS at start | {:.1} MiB |", self.idle_rss_kib as f64 / 1024.0);
        if let Some((n, before, after)) = self.sessions {
            println!(
                "| RSS per idle legacy session ({} sessions) | {:.2} KiB |",
                thousands(n as f64),
                after.saturating_sub(before) as f64 / n.max(1) as f64
            );
        }
        if let Some((direct, through)) = &self.lists {
            println!("| `tools/list` direct, {LIST_TOOLS} tools, p50 | {:.3} ms |", direct.ms(0.5));
            println!(
                "| `tools/list` through `/mcp`, {LIST_UPSTREAMS} × {LIST_TOOLS} tools, warm, p50 / p99 | {:.3} ms / {:.3} ms |",
                through.ms(0.5),
                through.ms(0.99)
            );
            if let Some(check) = through.check_p50 {
                println!(
                    "| not counted in it: the load generator's parsing and checking of the {} tools, p50 | {:.3} ms |",
                    thousands((LIST_UPSTREAMS * LIST_TOOLS) as f64),
                    check.as_secs_f64() * 1000.0
                );
            }
        }
        if let Some(f) = &self.stdio {
            println!(
                "| stdio upstream, {CONNECTIONS} callers: calls/s, p50 / p99 | {} /s, {:.3} ms / {:.3} ms |",
                thousands(f.rps()),
                f.ms(0.5),
                f.ms(0.99)
            );
        }
        println!("\n| target | measured | goal | |");
        println!("|---|---:|---:|---|");
        for t in targets {
            println!("| {} | {} | {} | {} |", t.what, t.shown, t.goal, t.verdict());
        }
    }

    fn plot(&self) -> String {
        let shown = |name: &str| name != DEMO_ROW;
        let series = |rows: Vec<(&str, &Figures)>| {
            rows.into_iter()
                .filter(|(n, _)| shown(n))
                .map(|(n, f)| (n.to_owned(), QUANTILES.iter().map(|(q, _)| f.ms(*q)).collect()))
                .collect()
        };
        let panels = [
            Panel {
                title: format!("{CONNECTIONS} connections, closed-loop"),
                series: series(self.closed.iter().map(|(r, f)| (r.name.as_str(), f)).collect()),
            },
            Panel {
                title: format!("open-loop, {OPEN_RATE:.0} req/s"),
                series: series(self.open.iter().map(|(n, f)| (n.as_str(), f)).collect()),
            },
        ];
        plot::svg("tools/call echo: latency percentiles, direct / nginx / seawall", &panels)
    }
}

/// One target of the issue and how this run did.
pub struct Goal {
    what: String,
    shown: String,
    goal: &'static str,
    met: bool,
}

impl Goal {
    fn at_most(what: &str, value: f64, limit: f64, unit: &str, goal: &'static str) -> Goal {
        Goal { what: what.to_owned(), shown: shown(value, unit), goal, met: value <= limit }
    }

    fn at_least(what: &str, value: f64, limit: f64, unit: &str, goal: &'static str) -> Goal {
        Goal { what: what.to_owned(), shown: shown(value, unit), goal, met: value >= limit }
    }

    fn verdict(&self) -> &'static str {
        if self.met { "PASS" } else { "MISS" }
    }
}

fn shown(value: f64, unit: &str) -> String {
    match unit {
        "x" => format!("{value:.2}x"),
        "ms" => format!("{value:.3} ms"),
        _ => format!("{value:.1} {unit}"),
    }
}

fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn rounds(n: usize) -> String {
    if n == 1 { "1 round".into() } else { format!("{n} rounds") }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
