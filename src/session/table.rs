//! The table of live sessions: minting ids, lookup, idle expiry.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;

use super::Session;

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
    idle_timeout: Duration,
}

/// Places taken in the table, live sessions and sessions still opening alike, so that a
/// burst of `initialize` calls cannot open more upstream sessions than the table holds.
#[derive(Default)]
struct Places {
    taken: usize,
    per_peer: HashMap<IpAddr, usize>,
    owner: HashMap<String, IpAddr>,
}

impl Places {
    fn release(&mut self, peer: Option<IpAddr>) {
        self.taken = self.taken.saturating_sub(1);
        if let Some(ip) = peer
            && let Some(n) = self.per_peer.get_mut(&ip)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_peer.remove(&ip);
            }
        }
    }
}

/// The table refused a new session.
#[derive(Debug, thiserror::Error)]
#[error("too many sessions (limit {0})")]
pub struct TableFull(pub usize);

/// A place held in the table for a session being opened; given back on drop unless the
/// session is inserted with it.
pub struct Reservation<'a> {
    table: &'a SessionTable,
    peer: Option<IpAddr>,
    used: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.used {
            self.table.places.lock().release(self.peer);
        }
    }
}

impl SessionTable {
    /// An empty table.
    pub fn new(max: usize, idle_timeout: Duration) -> SessionTable {
        SessionTable {
            sessions: parking_lot::RwLock::new(HashMap::new()),
            places: parking_lot::Mutex::new(Places::default()),
            max,
            max_per_peer: 0,
            idle_timeout,
        }
    }

    /// Caps the sessions one client IP address may hold (0: no cap).
    pub fn with_max_per_peer(mut self, max_per_peer: usize) -> SessionTable {
        self.max_per_peer = max_per_peer;
        self
    }

    /// Holds a place for a session opened by `peer`, or refuses when the table, or
    /// that address's share of it, is full.
    pub fn reserve(&self, peer: Option<IpAddr>) -> Result<Reservation<'_>, TableFull> {
        let mut places = self.places.lock();
        if places.taken >= self.max {
            return Err(TableFull(self.max));
        }
        if let Some(ip) = peer {
            let held = places.per_peer.get(&ip).copied().unwrap_or(0);
            if self.max_per_peer > 0 && held >= self.max_per_peer {
                return Err(TableFull(self.max_per_peer));
            }
            places.per_peer.insert(ip, held + 1);
        }
        places.taken += 1;
        Ok(Reservation { table: self, peer, used: false })
    }

    /// Adds a session in the place reserved for it.
    pub fn insert_reserved(&self, mut reservation: Reservation<'_>, session: Arc<Session>) {
        reservation.used = true;
        if let Some(ip) = reservation.peer {
            self.places.lock().owner.insert(session.id.clone(), ip);
        }
        let mut map = self.sessions.write();
        map.insert(session.id.clone(), session);
    }

    fn released(&self, session: Option<Arc<Session>>) -> Option<Arc<Session>> {
        if let Some(s) = &session {
            let mut places = self.places.lock();
            let peer = places.owner.remove(&s.id);
            places.release(peer);
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

    /// Removes and returns sessions idle for longer than the idle timeout (and with
    /// nothing in flight).
    pub fn reap_idle(&self) -> Vec<Arc<Session>> {
        let mut map = self.sessions.write();
        let idle: Vec<String> = map
            .values()
            .filter(|s| s.inflight() == 0 && !s.is_listened() && s.last_seen().elapsed() > self.idle_timeout)
            .map(|s| s.id.clone())
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

    fn session() -> Arc<Session> {
        Session::new(super::super::Scope::Aggregate, "2025-11-25".into(), serde_json::json!({}), serde_json::json!({}))
    }

    #[tokio::test]
    async fn reservations_count_against_the_caps_until_released() {
        let table = SessionTable::new(3, Duration::from_secs(60)).with_max_per_peer(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let r1 = table.reserve(Some(a)).unwrap();
        let r2 = table.reserve(Some(a)).unwrap();
        assert!(table.reserve(Some(a)).is_err(), "per-peer cap holds while sessions are still opening");
        let r3 = table.reserve(None).unwrap();
        assert!(table.reserve(None).is_err(), "total cap");
        drop(r3);
        let s = session();
        table.insert_reserved(r1, Arc::clone(&s));
        drop(r2);
        assert!(table.reserve(Some(a)).is_ok());
        table.remove(&s.id);
        let _b = table.reserve(Some(a)).unwrap();
        let _c = table.reserve(Some(a)).unwrap();
        assert!(table.reserve(Some(a)).is_err());
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
