//! Process signals and what the gateway sees of a graceful shutdown.
//!
//! SIGINT and SIGTERM end the gateway gracefully ([`ShutdownSignals`]; `app::shutdown`
//! runs the sequence); SIGHUP asks for a configuration reload ([`Hangups`];
//! `app::reload` serves it), so it never drops the sessions in flight. [`Drain`] is the shutdown's progress as the rest of the gateway reads it:
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

/// SIGHUP, which service managers send to ask for a reload, watched from the moment
/// this is made (its default action, ending the process, is replaced then: a SIGHUP
/// right after start-up is already harmless).
pub(crate) struct Hangups {
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Hangups {
    /// Installs the handler. Must be called inside the runtime.
    pub(crate) fn install() -> Hangups {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::hangup()) {
                Ok(hup) => Hangups { hup: Some(hup) },
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch SIGHUP; it ends the process at once");
                    Hangups { hup: None }
                }
            }
        }
        #[cfg(not(unix))]
        Hangups {}
    }

    /// Completes on the next SIGHUP; never where it cannot be watched.
    pub(crate) async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(hup) = &mut self.hup
            && hup.recv().await.is_some()
        {
            return;
        }
        std::future::pending::<()>().await;
    }

    /// Logs each SIGHUP as a request that cannot be served (no file to read again),
    /// until the runtime stops.
    pub(crate) fn ignore(mut self, why: &'static str) {
        tokio::spawn(async move {
            loop {
                self.recv().await;
                tracing::warn!(signal = "SIGHUP", "{why}");
            }
        });
    }
}
