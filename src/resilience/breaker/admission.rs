//! The permits of one admitted call, and the drop guard that still counts the call when
//! its future is dropped before it finishes.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::classify::{self, Cause};
use super::state::Permit;
use crate::errors::GatewayError;
use crate::upstream::Reply;
use crate::upstream::service::CallCtx;

/// Leave from the upstream's breaker and, for a `tools/call`, from the tool's.
#[derive(Debug)]
pub(super) struct Admission {
    upstream: Option<Permit>,
    tool: Option<Permit>,
    ctx: Arc<CallCtx>,
    started: Instant,
    slow_call: Duration,
}

impl Admission {
    /// Starts timing the call now.
    pub fn new(upstream: Permit, tool: Option<Permit>, ctx: Arc<CallCtx>, slow_call: Duration) -> Admission {
        Admission { upstream: Some(upstream), tool, ctx, started: Instant::now(), slow_call }
    }

    /// Whether either breaker is half-open and this call is its probe.
    pub fn probing(&self) -> bool {
        self.upstream.as_ref().is_some_and(Permit::is_probe) || self.tool.as_ref().is_some_and(Permit::is_probe)
    }

    /// Records how the call ended on both breakers.
    pub fn finish(mut self, result: &Result<Reply, GatewayError>) {
        self.settle(Cause::of(result));
    }

    fn settle(&mut self, cause: Cause) {
        let Some(upstream) = self.upstream.take() else { return };
        let slow = self.started.elapsed() > self.slow_call;
        match self.tool.take() {
            None => upstream.record(cause.verdict(slow)),
            Some(tool) => {
                let (on_upstream, on_tool) = classify::split(cause, slow, upstream.is_probe());
                upstream.record(on_upstream);
                tool.record(on_tool);
            }
        }
    }
}

impl Drop for Admission {
    /// The call's future was dropped unfinished: the request context says why.
    fn drop(&mut self) {
        if self.upstream.is_some() {
            let cause = Cause::abandoned(self.ctx.abandoned(), self.ctx.remaining().is_zero());
            self.settle(cause);
        }
    }
}
