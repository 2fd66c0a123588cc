//! Process signals and what the gateway sees of a graceful shutdown.
//!
//! SIGINT and SIGTERM end the gateway gracefully ([`ShutdownSignals`]; `app::shutdown`
//! runs the sequence); SIGHUP, which service managers send to ask for a reload, is logged
//! and otherwise ignored until hot reload exists, so it never drops the sessions in
//! flight. [`Drain`] is the shutdown's progress as the rest of the gateway reads it:
//! readiness fails from its first moment, and requests still running when its grace
//! period ends are answered -32014.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How far a graceful shutdown has come. Clones share one state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Drain(Arc<DrainState>);

#[derive(Debug, Default)]
struct DrainState {
    draining: AtomicBool,
    expired: AtomicBool,
}

impl Drain {
    /// The shutdown has begun: `/readyz` answers 503 from now on.
    pub(crate) fn begin(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the shutdown has begun.
    pub(crate) fn is_draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }

    /// The grace period is over: requests cancelled from now on are answered as stopped
    /// by the shutdown.
    pub(crate) fn expire(&self) {
        self.begin();
        self.0.expired.store(true, Ordering::SeqCst);
    }

    /// Whether the grace period is over.
    pub(crate) fn is_expired(&self) -> bool {
        self.0.expired.load(Ordering::SeqCst)
    }
}

/// SIGINT and, on Unix, SIGTERM, watched from the moment this is made (so a signal
/// right after start-up already ends the gateway gracefully), each one reported.
pub(crate) struct ShutdownSignals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignals {
    /// Installs the handlers. Must be called inside the runtime.
    pub(crate) fn install() -> ShutdownSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let watch = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(signal = name, error = %e, "cannot watch the signal; it ends the process at once");
                    None
                }
            };
            ShutdownSignals {
                term: watch(SignalKind::terminate(), "SIGTERM"),
                int: watch(SignalKind::interrupt(), "SIGINT"),
            }
        }
        #[cfg(not(unix))]
        ShutdownSignals {}
    }

    /// Completes on the next SIGINT or SIGTERM, naming it.
    pub(crate) async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            async fn next(signal: &mut Option<tokio::signal::unix::Signal>) {
                let received = match signal {
                    Some(s) => s.recv().await.is_some(),
                    None => false,
                };
                if !received {
                    std::future::pending::<()>().await;
                }
            }
            tokio::select! {
                () = next(&mut self.term) => "SIGTERM",
                () = next(&mut self.int) => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}

/// Completes on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub(crate) async fn shutdown_signal() {
    ShutdownSignals::install().recv().await;
}

/// Replaces SIGHUP's default action (ending the process) by a warning per signal.
/// Must be called inside the runtime; the handler is installed before it returns, so a
/// SIGHUP right after start-up is already harmless. The watcher runs until the runtime
/// stops.
pub(crate) fn ignore_reload_requests() {
    #[cfg(unix)]
    {
        let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGHUP; it will end the process");
                return;
            }
        };
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                tracing::warn!(
                    signal = "SIGHUP",
                    "configuration reload is not supported yet; restart to apply changes"
                );
            }
        });
    }
}
