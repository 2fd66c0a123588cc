//! Places taken in the session table, counted per address and per principal, and the
//! refusal when a cap is reached.

use std::net::IpAddr;
use std::time::Duration;

use crate::hashing::Map as HashMap;
use crate::identity::Identity;

/// Who holds a place: the client's address and, when clients authenticate, its principal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Holder {
    /// The address the session was opened from.
    pub peer: Option<IpAddr>,
    /// The principal that opened it.
    pub principal: Option<Identity>,
}

/// Places taken in the table, live sessions and sessions still opening alike, so that a
/// burst of `initialize` calls cannot open more upstream sessions than the table holds.
/// Per-address and per-principal counts lose their entry when they drop to 0.
#[derive(Default)]
pub(super) struct Places {
    pub(super) taken: usize,
    pub(super) per_peer: HashMap<IpAddr, usize>,
    pub(super) per_principal: HashMap<Identity, usize>,
    pub(super) owner: HashMap<String, Holder>,
}

/// `key`'s count.
pub(super) fn held<K: std::hash::Hash + Eq>(counts: &HashMap<K, usize>, key: &K) -> usize {
    counts.get(key).copied().unwrap_or(0)
}

/// Adds one to `key`'s count.
pub(super) fn count_up<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: K) {
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
    pub(super) fn release(&mut self, holder: &Holder) {
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
pub(crate) enum Cap {
    /// `session.max_sessions`.
    Total,
    /// `session.max_sessions_per_peer`.
    PerPeer,
    /// `session.max_sessions_per_principal`.
    PerPrincipal,
}

/// The table refused a new session.
#[derive(Debug, thiserror::Error)]
#[error("too many sessions ({cap:?} limit {limit}); retry in {retry_after:?}")]
pub(crate) struct TableFull {
    /// The cap that refused.
    pub cap: Cap,
    /// Its configured value.
    pub limit: usize,
    /// When a new try may succeed (see [`SessionTable::reserve`]).
    pub retry_after: Duration,
}
