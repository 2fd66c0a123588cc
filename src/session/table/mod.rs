//! The table of live sessions: minting ids, lookup, idle expiry, and the sessions
//! resumed from sealed ids. Making room for a new session under the caps is `room`'s.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;

use super::Session;
use super::sealed::{SessionKeys, unix_now};
use crate::hashing::Map as HashMap;

mod ended;
mod places;
mod room;

use ended::Ended;
use places::Places;
pub(crate) use places::{Holder, TableFull};
pub(crate) use room::Reservation;

/// A fresh session id: 32 random bytes, base64url (43 visible ASCII characters).
pub(crate) fn mint_id() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Live sessions by id.
pub(crate) struct SessionTable {
    sessions: parking_lot::RwLock<HashMap<String, Arc<Session>>>,
    places: parking_lot::Mutex<Places>,
    max: usize,
    max_per_peer: usize,
    max_per_principal: usize,
    idle_timeout: Duration,
    /// The keys that seal session ids; none: ids are random.
    keys: Option<Arc<SessionKeys>>,
    /// Held while a session is resumed, so that concurrent first requests for one sealed
    /// id make one session.
    resuming: parking_lot::Mutex<()>,
    /// Sealed ids of sessions ended here, refused until they expire.
    ended: parking_lot::Mutex<Ended>,
}

/// Whether idle expiry may end `session` once it is unused for long enough: nothing in
/// flight, no `subscriptions/listen` stream.
fn may_expire(session: &Session) -> bool {
    session.inflight() == 0 && !session.is_listened()
}

/// How often sessions idle past the idle timeout are reaped.
pub(crate) const REAP_EVERY: Duration = Duration::from_secs(15);

impl SessionTable {
    /// An empty table.
    pub(crate) fn new(max: usize, idle_timeout: Duration) -> SessionTable {
        SessionTable {
            sessions: parking_lot::RwLock::new(HashMap::default()),
            places: parking_lot::Mutex::new(Places::default()),
            max,
            max_per_peer: 0,
            max_per_principal: 0,
            idle_timeout,
            keys: None,
            resuming: parking_lot::Mutex::new(()),
            ended: parking_lot::Mutex::new(Ended::default()),
        }
    }

    /// Seals the ids of new sessions with `keys` (and, when they are shared, resumes
    /// sessions sealed by other replicas).
    pub(crate) fn with_keys(mut self, keys: Arc<SessionKeys>) -> SessionTable {
        self.keys = Some(keys);
        self
    }

    /// The keys that seal session ids, if they are sealed.
    pub(crate) fn keys(&self) -> Option<&Arc<SessionKeys>> {
        self.keys.as_ref()
    }

    /// Caps the sessions one client IP address may hold (0: no cap).
    pub(crate) fn with_max_per_peer(mut self, max_per_peer: usize) -> SessionTable {
        self.max_per_peer = max_per_peer;
        self
    }

    /// Caps the sessions one authenticated principal may hold (0: no cap).
    pub(crate) fn with_max_per_principal(mut self, max_per_principal: usize) -> SessionTable {
        self.max_per_principal = max_per_principal;
        self
    }

    fn released(&self, session: Option<Arc<Session>>) -> Option<Arc<Session>> {
        if let Some(s) = &session {
            let mut places = self.places.lock();
            let holder = places.owner.remove(s.id()).unwrap_or_default();
            places.release(&holder);
        }
        session
    }

    /// Looks a session up and marks it used.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        let map = self.sessions.read();
        let session = map.get(id).cloned()?;
        session.touch();
        Some(session)
    }

    /// Removes a session.
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let removed = self.sessions.write().remove(id);
        self.released(removed)
    }

    /// Removes a session that ended (DELETE): its sealed id is not resumed here again.
    pub(crate) fn end(&self, id: &str) -> Option<Arc<Session>> {
        self.remember_ended(id);
        self.remove(id)
    }

    /// Remembers that the sealed id `id` ended here, so that it is not resumed again.
    fn remember_ended(&self, id: &str) {
        if let Some(keys) = self.keys.as_ref().filter(|k| k.is_shared()) {
            let now = unix_now();
            self.ended.lock().insert(id, now.saturating_add(keys.lifetime().as_secs()), now);
        }
    }

    /// Whether a session with this id ended here.
    pub(crate) fn has_ended(&self, id: &str) -> bool {
        self.ended.lock().contains(id)
    }

    /// The live session `id`, or the one `build` makes for it in a place held for
    /// `holder` (refused when a cap is reached). One resumption at a time, so concurrent
    /// first requests for one id get the same session. Also returns the session let go
    /// to make room for it, if one was.
    pub(crate) fn resume(
        &self,
        id: &str,
        holder: Holder,
        build: impl FnOnce() -> Arc<Session>,
    ) -> Result<(Arc<Session>, Option<Arc<Session>>), TableFull> {
        let _one_at_a_time = self.resuming.lock();
        if let Some(session) = self.get(id) {
            return Ok((session, None));
        }
        let (reservation, let_go) = self.reserve(holder)?;
        let session = build();
        self.insert_reserved(reservation, Arc::clone(&session));
        Ok((session, let_go))
    }

    /// Removes and returns sessions idle for longer than the idle timeout (and with
    /// nothing in flight).
    pub(crate) fn reap_idle(&self) -> Vec<Arc<Session>> {
        let mut map = self.sessions.write();
        let idle: Vec<String> = map
            .values()
            .filter(|s| may_expire(s) && s.last_seen().elapsed() > self.idle_timeout)
            .map(|s| s.id().to_owned())
            .collect();
        let reaped: Vec<_> = idle.iter().filter_map(|id| map.remove(id)).collect();
        drop(map);
        reaped.into_iter().filter_map(|s| self.released(Some(s))).collect()
    }

    /// Every live session.
    pub(crate) fn all(&self) -> Vec<Arc<Session>> {
        self.sessions.read().values().cloned().collect()
    }

    /// Removes every session (shutdown).
    pub(crate) fn drain(&self) -> Vec<Arc<Session>> {
        let drained: Vec<_> = self.sessions.write().drain().map(|(_, s)| s).collect();
        drained.into_iter().filter_map(|s| self.released(Some(s))).collect()
    }

    /// Number of live sessions.
    pub(crate) fn len(&self) -> usize {
        self.sessions.read().len()
    }
}

/// What the tests of the table and of making room share.
#[cfg(test)]
mod test_support {
    use std::sync::Arc;

    use super::Holder;
    use crate::session::{Scope, Session};

    pub(super) fn session() -> Arc<Session> {
        Session::new(Scope::Aggregate, "2025-11-25".into(), serde_json::json!({}), serde_json::json!({}))
    }

    pub(super) fn from(peer: &str) -> Holder {
        Holder { peer: Some(peer.parse().unwrap()), principal: None }
    }
}

#[cfg(test)]
mod tests {
    use super::places::Cap;
    use super::test_support::{from, session};
    use super::*;

    fn keys() -> Arc<SessionKeys> {
        Arc::new(SessionKeys::shared(&[7; 32], &[], Duration::from_secs(3600)).unwrap())
    }

    #[tokio::test]
    async fn concurrent_resumptions_of_one_id_make_one_session_within_the_caps() {
        let table = Arc::new(SessionTable::new(2, Duration::from_secs(60)).with_keys(keys()));
        let built = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (table, built) = (Arc::clone(&table), Arc::clone(&built));
                let rt = tokio::runtime::Handle::current();
                std::thread::spawn(move || {
                    let _rt = rt.enter();
                    let resumed = table.resume("sealed-id", from("10.0.0.1"), || {
                        built.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(5));
                        let s = session();
                        assert!(s.assign_id("sealed-id".into()));
                        s
                    });
                    resumed.unwrap().0.key
                })
            })
            .collect();
        let keys: std::collections::HashSet<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(keys.len(), 1, "one session for every request");
        assert_eq!(built.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(table.len(), 1);
        // A resumed session takes a place like any other.
        let (other, _) = table.resume("other-id", Holder::default(), session).unwrap();
        assert_eq!(table.resume("third-id", Holder::default(), session).err().map(|e| e.cap), Some(Cap::Total));
        table.remove(other.id());
    }

    #[tokio::test]
    async fn an_ended_sealed_id_is_remembered_until_it_expires() {
        let table = SessionTable::new(4, Duration::from_secs(60)).with_keys(keys());
        let s = session();
        assert!(s.assign_id("sealed-id".into()));
        table.insert_reserved(table.reserve(Holder::default()).unwrap().0, Arc::clone(&s));
        assert!(!table.has_ended("sealed-id"));
        assert!(table.end("sealed-id").is_some());
        assert!(table.has_ended("sealed-id"));
        assert!(!table.has_ended("another-id"));
        // Without shared keys nothing is resumed, so nothing needs remembering.
        let local = SessionTable::new(4, Duration::from_secs(60));
        local.end("x");
        assert!(!local.has_ended("x"));
    }

    #[test]
    fn ids_are_unguessable_visible_ascii() {
        let a = mint_id();
        let b = mint_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert!(a.bytes().all(|c| (0x21..=0x7e).contains(&c)));
    }
}
