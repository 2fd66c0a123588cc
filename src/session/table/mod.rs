//! The table of live sessions: minting ids, lookup, idle expiry, and the sessions
//! resumed from sealed ids.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;

use super::Session;
use super::sealed::{SessionKeys, unix_now};
use crate::hashing::Map as HashMap;

mod ended;
mod places;

use ended::Ended;
pub(crate) use places::{Cap, Holder, TableFull};
use places::{Places, count_up, held};

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

/// The retry hint of a refusal while every session that could make room is busy: one of
/// them may go idle at any moment, and the next try then lets it go.
const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// A place held in the table for a session being opened; given back on drop unless the
/// session is inserted with it.
pub(crate) struct Reservation<'a> {
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

    /// Holds a place for a session opened by `holder`. When the table, or that
    /// address's or principal's share of it, is full, the least recently used idle
    /// session (see [`Session::is_idle`]) of the same caller makes room: of the same
    /// principal from any address (unauthenticated clients: from the same address), and
    /// from the same address when that address's cap is reached — a client never ends
    /// another's session. It leaves the table here and is returned, to be ended as idle
    /// expiry ends it. Refused only when no such session is idle; the refusal's
    /// `retry_after` is then true: the earliest an idle session can expire when the
    /// table as a whole is full of others' sessions, else a second (the caller's own
    /// sessions are busy, and a place is made as soon as one of them goes idle).
    pub(crate) fn reserve(&self, holder: Holder) -> Result<(Reservation<'_>, Option<Arc<Session>>), TableFull> {
        let mut places = self.places.lock();
        let let_go = match self.cap_reached(&places, &holder) {
            None => None,
            Some(cap) => match self.least_recently_used_idle(&places, &holder) {
                Some(id) => self.let_go(&mut places, &id),
                None => return Err(self.refusal(cap)),
            },
        };
        // Every count held at most its cap, and the session let go counted under each
        // cap the newcomer reached: there is room under all of them now.
        if let Some(ip) = holder.peer {
            count_up(&mut places.per_peer, ip);
        }
        if let Some(identity) = &holder.principal {
            count_up(&mut places.per_principal, identity.clone());
        }
        places.taken += 1;
        Ok((Reservation { table: self, holder, used: false }, let_go))
    }

    /// The first cap `holder`'s new session would pass.
    fn cap_reached(&self, places: &Places, holder: &Holder) -> Option<Cap> {
        if places.taken >= self.max {
            return Some(Cap::Total);
        }
        if let Some(ip) = &holder.peer
            && self.max_per_peer > 0
            && held(&places.per_peer, ip) >= self.max_per_peer
        {
            return Some(Cap::PerPeer);
        }
        if let Some(identity) = &holder.principal
            && self.max_per_principal > 0
            && held(&places.per_principal, identity) >= self.max_per_principal
        {
            return Some(Cap::PerPrincipal);
        }
        None
    }

    /// The id of the least recently used idle session that may make room for
    /// `holder`'s: one of the same caller (the same principal from any address, or, for
    /// unauthenticated clients, the same address), from the same address too when that
    /// address's cap is reached, so that letting it go makes room under every cap
    /// `holder` reached.
    fn least_recently_used_idle(&self, places: &Places, holder: &Holder) -> Option<String> {
        let peer_capped =
            self.max_per_peer > 0 && holder.peer.is_some_and(|ip| held(&places.per_peer, &ip) >= self.max_per_peer);
        let known = holder.peer.is_some() || holder.principal.is_some();
        let same_caller = |owner: &Holder| {
            known
                && owner.principal == holder.principal
                && (owner.peer == holder.peer || (holder.principal.is_some() && !peer_capped))
        };
        let sessions = self.sessions.read();
        places
            .owner
            .iter()
            .filter(|(_, owner)| same_caller(owner))
            .filter_map(|(id, _)| sessions.get(id))
            .filter(|session| session.is_idle())
            .min_by_key(|session| session.last_seen())
            .map(|session| session.id().to_owned())
    }

    /// Takes session `id` out of the table and gives its place back, as its expiry
    /// would.
    fn let_go(&self, places: &mut Places, id: &str) -> Option<Arc<Session>> {
        let session = self.sessions.write().remove(id)?;
        let holder = places.owner.remove(id).unwrap_or_default();
        places.release(&holder);
        Some(session)
    }

    /// The refusal at `cap`, with a retry hint that holds.
    fn refusal(&self, cap: Cap) -> TableFull {
        let limit = match cap {
            Cap::Total => self.max,
            Cap::PerPeer => self.max_per_peer,
            Cap::PerPrincipal => self.max_per_principal,
        };
        let retry_after = match cap {
            Cap::Total => self.earliest_expiry().map_or(BUSY_RETRY_AFTER, |expiry| expiry + REAP_EVERY),
            Cap::PerPeer | Cap::PerPrincipal => BUSY_RETRY_AFTER,
        };
        TableFull { cap, limit, retry_after }
    }

    /// How long until the first idle session passes its idle timeout, if one is idle.
    fn earliest_expiry(&self) -> Option<Duration> {
        let sessions = self.sessions.read();
        let last = sessions.values().filter(|s| may_expire(s)).map(|s| s.last_seen()).min()?;
        Some(self.idle_timeout.saturating_sub(last.elapsed()))
    }

    /// Adds a session in the place reserved for it.
    pub(crate) fn insert_reserved(&self, mut reservation: Reservation<'_>, session: Arc<Session>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Principal;
    use crate::jsonrpc::Id;

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
        let r1 = table.reserve(from("10.0.0.1")).unwrap().0;
        let r2 = table.reserve(from("10.0.0.1")).unwrap().0;
        let refused = table.reserve(from("10.0.0.1")).err().map(|e| e.cap);
        assert_eq!(refused, Some(Cap::PerPeer), "per-peer cap holds while sessions are still opening");
        let r3 = table.reserve(Holder::default()).unwrap().0;
        assert_eq!(table.reserve(Holder::default()).err().map(|e| e.cap), Some(Cap::Total));
        drop(r3);
        let s = session();
        table.insert_reserved(r1, Arc::clone(&s));
        drop(r2);
        assert!(table.reserve(from("10.0.0.1")).is_ok());
        table.remove(s.id());
        let _b = table.reserve(from("10.0.0.1")).unwrap().0;
        let _c = table.reserve(from("10.0.0.1")).unwrap().0;
        assert!(table.reserve(from("10.0.0.1")).is_err());
    }

    #[tokio::test]
    async fn one_principal_holds_at_most_its_share_from_any_address() {
        let table = SessionTable::new(10, Duration::from_secs(0)).with_max_per_principal(2);
        let a = session();
        table.insert_reserved(table.reserve(as_key("ci", "10.0.0.1")).unwrap().0, Arc::clone(&a));
        assert!(a.begin_request(&Id::number(1)).is_some(), "a is busy: never let go");
        let opening = table.reserve(as_key("ci", "10.0.0.2")).unwrap().0;
        let refused = table.reserve(as_key("ci", "10.0.0.3")).err().map(|e| e.cap);
        assert_eq!(refused, Some(Cap::PerPrincipal));
        // Another principal, and unauthenticated clients, are not affected.
        let _ops = table.reserve(as_key("ops", "10.0.0.1")).unwrap().0;
        let _anonymous = (table.reserve(from("10.0.0.1")).unwrap().0, table.reserve(from("10.0.0.1")).unwrap().0);
        drop(opening);
        let b = session();
        table.insert_reserved(table.reserve(as_key("ci", "10.0.0.3")).unwrap().0, Arc::clone(&b));
        assert!(b.begin_request(&Id::number(1)).is_some());
        assert!(table.reserve(as_key("ci", "10.0.0.3")).is_err());
        // Ended and expired sessions give their places back; the counts forget them.
        a.end_request(&Id::number(1));
        b.end_request(&Id::number(1));
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

    /// A session opened by `holder`, in the table.
    fn opened(table: &SessionTable, holder: Holder) -> Arc<Session> {
        let s = session();
        let (reservation, let_go) = table.reserve(holder).unwrap();
        assert!(let_go.is_none());
        table.insert_reserved(reservation, Arc::clone(&s));
        s
    }

    #[tokio::test]
    async fn at_an_address_cap_its_least_recently_used_idle_session_makes_room() {
        let table = SessionTable::new(100, Duration::from_secs(60)).with_max_per_peer(3);
        let busy = opened(&table, from("10.0.0.1"));
        let older = opened(&table, from("10.0.0.1"));
        std::thread::sleep(Duration::from_millis(2));
        let newer = opened(&table, from("10.0.0.1"));
        let elsewhere = opened(&table, from("10.0.0.2"));
        assert!(busy.begin_request(&Id::number(1)).is_some());
        let (reservation, let_go) = table.reserve(from("10.0.0.1")).unwrap();
        assert_eq!(let_go.map(|s| s.id().to_owned()), Some(older.id().to_owned()), "the least recently used idle one");
        assert!(table.get(older.id()).is_none(), "it left the table");
        table.insert_reserved(reservation, session());
        // Used since: `newer` is not the least recently used any more than the newcomer.
        newer.touch();
        let (_r, let_go) = table.reserve(from("10.0.0.1")).unwrap();
        let let_go = let_go.expect("one was let go");
        assert_ne!(let_go.id(), busy.id(), "a session with a request in flight is never let go");
        assert_ne!(let_go.id(), newer.id());
        assert!(table.get(busy.id()).is_some() && table.get(elsewhere.id()).is_some());
        // Every one of the address's sessions busy (or opening): refused, with a short hint.
        newer.begin_request(&Id::number(1));
        let full = table.reserve(from("10.0.0.1")).err().expect("refused");
        assert_eq!((full.cap, full.retry_after), (Cap::PerPeer, BUSY_RETRY_AFTER));
    }

    #[tokio::test]
    async fn a_session_is_let_go_only_for_its_own_caller() {
        let table = SessionTable::new(3, Duration::from_secs(60)).with_max_per_principal(1);
        let ci = opened(&table, as_key("ci", "10.0.0.1"));
        let anonymous = opened(&table, from("10.0.0.1"));
        // Another principal at the same address: the total cap is reached, but only an
        // idle session of the newcomer's own could make room.
        let _ops = opened(&table, as_key("ops", "10.0.0.1"));
        let full = table.reserve(as_key("other", "10.0.0.1")).err().expect("refused");
        assert_eq!(full.cap, Cap::Total);
        assert!(full.retry_after > Duration::from_secs(60), "until an idle session expires and is reaped");
        assert!(table.get(ci.id()).is_some() && table.get(anonymous.id()).is_some());
        // The principal's cap from another address: its own idle session goes.
        let (_r, let_go) = table.reserve(as_key("ci", "10.0.0.9")).unwrap();
        assert_eq!(let_go.map(|s| s.id().to_owned()), Some(ci.id().to_owned()));
    }

    #[tokio::test]
    async fn streams_and_fronts_that_hold_a_session_keep_it() {
        let table = SessionTable::new(100, Duration::from_secs(60)).with_max_per_peer(1);
        let sse = opened(&table, from("10.0.0.1"));
        sse.set_front(super::super::Front::Sse);
        assert!(table.reserve(from("10.0.0.1")).is_err(), "an HTTP+SSE session lives as long as its stream");
        let listened = opened(&table, from("10.0.0.2"));
        let _listener = listened.listen();
        assert!(table.reserve(from("10.0.0.2")).is_err(), "a listened modern context is not idle");
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
