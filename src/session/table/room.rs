//! Making room for a new session: the caps on the table, per address and per principal;
//! the place a session being opened holds; and letting the caller's least recently used
//! idle session go when a cap is reached.

use std::sync::Arc;
use std::time::Duration;

use super::places::{Cap, Holder, Places, TableFull, count_up, held};
use super::{REAP_EVERY, SessionTable, may_expire};
use crate::session::Session;

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
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::{BUSY_RETRY_AFTER, Cap};
    use crate::identity::Principal;
    use crate::jsonrpc::Id;
    use crate::session::Front;
    use crate::session::Session;
    use crate::session::table::test_support::{from, session};
    use crate::session::table::{Holder, SessionTable};

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
        sse.set_front(Front::Sse);
        assert!(table.reserve(from("10.0.0.1")).is_err(), "an HTTP+SSE session lives as long as its stream");
        let listened = opened(&table, from("10.0.0.2"));
        let _listener = listened.listen();
        assert!(table.reserve(from("10.0.0.2")).is_err(), "a listened modern context is not idle");
    }
}
