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

#[cfg(test)]
mod tests {
    //! The wire format of shared transitions, and what the feed hands to the publisher.

    use std::sync::Arc;
    use std::time::Duration;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::message::{MAX_MESSAGE, Message};
    use super::{BreakerSharing, Shared, Store};
    use crate::resilience::breaker::transition::{BreakerKey, Change, Hold, Origin, Reason, Remote, State};

    fn key(tool: Option<&str>) -> BreakerKey {
        BreakerKey { upstream: Arc::from("search"), tool: tool.map(Arc::from) }
    }

    fn change(to: State, reason: Reason, break_for: Option<Duration>, hold: Option<Hold>) -> Change {
        Change {
            key: key(Some("query")),
            to,
            reason,
            break_for,
            hold,
            at_ms: 1_767_225_600_000,
            origin: Origin::Local,
            shared: true,
        }
    }

    fn replica() -> Arc<str> {
        Arc::from("pod-a-0badcafe")
    }

    fn decoded(value: Value) -> Option<Message> {
        Message::decode(value.to_string().as_bytes())
    }

    #[test]
    fn every_shared_change_survives_the_wire() {
        let isolated = Hold::Open { reason: Arc::from("bad deploy, back at 14:00 UTC") };
        let cases = [
            (
                change(State::Open, Reason::ConsecutiveFailures, Some(Duration::from_millis(4870)), None),
                Remote::Opened { break_for: Duration::from_millis(4870) },
            ),
            (change(State::Closed, Reason::ProbeSucceeded, None, None), Remote::Closed),
            (change(State::Open, Reason::ForcedOpen, None, Some(isolated.clone())), Remote::Held(isolated)),
            (change(State::Closed, Reason::ForcedClosed, None, Some(Hold::Closed)), Remote::Held(Hold::Closed)),
            (change(State::Closed, Reason::Reset, None, None), Remote::Reset),
        ];
        for (change, remote) in cases {
            let message = Message::of(&replica(), &change).expect("shared");
            assert_eq!(message.remote, remote);
            let text = message.encode();
            assert_eq!(Message::decode(text.as_bytes()), Some(message), "{text}");
        }
    }

    #[test]
    fn the_format_is_compact_json_with_the_fields_the_readme_names() {
        let opened = change(State::Open, Reason::ConsecutiveFailures, Some(Duration::from_secs(5)), None);
        let text = Message::of(&replica(), &opened).unwrap().encode();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            json!({"v": 1, "replica": "pod-a-0badcafe", "upstream": "search", "tool": "query", "kind": "opened",
                   "cause": "consecutive_failures", "at_ms": 1_767_225_600_000_u64, "break_ms": 5000})
        );
        let mut upstream = change(State::Open, Reason::ForcedOpen, None, Some(Hold::Open { reason: Arc::from("why") }));
        upstream.key = key(None);
        let value: Value = serde_json::from_str(&Message::of(&replica(), &upstream).unwrap().encode()).unwrap();
        assert_eq!(value["kind"], "held_open");
        assert_eq!(value["reason"], "why");
        assert!(value.get("tool").is_none() && value.get("break_ms").is_none(), "{value}");
    }

    #[test]
    fn the_move_to_half_open_is_not_shared() {
        let half_open = change(State::HalfOpen, Reason::BreakElapsed, None, None);
        assert_eq!(Message::of(&replica(), &half_open), None);
    }

    #[test]
    fn malformed_messages_are_ignored() {
        let good = json!({"v": 1, "replica": "r", "upstream": "u", "kind": "opened", "at_ms": 5, "break_ms": 10});
        assert!(decoded(good.clone()).is_some());
        let with = |field: &str, value: Value| {
            let mut v = good.clone();
            v[field] = value;
            v
        };
        let without = |field: &str| {
            let mut v = good.clone();
            v.as_object_mut().unwrap().remove(field);
            v
        };
        for bad in [
            with("v", json!(2)),
            with("kind", json!("exploded")),
            with("at_ms", json!(-1)),
            with("at_ms", json!("soon")),
            with("break_ms", json!(0)),
            with("break_ms", json!(1.5)),
            with("upstream", json!("")),
            with("upstream", json!(7)),
            with("replica", json!("a\nb")),
            with("tool", json!("x".repeat(300))),
            with("tool", json!("")),
            with("kind", json!("held_open")),
            without("break_ms"),
            without("replica"),
            without("at_ms"),
            json!([1, 2, 3]),
            json!(null),
        ] {
            assert_eq!(decoded(bad.clone()), None, "{bad}");
        }
        for bytes in [&b""[..], b"{", b"\xff\xfe", b"{\"v\":1", "{}".as_bytes()] {
            assert_eq!(Message::decode(bytes), None);
        }
        let huge = with("cause", json!("c".repeat(MAX_MESSAGE)));
        assert_eq!(decoded(huge), None, "oversized");
        // Fields a later version adds are no reason to drop a message.
        assert!(decoded(with("extra", json!({"nested": true}))).is_some());
    }

    #[test]
    fn texts_from_the_wire_are_sanitised() {
        let held = json!({"v": 1, "replica": "r", "upstream": "u", "kind": "held_open", "at_ms": 5,
                          "reason": "  down \u{1b}[31mnow\u{7}  ", "cause": "x".repeat(500)});
        let message = decoded(held).unwrap();
        let Remote::Held(Hold::Open { reason }) = &message.remote else { panic!("{message:?}") };
        assert!(reason.bytes().all(|b| b.is_ascii_graphic() || b == b' '), "{reason}");
        assert!(reason.starts_with("down"), "{reason}");
        assert!(message.cause.as_deref().is_some_and(|c| c.len() <= 64));
        let blank = json!({"v": 1, "replica": "r", "upstream": "u", "kind": "held_open", "at_ms": 5, "reason": "   "});
        assert_eq!(decoded(blank), None, "a hold open without a reason");
    }

    #[test]
    fn the_hash_keeps_opens_for_their_break_and_holds_until_released() {
        let message = |c: Change| Message::of(&replica(), &c).unwrap();
        let opened = message(change(State::Open, Reason::FailureRate, Some(Duration::from_secs(3)), None));
        assert_eq!(opened.kept_for(), Some(Some(Duration::from_secs(3))));
        assert_eq!(opened.field(), "search/query");
        assert_eq!(
            opened.with_break_left(Duration::from_millis(1200)).remote,
            Remote::Opened { break_for: Duration::from_millis(1200) }
        );
        let held = message(change(State::Open, Reason::ForcedOpen, None, Some(Hold::Open { reason: Arc::from("r") })));
        assert_eq!(held.kept_for(), Some(None));
        for closed in [
            change(State::Closed, Reason::ProbeSucceeded, None, None),
            change(State::Closed, Reason::Reset, None, None),
            change(State::Closed, Reason::ForcedClosed, None, Some(Hold::Closed)),
        ] {
            assert_eq!(message(closed).kept_for(), None, "a close removes the breaker from the hash");
        }
    }

    #[tokio::test]
    async fn the_feed_publishes_only_local_changes_of_shared_breakers() {
        let store = Store::new("redis://127.0.0.1:1", "t:").unwrap();
        let shared = Arc::new(Shared { replica: replica(), store, upstreams: Arc::default() });
        let (changes, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let sharing = BreakerSharing { shared, changes, heard: tokio::sync::mpsc::unbounded_channel().1 };
        let feed = sharing.feed();
        drop(sharing);
        let opened = change(State::Open, Reason::ConsecutiveFailures, Some(Duration::from_secs(1)), None);
        let remote = Change { origin: Origin::Remote, ..opened.clone() };
        let unshared = Change { shared: false, ..opened.clone() };
        let half_open = change(State::HalfOpen, Reason::BreakElapsed, None, None);
        for c in [&remote, &unshared, &half_open, &opened] {
            feed(c);
        }
        assert_eq!(heard.try_recv().ok(), Some(opened), "only the local change of a shared breaker");
        assert!(heard.try_recv().is_err());
    }

    proptest! {
        #[test]
        fn decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = Message::decode(&bytes);
        }

        #[test]
        fn decoding_json_like_text_never_panics(text in r#"\{"v":1,"replica":"[a-z]{0,3}","upstream":"[a-z\\]{0,4}","kind":"[a-z_]{0,10}","at_ms":[0-9-]{0,22}(,"break_ms":[0-9.e-]{0,22})?(,"reason":"[ -~]{0,8}")?\}"#) {
            let _ = Message::decode(text.as_bytes());
        }
    }
}
