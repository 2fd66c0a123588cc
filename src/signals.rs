//! Process signals: SIGINT and SIGTERM end the gateway gracefully; SIGHUP, which
//! service managers send to ask for a reload, is logged and otherwise ignored until
//! hot reload exists, so it never drops the sessions in flight.

/// Completes on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub(crate) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
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
