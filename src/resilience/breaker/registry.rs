//! Every breaker of the gateway: one per upstream and one per tool, created on first use.
//!
//! Tool names come from upstreams, so a misbehaving upstream could make up an endless
//! supply of them: each upstream gets at most a bounded number of tool breakers, beyond
//! which only its own breaker applies.

use std::fmt;
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::state::{Breaker, Snapshot};
use super::transition::{BreakerKey, Feed, Listener, State};
use crate::config::BreakerConfig;
use crate::hashing::Map as HashMap;

/// Tool breakers per upstream, by default.
pub const MAX_TOOL_BREAKERS: usize = 1024;

/// The breakers of every upstream and tool.
pub struct Breakers {
    upstreams: RwLock<HashMap<Arc<str>, UpstreamBreakers>>,
    listener: Option<Listener>,
    feed: Option<Feed>,
    max_tools: usize,
}

/// One upstream's breaker and its tools'.
struct UpstreamBreakers {
    own: Arc<Breaker>,
    tools: HashMap<Arc<str>, Arc<Breaker>>,
    /// Whether reaching the tool limit has been logged.
    full_logged: bool,
}

impl Default for Breakers {
    fn default() -> Self {
        Breakers::new()
    }
}

impl fmt::Debug for Breakers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breakers").field("states", &self.states()).field("max_tools", &self.max_tools).finish()
    }
}

impl Breakers {
    /// No breakers yet, no listener, [`MAX_TOOL_BREAKERS`] tool breakers per upstream.
    pub fn new() -> Breakers {
        Breakers {
            upstreams: RwLock::new(HashMap::default()),
            listener: None,
            feed: None,
            max_tools: MAX_TOOL_BREAKERS,
        }
    }

    /// The same registry, telling `listener` of every transition of every breaker it
    /// creates from now on (metrics, `notifications/tools/list_changed`).
    pub fn with_listener(mut self, listener: impl Fn(&BreakerKey, State) + Send + Sync + 'static) -> Breakers {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// The same registry, telling `feed` (when there is one) of every transition and
    /// operator action, with its details and origin, of every breaker it creates from now
    /// on (shared breakers publish from it).
    pub fn with_feed(mut self, feed: Option<Feed>) -> Breakers {
        self.feed = feed;
        self
    }

    /// The same registry with at most `max` tool breakers per upstream.
    pub fn with_tool_limit(mut self, max: usize) -> Breakers {
        self.max_tools = max;
        self
    }

    /// The upstream's own breaker, created with `cfg` if it does not exist yet.
    pub fn upstream(&self, upstream: &Arc<str>, cfg: &BreakerConfig) -> Arc<Breaker> {
        if let Some(entry) = self.read().get(upstream) {
            return Arc::clone(&entry.own);
        }
        let mut all = self.write();
        let entry = self.entry(&mut all, upstream, cfg);
        Arc::clone(&entry.own)
    }

    /// The tool's breaker, created with `cfg` if it does not exist yet; `None` when the
    /// upstream already has the most tool breakers allowed.
    pub fn tool(&self, upstream: &Arc<str>, tool: &Arc<str>, cfg: &BreakerConfig) -> Option<Arc<Breaker>> {
        if let Some(found) = self.read().get(upstream).and_then(|e| e.tools.get(tool)) {
            return Some(Arc::clone(found));
        }
        let mut all = self.write();
        let (max, listener, feed) = (self.max_tools, self.listener.clone(), self.feed.clone());
        let entry = self.entry(&mut all, upstream, cfg);
        if let Some(found) = entry.tools.get(tool) {
            return Some(Arc::clone(found));
        }
        if entry.tools.len() >= max {
            if !entry.full_logged {
                entry.full_logged = true;
                tracing::warn!(
                    upstream = &**upstream,
                    max,
                    "too many tool breakers; further tools share the upstream's"
                );
            }
            return None;
        }
        let key = BreakerKey { upstream: Arc::clone(upstream), tool: Some(Arc::clone(tool)) };
        let breaker = Breaker::observed(key, *cfg, listener, feed);
        entry.tools.insert(Arc::clone(tool), Arc::clone(&breaker));
        Some(breaker)
    }

    /// Whether `tool` of `upstream` has a breaker of its own.
    pub fn has_tool(&self, upstream: &str, tool: &str) -> bool {
        self.read().get(upstream).is_some_and(|e| e.tools.contains_key(tool))
    }

    /// Every breaker and its state, upstreams before their tools, sorted by name.
    pub fn states(&self) -> Vec<(BreakerKey, State)> {
        let breakers: Vec<Arc<Breaker>> = self
            .read()
            .values()
            .flat_map(|e| std::iter::once(Arc::clone(&e.own)).chain(e.tools.values().cloned()))
            .collect();
        // States are read outside the registry lock: reading one may report a transition.
        let mut states: Vec<_> = breakers.iter().map(|b| (b.key().clone(), b.state())).collect();
        states.sort_by(|a, b| a.0.cmp(&b.0));
        states
    }

    /// Reads every breaker (or only `upstream`'s): calls `f` with each one's key and
    /// [`Snapshot`], upstreams' own breakers before their tools', in no particular order
    /// otherwise. Nothing is copied but the breakers' handles, so a status page can
    /// count a hundred thousand breakers and keep only the few it lists.
    pub fn for_each_snapshot(&self, upstream: Option<&str>, mut f: impl FnMut(&BreakerKey, &Snapshot)) {
        let breakers: Vec<Arc<Breaker>> = {
            let all = self.read();
            let entries: Vec<&UpstreamBreakers> = match upstream {
                Some(name) => all.get(name).into_iter().collect(),
                None => all.values().collect(),
            };
            entries
                .into_iter()
                .flat_map(|e| std::iter::once(Arc::clone(&e.own)).chain(e.tools.values().cloned()))
                .collect()
        };
        // As in `states`: read outside the registry lock, since reading may report a transition.
        for breaker in &breakers {
            f(breaker.key(), &breaker.snapshot());
        }
    }

    /// Whether a call to `tool` of `upstream` (or, with `tool: None`, any call to it)
    /// would be refused for a break now: its own breaker or the upstream's is open.
    /// Half-open is not open, so a hidden tool reappears when probes may reach it.
    pub fn is_open(&self, upstream: &str, tool: Option<&str>) -> bool {
        let (own, tool) = {
            let all = self.read();
            let Some(entry) = all.get(upstream) else { return false };
            (Arc::clone(&entry.own), tool.and_then(|t| entry.tools.get(t)).cloned())
        };
        own.is_open() || tool.is_some_and(|t| t.is_open())
    }

    /// Applies new settings to the upstream's breakers (after a configuration reload),
    /// keeping their states.
    pub fn reconfigure(&self, upstream: &str, cfg: &BreakerConfig) {
        if let Some(entry) = self.read().get(upstream) {
            entry.own.reconfigure(*cfg);
            entry.tools.values().for_each(|t| t.reconfigure(*cfg));
        }
    }

    /// Forgets the upstream's breakers (it is no longer configured).
    pub fn forget(&self, upstream: &str) {
        self.write().remove(upstream);
    }

    fn entry<'a>(
        &self,
        all: &'a mut HashMap<Arc<str>, UpstreamBreakers>,
        upstream: &Arc<str>,
        cfg: &BreakerConfig,
    ) -> &'a mut UpstreamBreakers {
        all.entry(Arc::clone(upstream)).or_insert_with(|| {
            let key = BreakerKey { upstream: Arc::clone(upstream), tool: None };
            UpstreamBreakers {
                own: Breaker::observed(key, *cfg, self.listener.clone(), self.feed.clone()),
                tools: HashMap::default(),
                full_logged: false,
            }
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<Arc<str>, UpstreamBreakers>> {
        self.upstreams.read()
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<Arc<str>, UpstreamBreakers>> {
        self.upstreams.write()
    }
}
