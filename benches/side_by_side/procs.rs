//! The processes a run measures — the upstreams, nginx, the gateways — and what the
//! kernel says about them: CPU time from `/proc/PID/stat` (utime + stime, every thread)
//! and memory from `/proc/PID/status` (VmRSS now, VmHWM the peak).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A child process, stopped (SIGTERM, then SIGKILL after a grace period) when dropped.
pub struct Proc {
    child: Child,
}

impl Proc {
    /// Starts `program` with stdout piped and stderr into `log`, and waits up to 30 s for
    /// a line starting with `prefix` on its stdout; returns the process and the rest of
    /// that line.
    pub fn start(name: &str, program: &Path, args: &[&str], log: &Path, prefix: &str) -> (Proc, String) {
        let stderr = std::fs::File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let stdout = child.stdout.take().expect("stdout");
        let proc = Proc { child };
        let (tx, rx) = std::sync::mpsc::channel();
        let wanted = prefix.to_owned();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix(&wanted)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(rest.trim().to_owned());
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(rest) => (proc, rest),
            Err(_) => panic!("{name} printed no `{prefix}` line within 30 s (its log: {})", log.display()),
        }
    }

    /// Starts a program that prints nothing to wait for (nginx), then waits until
    /// `ready` says it is serving.
    pub fn start_quiet(name: &str, program: &Path, args: &[&str], log: &Path, ready: impl Fn() -> bool) -> Proc {
        let stderr = std::fs::File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let mut proc = Proc { child };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready() {
            if let Ok(Some(status)) = proc.child.try_wait() {
                panic!("{name} exited at start ({status}); its log: {}", log.display());
            }
            assert!(Instant::now() < deadline, "{name} not ready within 30 s; its log: {}", log.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        proc
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// This process and its direct children (nginx's workers).
    pub fn family(&self) -> Vec<u32> {
        let mut pids = vec![self.pid()];
        pids.extend(children(self.pid()));
        pids
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The direct children of `pid`, found by their parent pid.
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| stat_fields(p).and_then(|f| f.get(1).copied()) == Some(u64::from(pid)))
        .collect()
}

/// The fields of `/proc/PID/stat` after `(comm)`: [0] is the state, [1] the parent pid,
/// [11] utime and [12] stime in clock ticks. State is a letter, parsed as 0.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat.rsplit_once(')')?.1.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect())
}

fn clock_ticks_per_sec() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let out = Command::new("getconf").arg("CLK_TCK").output();
        out.ok().and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok()).unwrap_or(100)
    })
}

/// CPU time (user + system, all threads) of these processes so far.
pub fn cpu_time(pids: &[u32]) -> Duration {
    let ticks: u64 = pids.iter().filter_map(|&p| stat_fields(p)).map(|f| f[11] + f[12]).sum();
    Duration::from_micros(ticks * 1_000_000 / clock_ticks_per_sec())
}

/// The system (kernel) part of [`cpu_time`].
pub fn sys_time(pids: &[u32]) -> Duration {
    let ticks: u64 = pids.iter().filter_map(|&p| stat_fields(p)).map(|f| f[12]).sum();
    Duration::from_micros(ticks * 1_000_000 / clock_ticks_per_sec())
}

/// Context switches (voluntary and not) of every thread of `pids`, from
/// `/proc/PID/task/TID/status`.
pub fn context_switches(pids: &[u32]) -> u64 {
    let mut total = 0;
    for pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            total += status
                .lines()
                .filter(|l| l.starts_with("voluntary_ctxt_switches:") || l.starts_with("nonvoluntary_ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    total
}

/// A `/proc/PID/status` figure in KiB (`VmRSS`, `VmHWM`), summed over `pids`.
pub fn status_kib(pids: &[u32], field: &str) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|s| {
            let line = s.lines().find(|l| l.starts_with(field))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum()
}

/// A free port on 127.0.0.1, for a program that cannot be told to use port 0 and report
/// it (nginx): bound, read and released at once.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// nginx, if it is installed: `SEAWALL_BENCH_NGINX`, then `nginx` on PATH, then
/// `/usr/sbin/nginx`.
pub fn nginx_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SEAWALL_BENCH_NGINX") {
        return Some(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("nginx")).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path.into_iter().chain([PathBuf::from("/usr/sbin/nginx")]).find(|p| p.is_file())
}

/// nginx as a plain reverse proxy: one worker, HTTP/1.1 to the upstream over kept-alive
/// connections, no buffering of answers, no access log, everything under `dir`.
pub fn nginx_config(dir: &Path, port: u16, upstream: std::net::SocketAddr) -> String {
    let d = dir.display();
    format!(
        "daemon off;
master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests 1000000;
    upstream echo {{
        server {upstream};
        keepalive 32;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://echo;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
        }}
    }}
}}
"
    )
}
