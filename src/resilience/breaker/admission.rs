//! The permits of one admitted call. A call whose future is dropped unfinished was
//! cancelled (timeouts arrive as results from the attempt layer below), so its permits
//! go back uncounted.

use std::time::Duration;

use tokio::time::Instant;

use super::classify::{self, Verdict};
use super::state::Permit;
use crate::call::{Answer, GatewayError, Health};

/// Leave from the upstream's breaker and, for a `tools/call`, from the tool's.
#[derive(Debug)]
pub(super) struct Admission {
    upstream: Option<Permit>,
    tool: Option<Permit>,
    started: Instant,
    slow_call: Duration,
}

impl Admission {
    /// Starts timing the call at `started`, when its permits were acquired.
    pub(super) fn new(upstream: Permit, tool: Option<Permit>, started: Instant, slow_call: Duration) -> Admission {
        Admission { upstream: Some(upstream), tool, started, slow_call }
    }

    /// Whether either breaker is half-open and this call is its probe.
    pub(super) fn probing(&self) -> bool {
        self.upstream.as_ref().is_some_and(Permit::is_probe) || self.tool.as_ref().is_some_and(Permit::is_probe)
    }

    /// Records how the call ended on both breakers.
    pub(super) fn finish(mut self, result: &Result<Answer, GatewayError>) {
        self.settle(classify::health(result));
    }

    /// Gives the permits back uncounted: the call said nothing about health.
    pub(super) fn finish_ignored(mut self) {
        self.settle(Health::Irrelevant);
    }

    fn settle(&mut self, health: Health) {
        let Some(upstream) = self.upstream.take() else { return };
        // One reading of the clock for the call's length and both breakers.
        let now = Instant::now();
        let slow = now.saturating_duration_since(self.started) > self.slow_call;
        match self.tool.take() {
            None => upstream.record_at(Verdict::of(health, slow), now),
            Some(tool) => {
                let (on_upstream, on_tool) = classify::split(health, slow, upstream.is_probe());
                upstream.record_at(on_upstream, now);
                tool.record_at(on_tool, now);
            }
        }
    }
}

impl Drop for Admission {
    /// Dropped unfinished: cancelled, which says nothing about health.
    fn drop(&mut self) {
        if self.upstream.is_some() {
            self.settle(Health::Irrelevant);
        }
    }
}
