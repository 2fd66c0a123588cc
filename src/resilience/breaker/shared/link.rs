//! The two tasks of shared breakers: one publishes this replica's transitions, one
//! follows the channel and repeats the others'. Neither is on the request path, and
//! while Redis is down both keep trying, with a capped exponential backoff, while the
//! breakers simply stay local.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt as _;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::Shared;
use super::message::Message;
use crate::resilience::breaker::registry::Breakers;
use crate::resilience::breaker::transition::{BreakerKey, Change, Remote};

/// The first wait after a failure; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two attempts to reach Redis: a replica follows the others
/// again at most this long after Redis is back.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How often the subscribed connection is pinged, so that a silent one is noticed.
const PING_EVERY: Duration = Duration::from_secs(5);

/// The wait after `failures` failures in a row: `min(2 s, 100 ms·2^(n-1))`, less up to
/// a quarter at random so that replicas cut off together do not return in step.
fn backoff(failures: u32) -> Duration {
    let full = crate::backoff::doubling(MIN_BACKOFF, MAX_BACKOFF, failures.saturating_sub(1));
    full.mul_f64(rand::random_range(0.75..=1.0))
}

/// A change waiting to be published, with when it was heard (an open's break runs on).
struct Pending {
    change: Change,
    heard: Instant,
}

/// Publishes every local change of a shared breaker; while Redis cannot be reached, keeps
/// the latest per breaker and publishes those once it can (an open with the break left).
pub(super) async fn publish(
    shared: &Shared,
    mut changes: mpsc::UnboundedReceiver<Change>,
    mut up: watch::Receiver<bool>,
) {
    let mut pending: HashMap<BreakerKey, Pending> = HashMap::new();
    let mut failures = 0u32;
    // Whether this run of failures was logged: an outage is logged by the follower, so
    // here only failures while the link is up (a Redis that refuses the script).
    let mut warned = false;
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Some(change) => {
                    pending.insert(change.key.clone(), Pending { change, heard: Instant::now() });
                }
                None => return,
            },
            // The link is back: no need to wait out the backoff.
            Ok(()) = up.changed(), if failures > 0 => {}
            () = tokio::time::sleep(backoff(failures)), if failures > 0 => {}
        }
        while let Ok(change) = changes.try_recv() {
            pending.insert(change.key.clone(), Pending { change, heard: Instant::now() });
        }
        match flush(shared, &mut pending).await {
            Ok(()) => {
                if std::mem::take(&mut warned) {
                    tracing::info!("breaker transitions published again");
                }
                failures = 0;
            }
            Err(why) if warned || !*up.borrow() => {
                tracing::debug!(error = %why, "breaker transitions wait until Redis answers");
                failures = failures.saturating_add(1);
            }
            Err(why) => {
                tracing::warn!(error = %why, "cannot publish breaker transitions; they wait until Redis answers");
                warned = true;
                failures = failures.saturating_add(1);
            }
        }
    }
}

/// Publishes every pending change; stops at the first failure, keeping what is left.
async fn flush(shared: &Shared, pending: &mut HashMap<BreakerKey, Pending>) -> Result<(), String> {
    let keys: Vec<BreakerKey> = pending.keys().cloned().collect();
    for key in keys {
        let Some(waiting) = pending.get(&key) else { continue };
        let message = Message::of(&shared.replica, &waiting.change).and_then(|message| {
            let left = message.kept_for().flatten().map(|b| b.saturating_sub(waiting.heard.elapsed()));
            match left {
                // The break is over here too: nothing left to tell.
                Some(left) if left.is_zero() => None,
                Some(left) => Some(message.with_break_left(left)),
                None => Some(message),
            }
        });
        if let Some(message) = message {
            shared.store.publish(&message).await?;
        }
        pending.remove(&key);
    }
    Ok(())
}

/// Follows the channel: subscribes, catches up on the breakers open now, then repeats
/// every message of another replica until the connection fails; then again, after a
/// backoff. `up` says whether the link is up (the publisher retries when it comes back).
pub(super) async fn follow(shared: &Shared, breakers: &Breakers, up: &watch::Sender<bool>) {
    let mut failures = 0u32;
    let mut down_since: Option<Instant> = None;
    loop {
        let why = match connect(shared, breakers).await {
            Ok((mut sink, mut stream)) => {
                failures = 0;
                match down_since.take() {
                    Some(since) => tracing::info!(
                        down_ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
                        "breaker sharing reached Redis again; shared breakers follow the other replicas"
                    ),
                    None => tracing::info!(channel = shared.store.channel(), "breaker sharing subscribed"),
                }
                crate::telemetry::metrics::breaker_sharing_connected(true);
                up.send_replace(true);
                let why = listen(shared, breakers, &mut sink, &mut stream).await;
                up.send_replace(false);
                crate::telemetry::metrics::breaker_sharing_connected(false);
                why
            }
            Err(why) => why,
        };
        // Logged once per outage.
        if down_since.is_none() {
            down_since = Some(Instant::now());
            tracing::warn!(error = %why, "breaker sharing cannot reach Redis; breakers stay local until it is back");
        }
        failures = failures.saturating_add(1);
        tokio::time::sleep(backoff(failures)).await;
    }
}

/// Subscribes, then reads the breakers open now (after subscribing, so that nothing
/// published in between is missed).
async fn connect(shared: &Shared, breakers: &Breakers) -> Result<(PubSubSink, PubSubStream), String> {
    let (sink, stream) = shared.store.subscribe().await?.split();
    let open = shared.store.open_now().await?;
    for entry in open {
        let Some(message) = Message::decode(&entry.message) else { continue };
        let message = match entry.left {
            Some(left) => message.with_break_left(left),
            None => message,
        };
        shared.repeat(breakers, &message);
    }
    Ok((sink, stream))
}

/// Repeats each message until the connection ends or stops answering pings; says why.
async fn listen(shared: &Shared, breakers: &Breakers, sink: &mut PubSubSink, stream: &mut PubSubStream) -> String {
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.tick().await;
    loop {
        tokio::select! {
            message = stream.next() => match message {
                Some(message) => shared.receive(breakers, message.get_payload_bytes()),
                None => return "the connection closed".to_owned(),
            },
            _ = ping.tick() => {
                match tokio::time::timeout(shared.store.timeout(), sink.ping::<redis::Value>()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return e.to_string(),
                    Err(_) => return "no answer to a ping in time".to_owned(),
                }
            }
        }
    }
}

impl Shared {
    /// A message from the channel: repeated unless it is malformed or this replica's own.
    fn receive(&self, breakers: &Breakers, payload: &[u8]) {
        match Message::decode(payload) {
            Some(message) if message.replica == self.replica => {}
            Some(message) => self.repeat(breakers, &message),
            None => tracing::debug!(bytes = payload.len(), "ignored a malformed breaker message"),
        }
    }

    /// Repeats `message` on this replica's breaker of the same key, if that upstream's
    /// breakers are shared here.
    pub(super) fn repeat(&self, breakers: &Breakers, message: &Message) {
        let upstreams = self.upstreams.load();
        let Some((name, cfg)) = upstreams.get_key_value(&*message.key.upstream) else { return };
        let breaker = match &message.key.tool {
            None => breakers.upstream(name, cfg),
            Some(tool) => match breakers.tool(name, tool, cfg) {
                Some(breaker) => breaker,
                None => return,
            },
        };
        let Some((from, to)) = breaker.apply_remote(&message.remote, message.at_ms) else { return };
        let tool = message.key.tool.as_deref();
        crate::telemetry::metrics::breaker_remote_transition(name, tool.is_some(), to.as_str());
        let note = match &message.remote {
            Remote::Held(crate::resilience::breaker::Hold::Open { reason }) => Some(&**reason),
            _ => None,
        };
        tracing::info!(
            upstream = &**name,
            tool,
            from = from.as_str(),
            to = to.as_str(),
            replica = &*message.replica,
            cause = message.cause.as_deref(),
            note,
            "circuit breaker follows another replica"
        );
    }
}
