//! The configuration types, their documented defaults, and small accessors.
//!
//! Every field's doc comment gives its unit and default; `config/example.yaml` repeats
//! them for operators. These types carry no behaviour beyond lookups.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::resilience::{
    BreakerConfig, BreakerOverrides, ConcurrencyConfig, ConcurrencyOverrides, ErrorsConfig, RetryConfig,
    RetryOverrides, ToolConfig,
};

/// The whole gateway configuration (the top level of the YAML file).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address (`IP:port`) of the MCP listener clients connect to.
    /// Default `127.0.0.1:8080`.
    #[serde(deserialize_with = "socket_addr::required")]
    pub listen: SocketAddr,
    /// Address (`IP:port`) of the admin listener (`/metrics`, `/healthz`, `/readyz`);
    /// `null` disables it. Default `127.0.0.1:9090`.
    #[serde(deserialize_with = "socket_addr::optional")]
    pub admin_listen: Option<SocketAddr>,
    /// Joins `<upstream><sep><tool>` for tools and prompts on the aggregated endpoint.
    /// Non-empty printable ASCII without whitespace or `/`. Default `"__"`.
    pub name_separator: String,
    /// Client session table settings.
    pub session: SessionConfig,
    /// Size and concurrency limits.
    pub limits: LimitsConfig,
    /// Origin / Host checks on client requests.
    pub security: SecurityConfig,
    /// Defaults applied to every upstream unless it overrides them.
    pub defaults: Defaults,
    /// Error rewriting and validation.
    pub errors: ErrorsConfig,
    /// The MCP servers behind the gateway; at least one. Default: none (an error).
    pub upstreams: Vec<UpstreamConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080),
            admin_listen: Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9090)),
            name_separator: "__".to_owned(),
            session: SessionConfig::default(),
            limits: LimitsConfig::default(),
            security: SecurityConfig::default(),
            defaults: Defaults::default(),
            errors: ErrorsConfig::default(),
            upstreams: Vec::new(),
        }
    }
}

impl Config {
    /// The upstream called `name`, if any.
    pub fn upstream(&self, name: &str) -> Option<&UpstreamConfig> {
        self.upstreams.iter().find(|u| u.name == name)
    }
}

/// Client session table settings.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// A session with no traffic for this long is closed (duration). Default `30m`.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Most concurrent client sessions (count); more are refused as overloaded (-32012,
    /// HTTP 503). Lowered at start when the open-file limit cannot hold them: each
    /// session keeps one connection per HTTP upstream. Default `4096`.
    pub max_sessions: usize,
    /// Most concurrent sessions opened from one client IP address (count); `0` means no
    /// per-address limit (e.g. behind a reverse proxy, where every client has the
    /// proxy's address). Default `256`.
    pub max_sessions_per_peer: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig { idle_timeout: Duration::from_secs(30 * 60), max_sessions: 4096, max_sessions_per_peer: 256 }
    }
}

/// Size and concurrency limits.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest client POST body (bytes); larger is answered 413. Default `4194304` (4 MiB).
    pub max_body_bytes: usize,
    /// Largest single message from an upstream: one stdio line, SSE event or JSON body
    /// (bytes). Default `16777216` (16 MiB).
    pub max_message_bytes: usize,
    /// Most requests one client session may have outstanding at once (count).
    /// Default `256`.
    pub max_in_flight_per_session: usize,
    /// Most requests the whole gateway handles at once; beyond it requests are refused
    /// as overloaded (count). Default `4096`.
    pub max_in_flight: usize,
    /// Most open client connections (count); more are refused at once with HTTP 503.
    /// Lowered at start when the open-file limit cannot hold them. Default `4096`.
    pub max_connections: usize,
    /// Most open client connections from one IP address (count); `0` means no
    /// per-address limit. Default `256`.
    pub max_connections_per_peer: usize,
    /// Longest time a client may take to send a request's headers (HTTP/1; duration);
    /// then the connection is closed. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// Longest time a client may take to send a POST body (duration); then it is
    /// answered 408 and the connection is closed. Default `30s`.
    #[serde(with = "humantime_serde")]
    pub body_timeout: Duration,
    /// A client connection with no request in flight for this long is closed
    /// (duration). Default `60s`.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_body_bytes: 4 * 1024 * 1024,
            max_message_bytes: 16 * 1024 * 1024,
            max_in_flight_per_session: 256,
            max_in_flight: 4096,
            max_connections: 4096,
            max_connections_per_peer: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Origin / Host checks on client requests (DNS-rebinding protection).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    /// Extra accepted `Origin` values: full origins like `https://app.example.com`, or
    /// `*`. Without an entry an Origin is accepted only if its host is the Host the client
    /// reached, or localhost, 127.0.0.1 or `[::1]` when listening on loopback. Default `[]`.
    pub allowed_origins: Vec<String>,
    /// Accepted `Host` values: host names, optionally with `:port`. When empty and
    /// `listen` is loopback, only localhost, 127.0.0.1 and `[::1]` (any port) are accepted;
    /// otherwise any host. Default `[]`.
    pub allowed_hosts: Vec<String>,
}

/// Defaults applied to every upstream unless it overrides them.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Defaults {
    /// Timeouts per method class.
    pub timeouts: Timeouts,
    /// Retries of idempotent requests.
    pub retry: RetryConfig,
    /// Circuit breakers per upstream and per tool.
    pub breaker: BreakerConfig,
    /// Load shedding per upstream.
    pub concurrency: ConcurrencyConfig,
}

/// Timeouts for talking to an upstream.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// TCP/TLS connect, or process spawn plus the `initialize` handshake (duration).
    /// Default `5s`.
    #[serde(with = "humantime_serde")]
    pub connect: Duration,
    /// Any request other than `tools/call` (duration). Default `15s`.
    #[serde(with = "humantime_serde")]
    pub request: Duration,
    /// `tools/call` when the tool sends no progress (duration). Default `60s`.
    #[serde(with = "humantime_serde")]
    pub tool_call: Duration,
    /// `tools/call`: an attempt that hears nothing from the upstream for this long is
    /// abandoned; each progress notification resets it and extends the call's deadline to
    /// at least now + `tool_idle` (duration). Default `30s`.
    #[serde(with = "humantime_serde")]
    pub tool_idle: Duration,
    /// `tools/call`: hard cap however much progress arrives (duration). Default `300s`.
    #[serde(with = "humantime_serde")]
    pub tool_max: Duration,
    /// One attempt of an idempotent request that hears nothing from the upstream for this
    /// long is abandoned and, if the deadline leaves room, retried (on another endpoint of
    /// a replicated upstream); progress restarts it (duration). Default: unset, an attempt
    /// may use the whole deadline.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub attempt: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(15),
            tool_call: Duration::from_secs(60),
            tool_idle: Duration::from_secs(30),
            tool_max: Duration::from_secs(300),
            attempt: None,
        }
    }
}

/// Per-upstream override of `defaults.timeouts`; an absent field keeps the default.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutOverrides {
    /// Overrides `defaults.timeouts.connect` (duration). Default: not overridden.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub connect: Option<Duration>,
    /// Overrides `defaults.timeouts.request` (duration). Default: not overridden.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub request: Option<Duration>,
    /// Overrides `defaults.timeouts.tool_call` (duration). Default: not overridden.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<Duration>,
    /// Overrides `defaults.timeouts.tool_idle` (duration). Default: not overridden.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub tool_idle: Option<Duration>,
    /// Overrides `defaults.timeouts.tool_max` (duration). Default: not overridden.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub tool_max: Option<Duration>,
    /// Overrides `defaults.timeouts.attempt` (duration). Default: not overridden.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub attempt: Option<Duration>,
}

/// How client sessions share a stdio upstream process.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StdioShare {
    /// One process for all client sessions. Client features (sampling, elicitation,
    /// roots) are not offered to it, since it cannot tell clients apart.
    #[default]
    Shared,
    /// One process per client session.
    PerSession,
}

/// Backoff between restarts of a dead stdio process: exponential, doubling from
/// `base_delay` up to `max_delay`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RestartConfig {
    /// Delay before the first restart (duration). Default `250ms`.
    #[serde(with = "humantime_serde")]
    pub base_delay: Duration,
    /// Longest delay between restarts (duration). Default `30s`.
    #[serde(with = "humantime_serde")]
    pub max_delay: Duration,
}

impl Default for RestartConfig {
    fn default() -> Self {
        RestartConfig { base_delay: Duration::from_millis(250), max_delay: Duration::from_secs(30) }
    }
}

/// One MCP server behind the gateway: a stdio process (`command`) or a Streamable HTTP
/// endpoint (`url`), exactly one of the two.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Unique name, `[A-Za-z0-9_-]{1,64}`, not containing `name_separator`. Required.
    pub name: String,
    /// stdio: program to run; `seawall` means the running seawall binary itself.
    /// Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: arguments to `command`. Default `[]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: extra environment variables; values may use `${VAR}` (expanded at load,
    /// an unset VAR is an error). Default `{}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: working directory of the process. Default: the gateway's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// stdio: `shared` or `per_session`. Default `shared`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub share: StdioShare,
    /// stdio: backoff between restarts of a dead process.
    #[serde(default, skip_serializing_if = "is_default")]
    pub restart: RestartConfig,
    /// stdio: after closing stdin wait this long, then SIGTERM, wait again, then SIGKILL
    /// (duration). Default `2s`.
    #[serde(
        default = "default_shutdown_grace",
        skip_serializing_if = "is_default_shutdown_grace",
        with = "humantime_serde"
    )]
    pub shutdown_grace: Duration,
    /// stdio `per_session`: most processes running at once; sessions beyond it find the
    /// upstream unavailable (count). Default `64`.
    #[serde(default = "default_max_processes", skip_serializing_if = "is_default_max_processes")]
    pub max_processes: usize,
    /// HTTP: `http://` or `https://` URL of the MCP endpoint. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP: static headers sent on every upstream request (e.g. credentials); values may
    /// use `${VAR}`. Default `{}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// HTTP: further replicas of the same server; requests are balanced across `url` and
    /// these, a retry goes to another one, and one that keeps failing is ejected for a
    /// while. Default `[]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
    /// Per-upstream override of `defaults.timeouts`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<TimeoutOverrides>,
    /// Per-upstream override of `defaults.retry`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryOverrides>,
    /// Per-upstream override of `defaults.breaker`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerOverrides>,
    /// Per-upstream override of `defaults.concurrency`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyOverrides>,
    /// Believe this upstream's tool annotations: tools it marks `readOnlyHint` or
    /// `idempotentHint` are retried like idempotent ones. Default `false`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub trust_annotations: bool,
    /// Per-tool settings, by the tool's name on the upstream. Default `{}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolConfig>,
}

fn default_max_processes() -> usize {
    64
}

fn is_default_max_processes(value: &usize) -> bool {
    *value == default_max_processes()
}

fn default_shutdown_grace() -> Duration {
    Duration::from_secs(2)
}

// Serialization leaves defaulted upstream fields out, so a serialized HTTP upstream
// does not appear to set stdio-only fields.
fn is_default_shutdown_grace(value: &Duration) -> bool {
    *value == default_shutdown_grace()
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl Default for UpstreamConfig {
    /// An unnamed upstream with every optional field at its default (not valid as is:
    /// it needs a `name` and a `command` or `url`).
    fn default() -> Self {
        UpstreamConfig {
            name: String::new(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            share: StdioShare::default(),
            restart: RestartConfig::default(),
            shutdown_grace: default_shutdown_grace(),
            max_processes: default_max_processes(),
            url: None,
            headers: BTreeMap::new(),
            endpoints: Vec::new(),
            timeouts: None,
            retry: None,
            breaker: None,
            concurrency: None,
            trust_annotations: false,
            tools: BTreeMap::new(),
        }
    }
}

/// The transport of an upstream, borrowed from its [`UpstreamConfig`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UpstreamKind<'a> {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        /// Program to run.
        command: &'a str,
        /// Its arguments.
        args: &'a [String],
        /// Extra environment (already expanded).
        env: &'a BTreeMap<String, String>,
        /// Working directory.
        cwd: Option<&'a Path>,
        /// Shared or per client session.
        share: StdioShare,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The MCP endpoint URL.
        url: &'a str,
        /// Static headers (already expanded).
        headers: &'a BTreeMap<String, String>,
    },
}

impl UpstreamConfig {
    /// The transport of this upstream. Meaningful after validation (exactly one of
    /// `command` / `url` set); before it, `command` wins and neither gives an empty
    /// stdio command.
    pub fn kind(&self) -> UpstreamKind<'_> {
        match (&self.command, &self.url) {
            (None, Some(url)) => UpstreamKind::Http { url, headers: &self.headers },
            (command, _) => UpstreamKind::Stdio {
                command: command.as_deref().unwrap_or_default(),
                args: &self.args,
                env: &self.env,
                cwd: self.cwd.as_deref(),
                share: self.share,
            },
        }
    }

    /// The effective timeouts: this upstream's overrides on top of `defaults`.
    pub fn timeouts(&self, defaults: &Timeouts) -> Timeouts {
        let o = self.timeouts.unwrap_or_default();
        Timeouts {
            connect: o.connect.unwrap_or(defaults.connect),
            request: o.request.unwrap_or(defaults.request),
            tool_call: o.tool_call.unwrap_or(defaults.tool_call),
            tool_idle: o.tool_idle.unwrap_or(defaults.tool_idle),
            tool_max: o.tool_max.unwrap_or(defaults.tool_max),
            attempt: o.attempt.or(defaults.attempt),
        }
    }

    /// Retry settings: the defaults with this upstream's overrides.
    pub fn retry(&self, defaults: &RetryConfig) -> RetryConfig {
        self.retry.map_or(*defaults, |o| o.apply(defaults))
    }

    /// Breaker settings: the defaults with this upstream's overrides.
    pub fn breaker(&self, defaults: &BreakerConfig) -> BreakerConfig {
        self.breaker.map_or(*defaults, |o| o.apply(defaults))
    }

    /// Concurrency settings: the defaults with this upstream's overrides.
    pub fn concurrency(&self, defaults: &ConcurrencyConfig) -> ConcurrencyConfig {
        self.concurrency.map_or(*defaults, |o| o.apply(defaults))
    }
}

/// Socket addresses parsed from strings, with an error that names the bad value. The
/// parse happens inside the visitor so yaml_serde stamps the error with the value's
/// line and field path.
mod socket_addr {
    use std::fmt;
    use std::net::SocketAddr;

    use serde::Deserializer;
    use serde::de::{Error, Visitor};

    struct Addr;

    impl Visitor<'_> for Addr {
        type Value = SocketAddr;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a socket address IP:port")
        }

        fn visit_str<E: Error>(self, text: &str) -> Result<SocketAddr, E> {
            text.parse().map_err(|_| E::custom(format_args!("invalid socket address {text:?}")))
        }
    }

    struct MaybeAddr;

    impl<'de> Visitor<'de> for MaybeAddr {
        type Value = Option<SocketAddr>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a socket address IP:port, or null")
        }

        fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(Addr).map(Some)
        }
    }

    pub(super) fn required<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
        d.deserialize_str(Addr)
    }

    pub(super) fn optional<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        d.deserialize_option(MaybeAddr)
    }
}
