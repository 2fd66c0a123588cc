//! Breakers shared by replicas through Redis: when one replica's breaker of a `shared`
//! upstream or tool opens, closes, or is held or reset by the operator, every other
//! replica's breaker of the same key follows within a second — so a fleet stops calling
//! a broken tool as soon as one replica has seen it fail, and an operator isolates a tool
//! once for the whole fleet.
//!
//! The request path never waits on Redis: it reads the local breaker, as without sharing.
//! The breakers' feed hands each local change to a publisher task (an unbounded channel,
//! bounded in practice by the number of breakers); a follower task subscribes to the
//! channel and repeats other replicas' changes ([`Breaker::apply_remote`]), marked
//! remote so that they are never published again.
//!
//! - What is shared: opens (with the break left), closes after a successful probe, holds
//!   (with the operator's reason) and resets. Not the lazy move to half-open: every
//!   replica makes it by its own clock when its break ends; its probes' outcome, a close
//!   or a new open, is shared again.
//! - Conflicts: the last writer wins, by the wall-clock time of the transition (so the
//!   replicas' clocks should agree to well under a break, as NTP keeps them). An
//!   automatic transition never undoes an operator's hold, on any replica.
//! - Catch-up: the breakers open now are kept in a Redis hash whose entries expire with
//!   their break (on Redis's clock); a replica reads it whenever it (re)subscribes.
//! - Outages: while Redis is down, breakers stay local and requests are unaffected;
//!   both tasks retry with a capped exponential backoff (100 ms doubling to 2 s), the
//!   outage is logged once, and the latest local change of each breaker made meanwhile
//!   is published when Redis is back (an open with the break it has left).
//!
//! [`Breaker::apply_remote`]: super::Breaker::apply_remote

mod link;
mod message;
mod store;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::sync::{mpsc, watch};

use super::registry::Breakers;
use super::transition::{Change, Feed, Origin, State};
use crate::config::{BreakerConfig, Config};
use store::Store;

/// Shared breakers, set up and not yet running.
pub struct BreakerSharing {
    shared: Arc<Shared>,
    changes: mpsc::UnboundedSender<Change>,
    heard: mpsc::UnboundedReceiver<Change>,
}

/// What both tasks read.
struct Shared {
    /// This replica's id, in every message it publishes.
    replica: Arc<str>,
    store: Store,
    /// The upstreams whose breakers are shared here, with their settings (for breakers
    /// a remote change creates); a reload replaces them.
    upstreams: SharedUpstreams,
}

/// The upstreams whose breakers a replica shares, by name, with their breaker settings:
/// what a configuration reload updates.
pub type SharedUpstreams = Arc<arc_swap::ArcSwap<HashMap<Arc<str>, BreakerConfig>>>;

/// The upstreams of `config` whose breakers are `shared`, with their settings.
pub fn shared_upstreams(config: &Config) -> HashMap<Arc<str>, BreakerConfig> {
    config
        .upstreams
        .iter()
        .map(|up| (Arc::from(up.name.as_str()), up.breaker(&config.defaults.breaker)))
        .filter(|(_, cfg)| cfg.shared)
        .collect()
}

impl BreakerSharing {
    /// Sharing for `config`'s upstreams marked `shared`, or `None` when there is none.
    pub fn new(config: &Config) -> anyhow::Result<Option<BreakerSharing>> {
        let upstreams = shared_upstreams(config);
        if upstreams.is_empty() {
            return Ok(None);
        }
        let url = config.breaker_sharing_redis().context("shared breakers need breaker_sharing.redis")?;
        let store = Store::new(&url, &config.breaker_sharing.prefix).map_err(anyhow::Error::msg)?;
        let replica = replica_id();
        // The URL may carry a password: it is not logged.
        tracing::info!(replica = %replica, upstreams = upstreams.len(), prefix = %config.breaker_sharing.prefix, "breakers shared through Redis");
        let (changes, heard) = mpsc::unbounded_channel();
        let upstreams = Arc::new(arc_swap::ArcSwap::from_pointee(upstreams));
        Ok(Some(BreakerSharing { shared: Arc::new(Shared { replica, store, upstreams }), changes, heard }))
    }

    /// The upstreams whose breakers are shared, for a reload to replace.
    pub fn upstreams(&self) -> SharedUpstreams {
        Arc::clone(&self.shared.upstreams)
    }

    /// The breakers' feed: hands every local change of a shared breaker to the
    /// publisher, without waiting. Changes repeated from other replicas are not
    /// published again, nor are moves to half-open.
    pub fn feed(&self) -> Feed {
        let changes = self.changes.clone();
        Arc::new(move |change: &Change| {
            if change.shared && change.origin == Origin::Local && change.to != State::HalfOpen {
                // Only fails once the tasks are gone, at shutdown.
                let _ = changes.send(change.clone());
            }
        })
    }

    /// Starts the publisher and the follower, which repeat changes on `breakers`; both
    /// end when the handle is aborted.
    pub fn spawn(self, breakers: Arc<Breakers>) -> tokio::task::JoinHandle<()> {
        let BreakerSharing { shared, changes, heard } = self;
        drop(changes);
        crate::telemetry::metrics::breaker_sharing_connected(false);
        tokio::spawn(async move {
            let (up, is_up) = watch::channel(false);
            tokio::join!(link::publish(&shared, heard, is_up), link::follow(&shared, &breakers, &up));
        })
    }
}

/// `<host>-<8 hex digits>`: the host name (Kubernetes sets `HOSTNAME` to the pod's) for
/// the logs, and a random part so that a restarted replica is a new one.
fn replica_id() -> Arc<str> {
    let host: String = std::env::var("HOSTNAME")
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(63)
        .collect();
    let host = if host.is_empty() { "seawall".to_owned() } else { host };
    Arc::from(format!("{host}-{:08x}", rand::random::<u32>()))
}
