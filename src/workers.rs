//! The runtimes client connections are served on: one single-threaded runtime per
//! core, each on a thread of its own.
//!
//! A proxied call is a short exchange: a client's request in, one to the upstream, its
//! answer back. On a work-stealing runtime the pieces of one call wake each other across
//! threads (the socket that became readable is seen by one worker, the task it wakes runs
//! on another), and every such wake-up is a context switch. Here a connection is handed,
//! once, to one worker, and everything its requests do runs there: the upstream
//! connections a worker opens are its own (see [`home`]), so a call's sockets, timers and
//! tasks all stay on one thread. The accept loop stays on the main runtime, which also
//! keeps the gateway's background work (supervisors, sweeps, the admin listener).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

/// The worker runtimes.
pub(crate) struct Workers {
    handles: Vec<Handle>,
    next: AtomicUsize,
    /// Fired when the workers are dropped: each thread ends its runtime.
    stop: CancellationToken,
}

thread_local! {
    /// The index of the worker this thread runs, if it runs one.
    static HOME: std::cell::Cell<usize> = const { std::cell::Cell::new(MAIN) };
}

/// The [`home`] of every thread that is not a worker's.
pub(crate) const MAIN: usize = usize::MAX;

/// Which worker the current thread runs ([`MAIN`] off the workers): what runs on one
/// thread shares that thread's reactor, so resources that register with a reactor
/// (sockets) are kept and reused per home.
pub(crate) fn home() -> usize {
    HOME.with(std::cell::Cell::get)
}

impl Workers {
    /// Starts `count` workers (at least one), named `seawall-wrk-N`, and returns once
    /// each thread runs.
    pub(crate) fn start(count: usize) -> std::io::Result<Arc<Workers>> {
        let stop = CancellationToken::new();
        let mut handles = Vec::new();
        let (started, running) = std::sync::mpsc::channel();
        for index in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            handles.push(runtime.handle().clone());
            let (stop, started) = (stop.clone(), started.clone());
            std::thread::Builder::new().name(format!("seawall-wrk-{index}")).spawn(move || {
                HOME.with(|home| home.set(index));
                let _ = started.send(());
                runtime.block_on(stop.cancelled());
                // Whatever is still running on it (streams of a connection past the
                // drain) is dropped with the runtime, here on its own thread.
                drop(runtime);
            })?;
        }
        drop(started);
        for _ in &handles {
            // A thread that failed to start has dropped its sender: no wait for it.
            if running.recv().is_err() {
                break;
            }
        }
        Ok(Arc::new(Workers { handles, next: AtomicUsize::new(0), stop }))
    }

    /// `configured` workers (the file's `workers`); without it as many as the process
    /// may use cores (`available_parallelism`, which honours CPU affinity and cgroup
    /// quotas), or as `TOKIO_WORKER_THREADS` says (the variable that also sizes the main
    /// runtime).
    pub(crate) fn start_as(configured: Option<usize>) -> std::io::Result<Arc<Workers>> {
        Workers::start(configured.unwrap_or_else(per_core))
    }

    /// How many workers there are.
    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    /// Runs `future` on the next worker, in turn.
    pub(crate) fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let n = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        drop(self.handles[n].spawn(future));
    }
}

/// The default number of workers: `TOKIO_WORKER_THREADS`, or one per core.
fn per_core() -> usize {
    let asked = std::env::var("TOKIO_WORKER_THREADS").ok().and_then(|n| n.trim().parse::<usize>().ok());
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    asked.filter(|n| *n > 0).unwrap_or(cores)
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn futures_run_in_turn_on_the_workers_each_on_its_own_home() {
        let workers = Workers::start(2).unwrap();
        assert_eq!(workers.len(), 2);
        assert_eq!(home(), MAIN);
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..4 {
            let tx = tx.clone();
            workers.spawn(async move {
                tokio::task::yield_now().await;
                let name = std::thread::current().name().map(str::to_owned);
                let _ = tx.send((home(), name));
            });
        }
        let mut seen: Vec<(usize, Option<String>)> = (0..4).map(|_| rx.recv().unwrap()).collect();
        seen.sort();
        let expected = |n: usize| (n, Some(format!("seawall-wrk-{n}")));
        assert_eq!(seen, vec![expected(0), expected(0), expected(1), expected(1)]);
    }
}
