//! The export queue: a span processor that never blocks or slows the request path.
//!
//! A finished span goes into a bounded queue with `try_send`; a span that finds the
//! queue full is dropped and counted (`seawall_trace_spans_dropped_total{reason=
//! "queue_full"}`). A thread of its own, with a small runtime, drains the queue every
//! batch delay — or as soon as a batch's worth waits, when the request path tells it
//! once — and sends it to the collector in batches, one export at a time, each bounded
//! by the export timeout; the spans of a batch that fails are counted as
//! `export_failed`. Queuing a span wakes nobody, so tracing adds no thread wake-up per
//! span. (The SDK's own batch processor counts its drops internally only, hence this
//! one.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::telemetry::metrics;

/// How the queue is drained.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batching {
    /// Most spans waiting.
    pub(crate) queue_size: usize,
    /// Most spans per export.
    pub(crate) max_batch_size: usize,
    /// Longest a span waits for its batch to fill.
    pub(crate) delay: Duration,
    /// Longest one export may take.
    pub(crate) timeout: Duration,
}

/// What the worker is told.
enum Control {
    /// A batch's worth is queued: export it now.
    Batch,
    /// Export everything queued now, then say so.
    Flush(std_mpsc::Sender<()>),
    /// Export everything queued, shut the exporter down, say so and stop.
    Shutdown(std_mpsc::Sender<()>),
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Control::Batch => "Batch",
            Control::Flush(_) => "Flush",
            Control::Shutdown(_) => "Shutdown",
        })
    }
}

/// How many spans wait, and whether the worker was told a batch's worth does; shared by
/// the processor and its worker.
#[derive(Debug, Default)]
struct Backlog {
    queued: AtomicUsize,
    told: AtomicBool,
}

/// The span processor; spans go to its worker thread.
#[derive(Debug)]
pub(crate) struct ExportQueue {
    spans: mpsc::Sender<SpanData>,
    control: mpsc::UnboundedSender<Control>,
    backlog: Arc<Backlog>,
    /// Spans queued before the worker is told to export at once.
    batch: usize,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    flush_timeout: Duration,
}

impl ExportQueue {
    /// Starts the worker thread, which builds its exporter with `build` inside its own
    /// runtime (a gRPC channel needs one); fails when the thread or the exporter cannot
    /// be made.
    pub(crate) fn start<E, B>(batching: Batching, build: B) -> anyhow::Result<ExportQueue>
    where
        E: SpanExporter + 'static,
        B: FnOnce() -> anyhow::Result<E> + Send + 'static,
    {
        let queue_size = batching.queue_size.max(1);
        let (spans, queued) = mpsc::channel(queue_size);
        let (control, commands) = mpsc::unbounded_channel();
        let backlog = Arc::new(Backlog::default());
        let (built_tx, built) = std_mpsc::channel::<anyhow::Result<()>>();
        let shared = Arc::clone(&backlog);
        let worker = std::thread::Builder::new().name("seawall-trace-export".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = built_tx.send(Err(anyhow::anyhow!("cannot start the export runtime: {e}")));
                    return;
                }
            };
            let exporter = match runtime.block_on(async { build() }) {
                Ok(exporter) => exporter,
                Err(e) => {
                    let _ = built_tx.send(Err(e));
                    return;
                }
            };
            let _ = built_tx.send(Ok(()));
            let worker = Worker { exporter, batching, backlog: shared, failing: false };
            runtime.block_on(worker.run(queued, commands));
        })?;
        match built.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => anyhow::bail!("the export thread stopped while building its exporter"),
        }
        Ok(ExportQueue {
            spans,
            control,
            backlog,
            batch: batching.max_batch_size.clamp(1, queue_size),
            worker: Mutex::new(Some(worker)),
            flush_timeout: batching.timeout + Duration::from_secs(1),
        })
    }

    /// Sends `command` and waits up to `timeout` for the worker to carry it out.
    fn ask(&self, command: impl FnOnce(std_mpsc::Sender<()>) -> Control, timeout: Duration) -> OTelSdkResult {
        let (done, finished) = std_mpsc::channel();
        if self.control.send(command(done)).is_err() {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        match finished.recv_timeout(timeout) {
            Ok(()) => Ok(()),
            Err(std_mpsc::RecvTimeoutError::Timeout) => Err(OTelSdkError::Timeout(timeout)),
            Err(std_mpsc::RecvTimeoutError::Disconnected) => Err(OTelSdkError::AlreadyShutdown),
        }
    }
}

impl SpanProcessor for ExportQueue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    /// Called on the request path as a span ends: never waits, and wakes the worker
    /// only once per batch's worth.
    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        match self.spans.try_send(span) {
            Ok(()) => {
                let queued = self.backlog.queued.fetch_add(1, Ordering::Relaxed) + 1;
                if queued >= self.batch && !self.backlog.told.swap(true, Ordering::AcqRel) {
                    let _ = self.control.send(Control::Batch);
                }
            }
            Err(TrySendError::Full(_)) => metrics::trace_spans_dropped("queue_full", 1),
            // Shut down: nothing exports any more.
            Err(TrySendError::Closed(_)) => {}
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.ask(Control::Flush, self.flush_timeout)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let result = self.ask(Control::Shutdown, timeout);
        if result.is_ok()
            && let Some(worker) = self.worker.lock().take()
        {
            let _ = worker.join();
        }
        result
    }
}

/// The worker's side: the exporter, and whether the last export failed (so a failing
/// collector is logged once, and its recovery once).
struct Worker<E> {
    exporter: E,
    batching: Batching,
    backlog: Arc<Backlog>,
    failing: bool,
}

impl<E: SpanExporter> Worker<E> {
    async fn run(mut self, mut spans: mpsc::Receiver<SpanData>, mut commands: mpsc::UnboundedReceiver<Control>) {
        loop {
            let command = tokio::select! {
                biased;
                command = commands.recv() => command,
                () = tokio::time::sleep(self.batching.delay) => Some(Control::Batch),
            };
            self.drain(&mut spans).await;
            match command {
                Some(Control::Batch) => {}
                Some(Control::Flush(done)) => {
                    let _ = done.send(());
                }
                Some(Control::Shutdown(done)) => {
                    let _ = self.exporter.shutdown();
                    let _ = done.send(());
                    return;
                }
                None => return,
            }
        }
    }

    /// Exports everything queued, in batches.
    async fn drain(&mut self, spans: &mut mpsc::Receiver<SpanData>) {
        // Told again from here on: what arrives while this drain runs is its own batch.
        self.backlog.told.store(false, Ordering::Release);
        let mut batch = Vec::new();
        while let Ok(span) = spans.try_recv() {
            self.backlog.queued.fetch_sub(1, Ordering::Relaxed);
            batch.push(span);
            if batch.len() >= self.batching.max_batch_size {
                self.export(std::mem::take(&mut batch)).await;
            }
        }
        self.export(batch).await;
    }

    /// One export request, bounded by the export timeout; its spans are counted as
    /// dropped when it fails.
    async fn export(&mut self, batch: Vec<SpanData>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let failure = match tokio::time::timeout(self.batching.timeout, self.exporter.export(batch)).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {:?}", self.batching.timeout)),
        };
        match failure {
            None if self.failing => {
                self.failing = false;
                tracing::info!("trace export works again");
            }
            None => {}
            Some(why) => {
                metrics::trace_spans_dropped("export_failed", n);
                if !self.failing {
                    self.failing = true;
                    tracing::warn!(error = %crate::sanitize::text(&why), spans = n, "trace export failed; its spans are dropped (logged again once it works)");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    /// Counts what it exports; waits on `gate` before answering, when given one.
    #[derive(Debug, Clone, Default)]
    struct Counting {
        exported: Arc<AtomicUsize>,
        gate: Option<Arc<tokio::sync::Semaphore>>,
    }

    impl SpanExporter for Counting {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            if let Some(gate) = &self.gate {
                let _ = gate.acquire().await;
            }
            self.exported.fetch_add(batch.len(), Ordering::SeqCst);
            Ok(())
        }
    }

    fn span(sampled: bool) -> SpanData {
        let flags = if sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(1u128),
                SpanId::from(1u64),
                flags,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "s".into(),
            start_time: std::time::SystemTime::now(),
            end_time: std::time::SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    fn batching(queue_size: usize) -> Batching {
        Batching { queue_size, max_batch_size: 4, delay: Duration::from_secs(60), timeout: Duration::from_secs(5) }
    }

    #[test]
    fn shutdown_exports_what_is_queued_and_unsampled_spans_never_queue() {
        let exporter = Counting::default();
        let exported = Arc::clone(&exporter.exported);
        let queue = ExportQueue::start(batching(64), move || Ok(exporter)).unwrap();
        for _ in 0..10 {
            queue.on_end(span(true));
        }
        queue.on_end(span(false));
        queue.force_flush().unwrap();
        assert_eq!(exported.load(Ordering::SeqCst), 10, "batches of 4 plus the rest, before the delay");
        queue.on_end(span(true));
        queue.shutdown_with_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(exported.load(Ordering::SeqCst), 11);
        assert!(queue.shutdown_with_timeout(Duration::from_secs(1)).is_err(), "already shut down");
        queue.on_end(span(true)); // after shutdown: ignored, never a panic
    }

    #[test]
    fn a_full_queue_drops_at_once_instead_of_waiting() {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let exporter = Counting { gate: Some(Arc::clone(&gate)), ..Counting::default() };
        let exported = Arc::clone(&exporter.exported);
        let queue = ExportQueue::start(batching(2), move || Ok(exporter)).unwrap();
        let started = std::time::Instant::now();
        // The worker holds at most one batch of 4 in its hands, the queue 2 more; the
        // rest find the queue full.
        for _ in 0..100 {
            queue.on_end(span(true));
        }
        assert!(started.elapsed() < Duration::from_secs(1), "on_end never waits");
        gate.add_permits(1000);
        queue.shutdown_with_timeout(Duration::from_secs(5)).unwrap();
        let kept = exported.load(Ordering::SeqCst);
        assert!((2..=6).contains(&kept), "kept {kept} of 100");
    }

    /// Waits (up to 5 s) until `n` spans were exported.
    fn exported_reaches(exported: &AtomicUsize, n: usize) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while exported.load(Ordering::SeqCst) < n {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    #[test]
    fn a_batch_goes_when_it_is_full_or_when_its_delay_is_up() {
        // Full: the fourth span tells the worker, long before the minute is up.
        let exporter = Counting::default();
        let exported = Arc::clone(&exporter.exported);
        let queue = ExportQueue::start(batching(64), move || Ok(exporter)).unwrap();
        for _ in 0..3 {
            queue.on_end(span(true));
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(exported.load(Ordering::SeqCst), 0, "three spans wait for the batch");
        queue.on_end(span(true));
        assert!(exported_reaches(&exported, 4));
        queue.shutdown_with_timeout(Duration::from_secs(5)).unwrap();

        // Not full: it goes after the delay.
        let exporter = Counting::default();
        let exported = Arc::clone(&exporter.exported);
        let quick = Batching { delay: Duration::from_millis(20), ..batching(64) };
        let queue = ExportQueue::start(quick, move || Ok(exporter)).unwrap();
        queue.on_end(span(true));
        assert!(exported_reaches(&exported, 1));
        queue.shutdown_with_timeout(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn an_exporter_that_cannot_be_built_fails_the_start() {
        let failed = ExportQueue::start::<Counting, _>(batching(1), || anyhow::bail!("no such collector"));
        assert!(failed.is_err_and(|e| e.to_string().contains("no such collector")));
    }
}
