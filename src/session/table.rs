//! The table of live sessions: minting ids, lookup, idle expiry, and the sessions
//! resumed from sealed ids.

use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasher as _;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;

use super::Session;
use super::sealed::{SessionKeys, unix_now};
use crate::hashing::Map as HashMap;
use crate::policy::Identity;

/// A fresh session id: 32 random bytes, base64url (43 visible ASCII characters).
pub fn mint_id() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Live sessions by id.
pub struct SessionTable {
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

/// Most ended sealed ids remembered; beyond that the oldest are forgotten (and could be
/// resumed here again until they expire, as on any other replica).
const MAX_ENDED: usize = 65_536;

/// Sealed ids of sessions ended here (by a hash of the id), oldest first.
#[derive(Default)]
struct Ended {
    order: VecDeque<(u64, u64)>,
    hashes: HashSet<u64>,
    hasher: std::collections::hash_map::RandomState,
}

impl Ended {
    fn insert(&mut self, id: &str, expires: u64, now: u64) {
        while let Some(&(hash, until)) = self.order.front() {
            if until > now && self.order.len() < MAX_ENDED {
                break;
            }
            self.order.pop_front();
            self.hashes.remove(&hash);
        }
        let hash = self.hasher.hash_one(id);
        if self.hashes.insert(hash) {
            self.order.push_back((hash, expires));
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.hashes.contains(&self.hasher.hash_one(id))
    }
}

/// Who holds a place: the client's address and, when clients authenticate, its principal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    /// The address the session was opened from.
    pub peer: Option<IpAddr>,
    /// The principal that opened it.
    pub principal: Option<Identity>,
}

/// Places taken in the table, live sessions and sessions still opening alike, so that a
/// burst of `initialize` calls cannot open more upstream sessions than the table holds.
/// Per-address and per-principal counts lose their entry when they drop to 0.
#[derive(Default)]
struct Places {
    taken: usize,
    per_peer: HashMap<IpAddr, usize>,
    per_principal: HashMap<Identity, usize>,
    owner: HashMap<String, Holder>,
}

/// `key`'s count.
fn held<K: std::hash::Hash + Eq>(counts: &HashMap<K, usize>, key: &K) -> usize {
    counts.get(key).copied().unwrap_or(0)
}

/// Adds one to `key`'s count.
fn count_up<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: K) {
    *counts.entry(key).or_insert(0) += 1;
}

/// Takes one from `key`'s count, forgetting the key at 0.
fn count_down<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = counts.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            counts.remove(key);
        }
    }
}

impl Places {
    fn release(&mut self, holder: &Holder) {
        self.taken = self.taken.saturating_sub(1);
        if let Some(ip) = &holder.peer {
            count_down(&mut self.per_peer, ip);
        }
        if let Some(identity) = &holder.principal {
            count_down(&mut self.per_principal, identity);
        }
    }
}

/// Which cap refused a new session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// `session.max_sessions`.
    Total,
    /// `session.max_sessions_per_peer`.
    PerPeer,
    /// `session.max_sessions_per_principal`.
    PerPrincipal,
}

/// The table refused a new session.
#[derive(Debug, thiserror::Error)]
#[error("too many sessions ({cap:?} limit {limit})")]
pub struct TableFull {
    /// The cap that refused.
    pub cap: Cap,
    /// Its configured value.
    pub limit: usize,
}

/// A place held in the table for a session being opened; given back on drop unless the
/// session is inserted with it.
pub struct Reservation<'a> {
    table: &'a SessionTable,
    holder: Holder,
    used: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.used {
            self.table.places.lock().release(&self.holder);
        }
    }
}

impl SessionTable {
    /// An empty table.
    pub fn new(max: usize, idle_timeout: Duration) -> SessionTable {
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
    pub fn with_keys(mut self, keys: Arc<SessionKeys>) -> SessionTable {
        self.keys = Some(keys);
        self
    }

    /// The keys that seal session ids, if they are sealed.
    pub fn keys(&self) -> Option<&Arc<SessionKeys>> {
        self.keys.as_ref()
    }

    /// Caps the sessions one client IP address may hold (0: no cap).
    pub fn with_max_per_peer(mut self, max_per_peer: usize) -> SessionTable {
        self.max_per_peer = max_per_peer;
        self
    }

    /// Caps the sessions one authenticated principal may hold (0: no cap).
    pub fn with_max_per_principal(mut self, max_per_principal: usize) -> SessionTable {
        self.max_per_principal = max_per_principal;
        self
    }

    /// Holds a place for a session opened by `holder`, or refuses when the table, or
    /// that address's or principal's share of it, is full.
    pub fn reserve(&self, holder: Holder) -> Result<Reservation<'_>, TableFull> {
        let mut places = self.places.lock();
        if places.taken >= self.max {
            return Err(TableFull { cap: Cap::Total, limit: self.max });
        }
        if let Some(ip) = &holder.peer
            && self.max_per_peer > 0
            && held(&places.per_peer, ip) >= self.max_per_peer
        {
            return Err(TableFull { cap: Cap::PerPeer, limit: self.max_per_peer });
        }
        if let Some(identity) = &holder.principal
            && self.max_per_principal > 0
            && held(&places.per_principal, identity) >= self.max_per_principal
        {
            return Err(TableFull { cap: Cap::PerPrincipal, limit: self.max_per_principal });
        }
        if let Some(ip) = holder.peer {
            count_up(&mut places.per_peer, ip);
        }
        if let Some(identity) = &holder.principal {
            count_up(&mut places.per_principal, identity.clone());
        }
        places.taken += 1;
        Ok(Reservation { table: self, holder, used: false })
    }

    /// Adds a session in the place reserved for it.
    pub fn insert_reserved(&self, mut reservation: Reservation<'_>, session: Arc<Session>) {
        reservation.used = true;
        let holder = std::mem::take(&mut reservation.holder);
        self.places.lock().owner.insert(session.id().to_owned(), holder);
        let mut map = self.sessions.write();
        map.insert(session.id().to_owned(), session);
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
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let map = self.sessions.read();
        let session = map.get(id).cloned()?;
        session.touch();
        Some(session)
    }

    /// Removes a session.
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let removed = self.sessions.write().remove(id);
        self.released(removed)
    }

    /// Removes a session that ended (DELETE): its sealed id is not resumed here again.
    pub fn end(&self, id: &str) -> Option<Arc<Session>> {
        if let Some(keys) = self.keys.as_ref().filter(|k| k.is_shared()) {
            let now = unix_now();
            self.ended.lock().insert(id, now.saturating_add(keys.lifetime().as_secs()), now);
        }
        self.remove(id)
    }

    /// Whether a session with this id ended here.
    pub fn has_ended(&self, id: &str) -> bool {
        self.ended.lock().contains(id)
    }

    /// The live session `id`, or the one `build` makes for it in a place held for
    /// `holder` (refused when a cap is reached). One resumption at a time, so concurrent
    /// first requests for one id get the same session.
    pub fn resume(
        &self,
        id: &str,
        holder: Holder,
        build: impl FnOnce() -> Arc<Session>,
    ) -> Result<Arc<Session>, TableFull> {
        let _one_at_a_time = self.resuming.lock();
        if let Some(session) = self.get(id) {
            return Ok(session);
        }
        let reservation = self.reserve(holder)?;
        let session = build();
        self.insert_reserved(reservation, Arc::clone(&session));
        Ok(session)
    }

    /// Removes and returns sessions idle for longer than the idle timeout (and with
    /// nothing in flight).
    pub fn reap_idle(&self) -> Vec<Arc<Session>> {
        let mut map = self.sessions.write();
        let idle: Vec<String> = map
            .values()
            .filter(|s| s.inflight() == 0 && !s.is_listened() && s.last_seen().elapsed() > self.idle_timeout)
            .map(|s| s.id().to_owned())
            .collect();
        let reaped: Vec<_> = idle.iter().filter_map(|id| map.remove(id)).collect();
        drop(map);
        reaped.into_iter().filter_map(|s| self.released(Some(s))).collect()
    }

    /// Every live session.
    pub fn all(&self) -> Vec<Arc<Session>> {
        self.sessions.read().values().cloned().collect()
    }

    /// Removes every session (shutdown).
    pub fn drain(&self) -> Vec<Arc<Session>> {
        let drained: Vec<_> = self.sessions.write().drain().map(|(_, s)| s).collect();
        drained.into_iter().filter_map(|s| self.released(Some(s))).collect()
    }

    /// Number of live sessions.
    pub fn len(&self) -> usize {
        self.sessions.read().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Principal;

    fn session() -> Arc<Session> {
        Session::new(super::super::Scope::Aggregate, "2025-11-25".into(), serde_json::json!({}), serde_json::json!({}))
    }

    fn from(peer: &str) -> Holder {
        Holder { peer: Some(peer.parse().unwrap()), principal: None }
    }

    fn as_key(name: &str, peer: &str) -> Holder {
        Holder { principal: Some(Principal::api_key(name).identity()), ..from(peer) }
    }

    #[tokio::test]
    async fn reservations_count_against_the_caps_until_released() {
        let table = SessionTable::new(3, Duration::from_secs(60)).with_max_per_peer(2);
        let r1 = table.reserve(from("10.0.0.1")).unwrap();
        let r2 = table.reserve(from("10.0.0.1")).unwrap();
        let refused = table.reserve(from("10.0.0.1")).err().map(|e| e.cap);
        assert_eq!(refused, Some(Cap::PerPeer), "per-peer cap holds while sessions are still opening");
        let r3 = table.reserve(Holder::default()).unwrap();
        assert_eq!(table.reserve(Holder::default()).err().map(|e| e.cap), Some(Cap::Total));
        drop(r3);
        let s = session();
        table.insert_reserved(r1, Arc::clone(&s));
        drop(r2);
        assert!(table.reserve(from("10.0.0.1")).is_ok());
        table.remove(s.id());
        let _b = table.reserve(from("10.0.0.1")).unwrap();
        let _c = table.reserve(from("10.0.0.1")).unwrap();
        assert!(table.reserve(from("10.0.0.1")).is_err());
    }

    #[tokio::test]
    async fn one_principal_holds_at_most_its_share_from_any_address() {
        let table = SessionTable::new(10, Duration::from_secs(0)).with_max_per_principal(2);
        let a = session();
        table.insert_reserved(table.reserve(as_key("ci", "10.0.0.1")).unwrap(), Arc::clone(&a));
        let opening = table.reserve(as_key("ci", "10.0.0.2")).unwrap();
        let refused = table.reserve(as_key("ci", "10.0.0.3")).err().map(|e| e.cap);
        assert_eq!(refused, Some(Cap::PerPrincipal));
        // Another principal, and unauthenticated clients, are not affected.
        let _ops = table.reserve(as_key("ops", "10.0.0.1")).unwrap();
        let _anonymous = (table.reserve(from("10.0.0.1")).unwrap(), table.reserve(from("10.0.0.1")).unwrap());
        drop(opening);
        let b = session();
        table.insert_reserved(table.reserve(as_key("ci", "10.0.0.3")).unwrap(), Arc::clone(&b));
        assert!(table.reserve(as_key("ci", "10.0.0.3")).is_err());
        // Ended and expired sessions give their places back; the counts forget them.
        table.remove(a.id());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(table.reap_idle().len(), 1);
        let places = table.places.lock();
        assert_eq!(places.per_principal.get(&Principal::api_key("ci").identity()), None);
        assert_eq!(places.per_principal.len(), 1, "only ops is still counted");
        drop(places);
        drop(_ops);
        assert!(table.places.lock().per_principal.is_empty());
    }

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
                    resumed.unwrap().key
                })
            })
            .collect();
        let keys: HashSet<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(keys.len(), 1, "one session for every request");
        assert_eq!(built.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(table.len(), 1);
        // A resumed session takes a place like any other.
        let other = table.resume("other-id", Holder::default(), session).unwrap();
        assert_eq!(table.resume("third-id", Holder::default(), session).err().map(|e| e.cap), Some(Cap::Total));
        table.remove(other.id());
    }

    #[tokio::test]
    async fn an_ended_sealed_id_is_remembered_until_it_expires() {
        let table = SessionTable::new(4, Duration::from_secs(60)).with_keys(keys());
        let s = session();
        assert!(s.assign_id("sealed-id".into()));
        table.insert_reserved(table.reserve(Holder::default()).unwrap(), Arc::clone(&s));
        assert!(!table.has_ended("sealed-id"));
        assert!(table.end("sealed-id").is_some());
        assert!(table.has_ended("sealed-id"));
        assert!(!table.has_ended("another-id"));
        let mut ended = Ended::default();
        ended.insert("a", 10, 5);
        ended.insert("b", 20, 5);
        ended.insert("c", 30, 15);
        assert!(!ended.contains("a") && ended.contains("b") && ended.contains("c"), "expired ones are forgotten");
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
