//! Hot reload: SIGHUP, a change of the configuration file (or of the `mcpServers` file
//! it includes), or `POST /admin/reload` reads the file again. A file with problems is
//! refused with the same `FILE:LINE: field: message` lines as `check-config`, and the
//! configuration in force stays; a valid one is put in force at once, atomically: each
//! request runs to its end with the router and stacks it started with, new requests get
//! the new ones.
//!
//! What a reload keeps and what it replaces, upstream by upstream:
//! - unchanged: the very same upstream (its stack, retry budget, load-shedding slots,
//!   learnt tools, open sessions and processes);
//! - only its policy changed (timeouts, retries, breaker, concurrency, tools,
//!   annotations): a new stack over the same connections and processes;
//! - the way to it changed (URL, endpoints, headers, command, environment, …), or it is
//!   gone: sessions stop using their links to it at once, and those links (and a shared
//!   process) close when the requests still running on them have ended (or after the
//!   shutdown grace period); sessions opened on `/mcp/<upstream>` of a removed one end;
//! - added: built and reached by the next request that needs it.
//!
//! Breakers are one registry for the gateway's life, so an open breaker stays open
//! through a reload that does not touch its upstream; a changed breaker setting applies
//! to the breakers as they are. Sessions that reach an added, removed or changed upstream
//! hear `notifications/tools/list_changed`, and so do those that reach an upstream whose
//! tools clients now see otherwise (`tools.<name>`: name, description, hidden, …); those
//! whose prompts they see otherwise (`prompts.<name>`) hear
//! `notifications/prompts/list_changed`.
//!
//! Changing `listen` or `admin_listen` refuses the reload (a restart is needed). The
//! sections the process is built around (`admin`, `shutdown`, `session`, `limits`,
//! `trusted_proxies`, `security`, `access_log`, `tracing`, `breaker_sharing`, and `auth.resource_metadata`)
//! keep their values in force until a restart; a reload that changes them says so.
//! Which upstreams share their breakers with other replicas follows the file, once
//! sharing runs (some upstream shared its breakers at start).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::mpsc;

use super::upstreams::{connect_to, stop_shared, upstream_handle};
use super::{ClientLayers, ClientParts, routing};
use crate::client::CacheLayer;
use crate::config::{Config, PromptConfig, ToolConfig, UpstreamConfig};
use crate::control::{Reloaded, Reloads, Trigger};
use crate::gateway::Gateway;
use crate::policy::auth::Authenticator;
use crate::policy::authz::AuthorizeLayer;
use crate::policy::rate_limit::RateLimitLayer;
use crate::resilience::breaker::Breakers;
use crate::resilience::breaker::shared::{SharedUpstreams, shared_upstreams};
use crate::session::{Scope, Slot};
use crate::signals::Hangups;
use crate::upstream::registry::{UpstreamHandle, Upstreams};

mod watch;

use watch::{CAUSE_FILE, Watched, watch_hangups};

/// How often a retired upstream is looked at until its last request has ended.
const RETIRE_POLL: Duration = Duration::from_millis(50);

/// Why a reload left the configuration in force alone.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReloadError {
    /// The file cannot be read or has problems.
    #[error("{0}")]
    Invalid(crate::config::ConfigError),
    /// It changes what only a restart can change.
    #[error("{0}")]
    Refused(String),
    /// An upstream or a layer could not be built from it.
    #[error("{0:#}")]
    Failed(anyhow::Error),
}

impl ReloadError {
    /// The outcome's metric label.
    fn outcome(&self) -> &'static str {
        match self {
            ReloadError::Invalid(_) => "invalid",
            ReloadError::Refused(_) => "refused",
            ReloadError::Failed(_) => "failed",
        }
    }
}

/// Reloads the configuration file into a running gateway.
pub(crate) struct Reloader {
    /// The configuration file.
    pub(crate) path: PathBuf,
    /// The file as last read and put in force (before command-line overrides and fitted
    /// caps): what a new reading is compared with.
    pub(crate) file: Config,
    /// The configuration in force, as the admin API shows it.
    pub(crate) in_force: Arc<ArcSwap<Config>>,
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) breakers: Arc<Breakers>,
    pub(crate) parts: ClientParts,
    /// The client layers in force: a layer whose settings a reload leaves alone is kept
    /// (with the rate limiters' buckets and the cached results in it).
    pub(crate) layers: ClientLayers,
    /// The upstreams whose breakers are shared with other replicas, when sharing runs.
    pub(crate) shared_upstreams: Option<SharedUpstreams>,
    /// The authenticators of the HTTP listeners.
    pub(crate) auth: Vec<Arc<ArcSwap<Authenticator>>>,
    /// Whether the listeners are those the file names (not those of the command line of
    /// `seawall stdio`): then changing their addresses in the file refuses a reload.
    pub(crate) listeners: bool,
}

impl Reloader {
    /// Serves reload requests from SIGHUP, from changes of the configuration file (and
    /// the file it includes), and from `requests`, one at a time, until the gateway stops.
    pub(crate) async fn serve(mut self, hangups: Hangups, reloads: Reloads, mut requests: mpsc::Receiver<Trigger>) {
        let hangups = watch_hangups(hangups, reloads.clone());
        let mut watched = Watched::new(&self.path, &self.file, reloads.clone());
        while let Some(trigger) = requests.recv().await {
            // What is read next is what was seen: a write after it is a change again.
            let changed = watched.changed();
            if trigger.cause() == CAUSE_FILE && !changed {
                continue;
            }
            let outcome = self.reload(trigger.cause()).await;
            if !watched.covers(&self.path, &self.file) {
                watched = Watched::new(&self.path, &self.file, reloads.clone());
            }
            trigger.answer(outcome.map_err(|e| (e.outcome(), e.to_string())));
        }
        hangups.abort();
    }

    /// Reads the file and puts it in force, logging and counting the outcome.
    pub(crate) async fn reload(&mut self, cause: &'static str) -> Result<Reloaded, ReloadError> {
        let outcome = self.apply().await;
        match &outcome {
            Ok(done) => {
                crate::telemetry::metrics::config_reload("applied");
                tracing::info!(
                    cause,
                    file = %self.path.display(),
                    added = ?done.added,
                    removed = ?done.removed,
                    reconnected = ?done.reconnected,
                    reconfigured = ?done.reconfigured,
                    "configuration reloaded"
                );
                for section in &done.need_restart {
                    tracing::warn!(section, "changed in the file; the values in force stay until a restart");
                }
            }
            Err(e) => {
                crate::telemetry::metrics::config_reload(e.outcome());
                tracing::error!(cause, file = %self.path.display(), "configuration reload refused; the configuration in force stays:\n{e}");
            }
        }
        outcome
    }

    async fn apply(&mut self) -> Result<Reloaded, ReloadError> {
        let file = Config::load(&self.path).map_err(ReloadError::Invalid)?;
        if self.listeners {
            refuse_listener_changes(&self.file, &file)?;
        }
        let old = self.in_force.load_full();
        let (config, need_restart) = in_force(&file, &self.file, &old);
        let mut done = Reloaded { need_restart, ..Reloaded::default() };

        // Everything that can fail is built before anything changes.
        let old_upstreams = self.gateway.upstreams();
        let plan = Plan::new(&old, &config, &old_upstreams);
        let reshaped: Vec<Arc<str>> =
            plan.reconfigured.iter().filter(|n| tools_seen(&old, n) != tools_seen(&config, n)).cloned().collect();
        let prompts_reshaped: Vec<Arc<str>> =
            plan.reconfigured.iter().filter(|n| prompts_seen(&old, n) != prompts_seen(&config, n)).cloned().collect();
        let upstreams = self.build(&config, &old_upstreams, &plan)?;
        let layers = match self.layers_for(&config, &old, &plan) {
            Ok(layers) => layers,
            Err(e) => {
                stop_new_processes(&upstreams, &old_upstreams);
                return Err(ReloadError::Failed(e));
            }
        };
        let auth = if config.auth != old.auth {
            match Authenticator::new(config.auth.as_ref()).await {
                Ok(auth) => Some(Arc::new(auth)),
                Err(e) => {
                    stop_new_processes(&upstreams, &old_upstreams);
                    return Err(ReloadError::Failed(e.context("auth")));
                }
            }
        } else {
            None
        };

        // Put it in force.
        let upstreams = Arc::new(upstreams);
        let routing = routing(&config, Arc::clone(&upstreams), &self.breakers, &self.parts, layers.clone());
        self.layers = layers;
        self.gateway.install(routing);
        if let Some(auth) = auth {
            for front in &self.auth {
                front.store(Arc::clone(&auth));
            }
        }
        self.in_force.store(Arc::new(config));
        self.file = file;

        // Breakers follow the other replicas for the upstreams now marked `shared`.
        let shared = shared_upstreams(&self.in_force.load());
        match &self.shared_upstreams {
            Some(following) => following.store(Arc::new(shared)),
            None if !shared.is_empty() => done.need_restart.push("breaker sharing (no breakers were shared at start)"),
            None => {}
        }

        // Then let go of what it replaced.
        for handle in upstreams.iter() {
            if plan.reconfigured.contains(&handle.name) {
                self.breakers.reconfigure(&handle.name, &handle.policy.breaker);
            }
        }
        let names: Vec<&str> = plan.added.iter().map(|n| &**n).collect();
        crate::telemetry::metrics::zero(&names);
        let retired: Vec<Arc<UpstreamHandle>> =
            plan.removed.iter().chain(&plan.reconnected).filter_map(|name| old_upstreams.get(name).cloned()).collect();
        self.retire(retired, &plan.removed).await;
        for name in plan.added.iter().chain(&plan.removed).chain(&plan.reconnected).chain(&reshaped) {
            self.gateway.announce_tools_changed(name);
        }
        for name in &prompts_reshaped {
            self.gateway.announce_prompts_changed(name);
        }
        done.added = plan.added.iter().map(|n| n.to_string()).collect();
        done.removed = plan.removed.iter().map(|n| n.to_string()).collect();
        done.reconnected = plan.reconnected.iter().map(|n| n.to_string()).collect();
        done.reconfigured = plan.reconfigured.iter().map(|n| n.to_string()).collect();
        Ok(done)
    }

    /// The client layers for `config`: those whose settings are those of `old` are kept.
    /// The cache is kept only when every upstream is (what it holds is theirs).
    fn layers_for(&self, config: &Config, old: &Config, plan: &Plan) -> anyhow::Result<ClientLayers> {
        let separator = config.name_separator == old.name_separator;
        let rate_limits = if separator && config.rate_limits == old.rate_limits {
            self.layers.rate_limits.clone()
        } else {
            RateLimitLayer::new(&config.rate_limits, &config.name_separator)?
        };
        let all_kept = plan.added.is_empty()
            && plan.removed.is_empty()
            && plan.reconnected.is_empty()
            && plan.reconfigured.is_empty();
        let cache = if all_kept && config.cache == old.cache {
            self.layers.cache.clone()
        } else {
            CacheLayer::new(&config.cache)
        };
        let authorize = AuthorizeLayer::new(&config.authorization, &config.name_separator);
        Ok(ClientLayers { authorize, rate_limits, cache })
    }

    /// The upstreams of `config`: kept, restacked over the same connector, or built anew.
    fn build(&self, config: &Config, old: &Upstreams, plan: &Plan) -> Result<Upstreams, ReloadError> {
        let mut built = Upstreams::default();
        for up in &config.upstreams {
            let name: &str = &up.name;
            let handle = match old.get(name) {
                Some(kept) if plan.kept.iter().any(|n| &**n == name) => Arc::clone(kept),
                Some(same) if plan.reconfigured.iter().any(|n| &**n == name) => Arc::new(upstream_handle(
                    config,
                    up,
                    same.connector.clone(),
                    Arc::clone(&same.policy.catalog),
                    &self.breakers,
                )),
                _ => match connect_to(config, up) {
                    Ok(connector) => {
                        Arc::new(upstream_handle(config, up, connector, Default::default(), &self.breakers))
                    }
                    Err(e) => {
                        stop_new_processes(&built, old);
                        return Err(ReloadError::Failed(e));
                    }
                },
            };
            built.push_shared(handle);
        }
        Ok(built)
    }

    /// Takes the retired upstreams out of every session at once (so the next request
    /// opens a link to what replaces them); closes their links and processes once the
    /// requests still running on them have ended. Ends the sessions opened on a removed
    /// upstream's own endpoint.
    async fn retire(&self, retired: Vec<Arc<UpstreamHandle>>, removed: &[Arc<str>]) {
        if retired.is_empty() {
            return;
        }
        let mut links = Vec::new();
        for session in self.gateway.sessions().all() {
            if let Scope::Single(name) = &session.scope
                && removed.contains(name)
            {
                tracing::info!(session = session.key, upstream = %name, "session ended: its upstream was removed");
                self.gateway.end_session(&session).await;
                continue;
            }
            for handle in &retired {
                if let Some(Slot::Up(link)) = session.take_slot(&handle.name) {
                    link.unsubscribe(session.key);
                    if !handle.is_shared() {
                        links.push(link);
                    }
                }
            }
        }
        for name in removed {
            self.breakers.forget(name);
        }
        let grace = self.in_force.load().shutdown.grace;
        let (gateway, removed) = (Arc::clone(&self.gateway), removed.to_vec());
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            while retired.iter().any(|h| h.slots.in_flight() > 0) && started.elapsed() < grace {
                tokio::time::sleep(RETIRE_POLL).await;
            }
            // A session that was opening while the reload ran may have linked to a removed
            // upstream after the first sweep: sweep once more.
            let current = gateway.upstreams();
            for session in gateway.sessions().all() {
                for name in removed.iter().filter(|n| current.get(n).is_none()) {
                    if let Some(Slot::Up(link)) = session.take_slot(name) {
                        link.unsubscribe(session.key);
                        if !retired.iter().any(|h| &h.name == name && h.is_shared()) {
                            links.push(link);
                        }
                    }
                }
            }
            futures::future::join_all(links.iter().map(|link| link.close())).await;
            stop_shared(retired.iter().map(|h| &h.connector));
        });
    }
}

/// What a reload does with each upstream, by name.
#[derive(Debug, Default)]
struct Plan {
    kept: Vec<Arc<str>>,
    reconfigured: Vec<Arc<str>>,
    reconnected: Vec<Arc<str>>,
    added: Vec<Arc<str>>,
    removed: Vec<Arc<str>>,
}

impl Plan {
    fn new(old: &Config, new: &Config, running: &Upstreams) -> Plan {
        let mut plan = Plan::default();
        for up in &new.upstreams {
            let name: Arc<str> = Arc::from(up.name.as_str());
            let before = old.upstreams.iter().find(|o| o.name == up.name);
            match before {
                Some(before) if running.get(&name).is_some() => {
                    if way_to(old, before) != way_to(new, up) {
                        plan.reconnected.push(name);
                    } else if policy_of(old, before) != policy_of(new, up) {
                        plan.reconfigured.push(name);
                    } else {
                        plan.kept.push(name);
                    }
                }
                _ => plan.added.push(name),
            }
        }
        for up in &old.upstreams {
            if !new.upstreams.iter().any(|n| n.name == up.name) {
                plan.removed.push(Arc::from(up.name.as_str()));
            }
        }
        plan
    }
}

/// Everything that decides how an upstream is reached: its configuration without its
/// policy, with what it takes from the rest of the file.
fn way_to(config: &Config, up: &UpstreamConfig) -> (UpstreamConfig, Duration, usize) {
    let connect = up.timeouts(&config.defaults.timeouts).connect;
    let way = UpstreamConfig {
        timeouts: None,
        retry: None,
        breaker: None,
        concurrency: None,
        trust_annotations: false,
        tools: Default::default(),
        prompts: Default::default(),
        errors: Default::default(),
        // What the process is given of the environment decides how it runs.
        inherit_env: config.defaults.inherit_env.iter().chain(&up.inherit_env).cloned().collect(),
        ..up.clone()
    };
    (way, connect, config.limits.max_message_bytes)
}

/// An upstream's policy, resolved against the defaults, and the separator its prefixed
/// names are made with.
fn policy_of(config: &Config, up: &UpstreamConfig) -> impl PartialEq {
    (
        up.timeouts(&config.defaults.timeouts),
        up.retry(&config.defaults.retry),
        up.breaker(&config.defaults.breaker),
        up.concurrency(&config.defaults.concurrency),
        up.trust_annotations,
        up.tools.clone(),
        up.prompts.clone(),
        up.sanitize(&config.errors),
        config.name_separator.clone(),
    )
}

/// What clients see of the tools of the upstream `name` as `config` overrides them (the
/// overrides without the settings that change only how seawall calls a tool).
fn tools_seen(config: &Config, name: &str) -> Vec<(String, ToolConfig)> {
    let tools = config.upstreams.iter().filter(|up| up.name == name).flat_map(|up| &up.tools);
    tools
        .filter(|(_, tool)| tool.shapes())
        .map(|(key, tool)| (key.clone(), ToolConfig { idempotent: false, timeout: None, ..tool.clone() }))
        .collect()
}

/// The prompt overrides of the upstream `name` in `config`.
fn prompts_seen<'a>(config: &'a Config, name: &str) -> Option<&'a std::collections::BTreeMap<String, PromptConfig>> {
    config.upstreams.iter().find(|up| up.name == name).map(|up| &up.prompts)
}

/// Refuses a change of the listeners' addresses, which needs a restart.
fn refuse_listener_changes(before: &Config, after: &Config) -> Result<(), ReloadError> {
    let mut refused = Vec::new();
    if before.listen != after.listen {
        refused.push(format!(
            "listen: changing the listener address needs a restart (in force: {}, in the file: {})",
            before.listen, after.listen
        ));
    }
    if before.admin_listen != after.admin_listen {
        let shown = |a: Option<std::net::SocketAddr>| a.map_or("none".to_owned(), |a| a.to_string());
        refused.push(format!(
            "admin_listen: changing the admin listener address needs a restart (in force: {}, in the file: {})",
            shown(before.admin_listen),
            shown(after.admin_listen)
        ));
    }
    if refused.is_empty() { Ok(()) } else { Err(ReloadError::Refused(refused.join("\n"))) }
}

/// The configuration to put in force for the newly read `file`: the sections that need a
/// restart keep their values in force (`old`), and those that changed in the file since
/// it was last read (`before`) are named.
fn in_force(file: &Config, before: &Config, old: &Config) -> (Config, Vec<&'static str>) {
    let mut config = file.clone();
    let mut changed = Vec::new();
    macro_rules! keep {
        ($($field:ident),*) => {$(
            if file.$field != before.$field {
                changed.push(stringify!($field));
            }
            config.$field = old.$field.clone();
        )*};
    }
    keep!(
        listen,
        admin_listen,
        workers,
        admin,
        shutdown,
        session,
        limits,
        trusted_proxies,
        security,
        access_log,
        tracing,
        breaker_sharing
    );
    let metadata = |c: &Config| c.auth.as_ref().and_then(|a| a.resource_metadata.clone());
    if metadata(file) != metadata(before) {
        changed.push("auth.resource_metadata");
    }
    if let Some(auth) = &mut config.auth {
        auth.resource_metadata = metadata(old);
    }
    (config, changed)
}

/// Stops the shared processes `built` started that `old` does not run.
fn stop_new_processes(built: &Upstreams, old: &Upstreams) {
    let started = built.iter().filter(|h| !old.get(&h.name).is_some_and(|o| Arc::ptr_eq(o, h)));
    let reused = |h: &&Arc<UpstreamHandle>| old.get(&h.name).is_some_and(|o| o.connector.same_as(&h.connector));
    stop_shared(started.filter(|h| !reused(h)).map(|h| &h.connector));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tools: &str) -> Config {
        let text =
            format!("upstreams:\n  - name: demo\n    command: x\n    tools:\n{tools}    prompts:\n      greet: {{}}\n");
        Config::parse(&text, "t.yaml").unwrap()
    }

    #[test]
    fn only_what_clients_see_of_a_tool_tells_them_their_tools_changed() {
        let before = config("      echo: { description: before, timeout: 5s }\n");
        let same = config("      echo: { description: before, timeout: 9s, idempotent: true }\n");
        let renamed = config("      echo: { description: before, name: say }\n");
        assert_eq!(tools_seen(&before, "demo"), tools_seen(&same, "demo"), "timeouts and retries are not seen");
        assert_ne!(tools_seen(&before, "demo"), tools_seen(&renamed, "demo"));
        assert_eq!(prompts_seen(&before, "demo"), prompts_seen(&renamed, "demo"));
        assert!(tools_seen(&before, "other").is_empty());
    }
}
