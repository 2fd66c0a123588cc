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
        STARTED.store(handles.len(), Ordering::Relaxed);
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

/// A service stack kept once per worker thread and called there in place.
///
/// A tower service is called through `&mut self`, so a stack shared by every request is
/// cloned for each one: a boxed copy of every layer, and every shared part's reference
/// count written up and down again, from every worker. Each worker here clones the stack
/// once and keeps calling its own copy; threads that are not workers (the main runtime,
/// tests) clone it per call as before.
pub(crate) struct PerWorker<S> {
    shared: S,
    copies: Box<[WorkerCopy<S>]>,
}

/// One worker's copy, on a cache line of its own.
#[repr(align(128))]
struct WorkerCopy<S>(parking_lot::Mutex<Option<S>>);

/// How many workers a [`PerWorker`] keeps copies for: the count last started, at least
/// one per core (the default), and those started later fall back to cloning.
static STARTED: AtomicUsize = AtomicUsize::new(0);

impl<S: Clone> PerWorker<S> {
    /// Copies of `shared` for the workers, each made on the worker's first call.
    pub(crate) fn new(shared: S) -> PerWorker<S> {
        PerWorker::with_copies(shared, STARTED.load(Ordering::Relaxed).max(per_core()))
    }

    /// Copies of `shared` for workers `0..count`.
    fn with_copies(shared: S, count: usize) -> PerWorker<S> {
        let copies = (0..count.min(MAX_COPIES)).map(|_| WorkerCopy(parking_lot::Mutex::new(None))).collect();
        PerWorker { shared, copies }
    }

    /// Runs `f` with the current worker's copy; gives `arg` back off the workers (or
    /// when the copy is already in use further up this thread's stack).
    pub(crate) fn with_copy<A, R>(&self, arg: A, f: impl FnOnce(&mut S, A) -> R) -> Result<R, A> {
        let Some(copy) = self.copies.get(home()) else { return Err(arg) };
        let Some(mut copy) = copy.0.try_lock() else { return Err(arg) };
        Ok(f(copy.get_or_insert_with(|| self.shared.clone()), arg))
    }
}

impl<Req, Rsp, E> PerWorker<tower::util::BoxCloneSyncService<Req, Rsp, E>>
where
    Req: Send + 'static,
    Rsp: Send + 'static,
    E: Send + 'static,
{
    /// Calls the stack with `req`: this worker's copy when it is ready at once (every
    /// layer of seawall's stacks is), else a clone of the shared stack, awaited ready.
    pub(crate) fn call(&self, req: Req) -> crate::call::BoxFuture<'static, Result<Rsp, E>> {
        use tower::{Service, ServiceExt};
        let ready_call = self.with_copy(req, |svc, req| {
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            match svc.poll_ready(&mut cx) {
                std::task::Poll::Ready(Ok(())) => Ok(svc.call(req)),
                _ => Err(req),
            }
        });
        match ready_call {
            Ok(Ok(answer)) => answer,
            Ok(Err(req)) | Err(req) => Box::pin(self.shared.clone().oneshot(req)),
        }
    }
}

/// At most this many workers keep copies of a stack.
const MAX_COPIES: usize = 64;

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

    /// A ready service that counts how often it was cloned and called.
    #[derive(Default)]
    struct Counted {
        clones: Arc<AtomicUsize>,
        calls: Arc<AtomicUsize>,
    }

    impl Clone for Counted {
        fn clone(&self) -> Counted {
            self.clones.fetch_add(1, Ordering::SeqCst);
            Counted { clones: Arc::clone(&self.clones), calls: Arc::clone(&self.calls) }
        }
    }

    impl tower::Service<u32> for Counted {
        type Response = u32;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<u32, std::convert::Infallible>>;

        fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, n: u32) -> Self::Future {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(n + 1))
        }
    }

    #[test]
    fn each_worker_calls_a_copy_of_its_own_and_other_threads_clone_per_call() {
        let counted = Counted::default();
        let (clones, calls) = (Arc::clone(&counted.clones), Arc::clone(&counted.calls));
        let service = Arc::new(PerWorker::with_copies(tower::util::BoxCloneSyncService::new(counted), 2));
        let workers = Workers::start(2).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for n in 0..8 {
            let (service, tx) = (Arc::clone(&service), tx.clone());
            workers.spawn(async move {
                let _ = tx.send(service.call(n).await);
            });
        }
        let mut answers: Vec<u32> = (0..8).map(|_| rx.recv().unwrap().unwrap()).collect();
        answers.sort_unstable();
        assert_eq!(answers, (1..=8).collect::<Vec<_>>());
        assert_eq!(calls.load(Ordering::SeqCst), 8);
        assert_eq!(clones.load(Ordering::SeqCst), 2, "one copy per worker, made on its first call");
        // Off the workers: a clone per call.
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        assert_eq!(rt.block_on(service.call(41)).unwrap(), 42);
        assert_eq!(clones.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_copy_in_use_further_up_the_thread_gives_the_argument_back() {
        let copies = PerWorker::with_copies(0u32, 1);
        let workers = Workers::start(1).unwrap();
        let copies = Arc::new(copies);
        let (tx, rx) = std::sync::mpsc::channel();
        let inner = Arc::clone(&copies);
        workers.spawn(async move {
            let nested = inner.with_copy("outer", |n, outer| {
                *n += 1;
                (outer, inner.with_copy("inner", |_, arg| arg))
            });
            let _ = tx.send(nested);
        });
        assert_eq!(rx.recv().unwrap(), Ok(("outer", Err("inner"))));
        assert_eq!(copies.with_copy((), |_, ()| ()), Err(()), "not a worker thread");
    }
}
