//! The graceful shutdown of `seawall run`, in order:
//!
//! 1. the first SIGTERM or SIGINT: `/readyz` answers 503 ([`Drain::begin`]);
//! 2. after `shutdown.drain_delay` (load balancers notice the failing readiness and stop
//!    sending; requests are still served meanwhile) the MCP listener stops accepting, and
//!    its connections finish what they carry and close (HTTP/1 keep-alive ends, HTTP/2
//!    sends GOAWAY);
//! 3. requests in flight get up to `shutdown.grace` to finish, with their real answers;
//! 4. those still running then are stopped ([`Drain::expire`]): each is answered -32014
//!    and its upstream call cancelled;
//! 5. the long-lived streams end (GET streams, HTTP+SSE streams, subscriptions), so the
//!    last connections close;
//!
//! then `run` ends the sessions (closing their upstream sessions and per-session
//! processes), stops the shared stdio processes and exits 0. The admin listener serves
//! throughout, so `/readyz` can be watched failing. A second signal cuts every wait
//! short.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::ShutdownConfig;
use crate::gateway::Gateway;
use crate::signals::{Drain, ShutdownSignals};

/// How long requests stopped at the end of the grace period get for their answers.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);
/// Pause before the long-lived streams end, so that answers just queued on an HTTP+SSE
/// stream go out first.
const FLUSH: Duration = Duration::from_millis(250);
/// How often requests in flight are counted while draining.
const POLL: Duration = Duration::from_millis(20);
/// Beyond the grace period, how long the MCP listener waits for its last connections
/// (a client that does not read its answer) before dropping them.
pub(super) const LISTENER_MARGIN: Duration = Duration::from_secs(5);

/// What the shutdown acts on.
pub(super) struct Shutdown<'a> {
    /// Counts and stops the requests in flight.
    pub gateway: &'a Gateway,
    /// What readiness and the client stack see of the shutdown.
    pub drain: &'a Drain,
    /// The grace period and the drain delay.
    pub config: ShutdownConfig,
    /// Fired to make the MCP listener stop accepting.
    pub accepting: CancellationToken,
    /// Fired to end the long-lived streams.
    pub closing: CancellationToken,
}

impl Shutdown<'_> {
    /// Waits for the first signal, then runs steps 1 to 5.
    pub(super) async fn run(self, mut signals: ShutdownSignals) {
        let signal = signals.recv().await;
        self.drain.begin();
        let (grace, delay) = (self.config.grace, self.config.drain_delay);
        tracing::info!(signal, grace_ms = millis(grace), drain_delay_ms = millis(delay), "shutting down: not ready");
        // A second signal: no more waiting.
        let hurry = CancellationToken::new();
        let watcher = tokio::spawn({
            let hurry = hurry.clone();
            async move {
                let signal = signals.recv().await;
                tracing::warn!(signal, "second signal: ending the grace period now");
                hurry.cancel();
            }
        });
        if !delay.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = hurry.cancelled() => {}
            }
        }
        self.accepting.cancel();
        let busy = in_flight(self.gateway);
        tracing::info!(in_flight = busy, "stopped accepting connections; draining the requests in flight");
        if !self.idle_by(Instant::now() + grace, &hurry).await {
            tracing::warn!(
                in_flight = in_flight(self.gateway),
                "grace period over: stopping the requests still in flight (-32014)"
            );
            self.drain.expire();
            for session in self.gateway.sessions().all() {
                session.cancel_requests();
            }
            self.idle_by(Instant::now() + ANSWER_WITHIN, &CancellationToken::new()).await;
        } else if busy > 0 {
            tracing::info!("every request in flight finished");
        }
        if busy > 0 {
            tokio::time::sleep(FLUSH).await;
        }
        self.closing.cancel();
        watcher.abort();
    }

    /// Waits until no request is in flight (`true`), or `deadline` or `hurry` (`false`).
    async fn idle_by(&self, deadline: Instant, hurry: &CancellationToken) -> bool {
        loop {
            if in_flight(self.gateway) == 0 {
                return true;
            }
            if Instant::now() >= deadline || hurry.is_cancelled() {
                return false;
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = hurry.cancelled() => {}
            }
        }
    }
}

/// Client requests in flight, over every session and modern-era context.
fn in_flight(gateway: &Gateway) -> usize {
    gateway.sessions().all().iter().map(|s| s.inflight()).sum()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
