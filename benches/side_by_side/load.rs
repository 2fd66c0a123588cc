//! The load: closed-loop (each connection sends its next call as soon as the last is
//! answered) and open-loop (calls sent at fixed times whatever the answers do, latency
//! counted from the time a call was due so that a slow answer is not hidden by the
//! calls it delayed). Every answer is checked; wrong ones are counted, never timed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio::time::sleep_until;

use crate::client::{Conn, Endpoint, Wrong};
use crate::procs;

/// Ids are unique over the whole run, whichever connection sends them.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Whose CPU time a run reads: the proxy (if any), the upstream, this generator.
#[derive(Clone, Default)]
pub struct Watched {
    pub proxy: Vec<u32>,
    pub upstream: Vec<u32>,
}

/// CPU time spent during the measured window.
#[derive(Clone, Copy, Default, Debug)]
pub struct Cpu {
    pub proxy: Duration,
    /// The kernel's part of `proxy`: system calls, wake-ups, the network stack.
    pub proxy_sys: Duration,
    pub upstream: Duration,
    pub generator: Duration,
    /// Context switches of the proxy's threads: how often it slept and was woken.
    pub proxy_switches: u64,
}

impl Watched {
    fn sample(&self) -> Cpu {
        Cpu {
            proxy: procs::cpu_time(&self.proxy),
            proxy_sys: procs::sys_time(&self.proxy),
            upstream: procs::cpu_time(&self.upstream),
            generator: procs::cpu_time(&[std::process::id()]),
            proxy_switches: procs::context_switches(&self.proxy),
        }
    }
}

/// What one measured run gave.
#[derive(Default)]
pub struct Figures {
    /// Latencies of the calls answered right within the window, sorted, in ns.
    pub latencies: Vec<u64>,
    pub window: Duration,
    pub cpu: Cpu,
    /// Wrong answers (at any time in the run, warm-up included).
    pub wrong: u64,
    /// The first few of them.
    pub examples: Vec<String>,
    /// `tools/list` only: the median time the generator took to parse and check an
    /// answer after it had all of it, which its latency leaves out.
    pub check_p50: Option<Duration>,
}

impl Figures {
    pub fn calls(&self) -> u64 {
        self.latencies.len() as u64
    }

    pub fn rps(&self) -> f64 {
        self.calls() as f64 / self.window.as_secs_f64()
    }

    /// The `q` quantile (0 to 1) in ms.
    pub fn ms(&self, q: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let rank = ((q * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
        self.latencies[rank - 1] as f64 / 1e6
    }

    /// The proxy's context switches per answered call.
    pub fn switches_per_call(&self) -> f64 {
        self.cpu.proxy_switches as f64 / self.calls().max(1) as f64
    }

    /// CPU µs per answered call.
    pub fn per_call(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() * 1e6 / self.calls().max(1) as f64
    }

    /// Adds another round of the same target: samples, windows and CPU add up.
    pub fn merge(&mut self, other: Figures) {
        self.latencies.extend(other.latencies);
        self.latencies.sort_unstable();
        self.window += other.window;
        self.cpu.proxy += other.cpu.proxy;
        self.cpu.proxy_sys += other.cpu.proxy_sys;
        self.cpu.upstream += other.cpu.upstream;
        self.cpu.generator += other.cpu.generator;
        self.cpu.proxy_switches += other.cpu.proxy_switches;
        self.wrong += other.wrong;
        for e in other.examples {
            if self.examples.len() < 5 {
                self.examples.push(e);
            }
        }
    }

    fn absorb(&mut self, part: Part) {
        self.latencies.extend(part.latencies);
        self.wrong += part.wrong;
        for e in part.examples {
            if self.examples.len() < 5 {
                self.examples.push(e);
            }
        }
    }
}

#[derive(Default)]
struct Part {
    latencies: Vec<u64>,
    wrong: u64,
    examples: Vec<String>,
}

impl Part {
    fn wrong(&mut self, what: &str, e: &Wrong) {
        self.wrong += 1;
        if self.examples.len() < 5 {
            self.examples.push(format!("{what}: {e}"));
        }
    }
}

/// What to call: `tool` (with `{"message": "bench-<id>"}`) at `endpoint`.
#[derive(Clone)]
pub struct Target {
    pub endpoint: Endpoint,
    pub tool: String,
}

/// A connection with its session; `None` (and the failure counted) when it cannot open.
async fn session(target: &Target, part: &mut Part) -> Option<Conn> {
    match Conn::with_session(&target.endpoint).await {
        Ok(conn) => Some(conn),
        Err(e) => {
            part.wrong("initialize", &e);
            None
        }
    }
}

/// Ends the session of a connection that has one (a wrong answer to the `DELETE` is
/// counted like any other).
async fn end(conn: Option<Conn>, part: &mut Part) {
    if let Some(mut conn) = conn
        && let Err(e) = conn.end_session().await
    {
        part.wrong("DELETE", &e);
    }
}

/// `conns` connections, each calling again as soon as it is answered, for `warmup` and
/// then `window`; the CPU of `watched` is read at both ends of the window.
pub async fn closed_loop(
    target: &Target,
    conns: usize,
    warmup: Duration,
    window: Duration,
    watched: &Watched,
) -> Figures {
    let from = Instant::now() + warmup;
    let until = from + window;
    let mut tasks = JoinSet::new();
    for _ in 0..conns {
        let target = target.clone();
        tasks.spawn(async move {
            let mut part = Part::default();
            let mut conn = session(&target, &mut part).await;
            while Instant::now() < until {
                let Some(c) = conn.as_mut() else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    conn = session(&target, &mut part).await;
                    continue;
                };
                let id = next_id();
                let sent = Instant::now();
                match c.call_echo(id, &target.tool).await {
                    Ok(()) => {
                        let answered = Instant::now();
                        if sent >= from && answered <= until {
                            part.latencies.push((answered - sent).as_nanos() as u64);
                        }
                    }
                    Err(e) => {
                        part.wrong("tools/call", &e);
                        conn = session(&target, &mut part).await;
                    }
                }
            }
            end(conn, &mut part).await;
            part
        });
    }
    sleep_until(from.into()).await;
    let before = watched.sample();
    sleep_until(until.into()).await;
    let after = watched.sample();
    let mut figures = Figures { window, cpu: diff(before, after), ..Figures::default() };
    while let Some(part) = tasks.join_next().await {
        figures.absorb(part.expect("load task"));
    }
    figures.latencies.sort_unstable();
    figures
}

/// Calls due at `rate` per second in all, spread over `conns` connections in turn, for
/// `warmup` and then `window`. A call is timed from when it was due when its connection
/// was still busy then (the wait counts), otherwise from when it was sent (the timer's
/// own lateness does not).
pub async fn open_loop(
    target: &Target,
    rate: f64,
    conns: usize,
    warmup: Duration,
    window: Duration,
    watched: &Watched,
) -> Figures {
    let mut tasks = JoinSet::new();
    let mut ready = Vec::new();
    for _ in 0..conns {
        let mut part = Part::default();
        let conn = session(target, &mut part).await;
        ready.push((conn, part));
    }
    let start = Instant::now() + Duration::from_millis(50);
    let from = start + warmup;
    let until = from + window;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let total = ((warmup + window).as_secs_f64() * rate) as u64;
    for (k, (mut conn, mut part)) in ready.into_iter().enumerate() {
        let target = target.clone();
        tasks.spawn(async move {
            let mut i = k as u64;
            while i < total {
                let due = start + interval.mul_f64(i as f64);
                i += conns as u64;
                let Some(c) = conn.as_mut() else {
                    conn = session(&target, &mut part).await;
                    continue;
                };
                let timed_from = if Instant::now() < due {
                    sleep_until(due.into()).await;
                    Instant::now()
                } else {
                    due
                };
                let id = next_id();
                match c.call_echo(id, &target.tool).await {
                    Ok(()) => {
                        if due >= from && due < until {
                            part.latencies.push(timed_from.elapsed().as_nanos() as u64);
                        }
                    }
                    Err(e) => {
                        part.wrong("tools/call", &e);
                        conn = session(&target, &mut part).await;
                    }
                }
            }
            end(conn, &mut part).await;
            part
        });
    }
    sleep_until(from.into()).await;
    let before = watched.sample();
    sleep_until(until.into()).await;
    let after = watched.sample();
    let mut figures = Figures { window, cpu: diff(before, after), ..Figures::default() };
    while let Some(part) = tasks.join_next().await {
        figures.absorb(part.expect("load task"));
    }
    figures.latencies.sort_unstable();
    figures
}

/// `calls` sequential `tools/list` calls on one session after `warmup` unmeasured ones,
/// each checked to list `expected` tools named with one of `prefixes`.
pub async fn list_tools(
    endpoint: &Endpoint,
    warmup: usize,
    calls: usize,
    expected: usize,
    prefixes: &[String],
) -> Figures {
    let mut part = Part::default();
    let mut checks = Vec::new();
    let started = Instant::now();
    if let Some(mut conn) = session(&Target { endpoint: endpoint.clone(), tool: String::new() }, &mut part).await {
        for n in 0..warmup + calls {
            let sent = Instant::now();
            match conn.list_tools(next_id(), expected, prefixes).await {
                // The latency ends when the whole answer is in: what the generator does
                // with it after that is its own work, not the proxy's.
                Ok((received, check)) if n >= warmup => {
                    part.latencies.push(received.duration_since(sent).as_nanos() as u64);
                    checks.push(check);
                }
                Ok(_) => {}
                Err(e) => part.wrong("tools/list", &e),
            }
        }
        end(Some(conn), &mut part).await;
    }
    checks.sort_unstable();
    let check_p50 = checks.get(checks.len() / 2).copied();
    let mut figures = Figures { window: started.elapsed(), check_p50, ..Figures::default() };
    figures.absorb(part);
    figures.latencies.sort_unstable();
    figures
}

/// Opens `count` sessions over `conns` connections (each session an `initialize` and
/// its `notifications/initialized`) and leaves them open, idle.
pub async fn open_sessions(endpoint: &Endpoint, count: usize, conns: usize) -> Figures {
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for k in 0..conns {
        let endpoint = endpoint.clone();
        let share = count / conns + usize::from(k < count % conns);
        tasks.spawn(async move {
            let mut part = Part::default();
            let mut conn = match Conn::connect(&endpoint).await {
                Ok(conn) => conn,
                Err(e) => {
                    part.wrong("connect", &e);
                    return part;
                }
            };
            for _ in 0..share {
                let sent = Instant::now();
                match conn.open_session(next_id()).await {
                    Ok(()) => part.latencies.push(sent.elapsed().as_nanos() as u64),
                    Err(e) => {
                        part.wrong("initialize", &e);
                        if let Ok(c) = Conn::connect(&endpoint).await {
                            conn = c;
                        }
                    }
                }
            }
            part
        });
    }
    let mut figures = Figures::default();
    while let Some(part) = tasks.join_next().await {
        figures.absorb(part.expect("session task"));
    }
    figures.window = started.elapsed();
    figures.latencies.sort_unstable();
    figures
}

fn diff(before: Cpu, after: Cpu) -> Cpu {
    Cpu {
        proxy: after.proxy.saturating_sub(before.proxy),
        proxy_sys: after.proxy_sys.saturating_sub(before.proxy_sys),
        upstream: after.upstream.saturating_sub(before.upstream),
        generator: after.generator.saturating_sub(before.generator),
        proxy_switches: after.proxy_switches.saturating_sub(before.proxy_switches),
    }
}
