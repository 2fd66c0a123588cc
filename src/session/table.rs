//! The table of live sessions: minting ids, lookup, idle expiry.

use std::collections::HashMap;
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
    max: usize,
    idle_timeout: Duration,
}

/// The table refused a new session.
#[derive(Debug, thiserror::Error)]
#[error("too many sessions (limit {0})")]
pub struct TableFull(pub usize);

impl SessionTable {
    /// An empty table.
    pub fn new(max: usize, idle_timeout: Duration) -> SessionTable {
        SessionTable { sessions: parking_lot::RwLock::new(HashMap::new()), max, idle_timeout }
    }

    /// Whether another session fits.
    pub fn has_room(&self) -> bool {
        self.len() < self.max
    }

    /// Adds a session.
    pub fn insert(&self, session: Arc<Session>) -> Result<(), TableFull> {
        let mut map = self.sessions.write();
        if map.len() >= self.max {
            return Err(TableFull(self.max));
        }
        map.insert(session.id.clone(), session);
        Ok(())
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
        self.sessions.write().remove(id)
    }

    /// Removes and returns sessions idle for longer than the idle timeout (and with
    /// nothing in flight).
    pub fn reap_idle(&self) -> Vec<Arc<Session>> {
        let mut map = self.sessions.write();
        let idle: Vec<String> = map
            .values()
            .filter(|s| s.inflight() == 0 && s.last_seen().elapsed() > self.idle_timeout)
            .map(|s| s.id.clone())
            .collect();
        idle.iter().filter_map(|id| map.remove(id)).collect()
    }

    /// Every live session.
    pub fn all(&self) -> Vec<Arc<Session>> {
        self.sessions.read().values().cloned().collect()
    }

    /// Removes every session (shutdown).
    pub fn drain(&self) -> Vec<Arc<Session>> {
        self.sessions.write().drain().map(|(_, s)| s).collect()
    }

    /// Number of live sessions.
    pub fn len(&self) -> usize {
        self.sessions.read().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unguessable_visible_ascii() {
        let a = mint_id();
        let b = mint_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert!(a.bytes().all(|c| (0x21..=0x7e).contains(&c)));
    }
}
