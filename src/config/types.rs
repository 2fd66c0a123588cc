//! The configuration types, their documented defaults, and small accessors; the
//! upstream types are in [`upstream`](super::upstream).
//!
//! Every field's doc comment gives its unit and default; `config/example.yaml` repeats
//! them for operators. These types carry no behaviour beyond lookups.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::auth::AuthConfig;
use super::authorization::AuthorizationConfig;
use super::breaker_sharing::BreakerSharingConfig;
use super::operations::{AdminConfig, ShutdownConfig};
use super::rate_limit::RateLimitsConfig;
use super::resilience::ErrorsConfig;
use super::schema::{HumanDuration, SocketAddress};
use super::trace::TracingConfig;
use super::trusted_proxies::TrustedProxiesConfig;
use super::upstream::{Defaults, UpstreamConfig};

/// The whole gateway configuration (the top level of the YAML file).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address (`IP:port`) of the MCP listener clients connect to.
    /// Default `127.0.0.1:8080`. `seawall stdio` does not use it.
    #[serde(deserialize_with = "socket_addr::required")]
    #[schemars(with = "SocketAddress")]
    pub listen: SocketAddr,
    /// Address (`IP:port`) of the admin listener (`/metrics`, `/healthz`, `/readyz`, the
    /// status page and the admin API); `null` disables it. Default `127.0.0.1:9090`.
    /// `seawall stdio` does not use it.
    #[serde(deserialize_with = "socket_addr::optional")]
    #[schemars(with = "Option<SocketAddress>")]
    pub admin_listen: Option<SocketAddr>,
    /// How many worker threads serve client connections, each a single-threaded runtime
    /// that keeps a connection and the upstream connections its calls open (count, 1 to
    /// 1024). Default: one per core the process may use (`available_parallelism`, which
    /// honours CPU affinity and cgroup quotas), or `TOKIO_WORKER_THREADS` when it is set.
    /// Fewer than the cores suits a gateway that shares a small machine with its
    /// upstreams (a sidecar): a worker that always has work never sleeps and wakes. Read
    /// at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Who may use the admin API. Default: loopback clients only, without a token.
    pub admin: AdminConfig,
    /// Graceful shutdown on SIGTERM and SIGINT.
    pub shutdown: ShutdownConfig,
    /// Joins `<upstream><sep><tool>` for tools and prompts on the aggregated endpoint.
    /// Non-empty printable ASCII without whitespace or `/`. Default `"__"`.
    pub name_separator: String,
    /// Client session table settings.
    pub session: SessionConfig,
    /// Size and concurrency limits.
    pub limits: LimitsConfig,
    /// The proxies in front of seawall whose word on the client's address is taken.
    /// Default: none (every client is the address it connects from).
    pub trusted_proxies: TrustedProxiesConfig,
    /// Origin / Host checks on client requests.
    pub security: SecurityConfig,
    /// Defaults applied to every upstream unless it overrides them.
    pub defaults: Defaults,
    /// Error rewriting and validation.
    pub errors: ErrorsConfig,
    /// Client authentication; absent (the default) means clients do not authenticate.
    pub auth: Option<AuthConfig>,
    /// Rate limits on client requests. Default: none.
    pub rate_limits: RateLimitsConfig,
    /// The Redis through which replicas share the breakers marked `shared`. Default: the
    /// rate limits' Redis, if any.
    pub breaker_sharing: BreakerSharingConfig,
    /// Which principals may use which tools, prompts and resources. Default: everything
    /// allowed.
    pub authorization: AuthorizationConfig,
    /// The response cache honouring caching hints (`ttlMs`, `cacheScope`). Default: off.
    pub cache: CacheConfig,
    /// One line per client request. Default: on, to stderr.
    pub access_log: AccessLogConfig,
    /// OpenTelemetry tracing (OTLP export). Default: off, unless `OTEL_*` variables
    /// configure it.
    pub tracing: TracingConfig,
    /// An `mcpServers` JSON file (Claude Desktop, Cursor or VS Code) whose servers become
    /// further upstreams with default settings, after those of `upstreams`; a relative
    /// path is taken from the config file's directory. A server named like an upstream
    /// of `upstreams` is an error. Once loaded, `upstreams` holds the file's servers too.
    /// Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_mcp_servers: Option<std::path::PathBuf>,
    /// The MCP servers behind the gateway; at least one (counting those of
    /// `include_mcp_servers`). Default: none (an error).
    pub upstreams: Vec<UpstreamConfig>,
    /// What loading found that does not stop the gateway (fields of an included
    /// `mcpServers` file that seawall does not use), one `FILE:LINE: FIELD: message` line
    /// each; `check-config` and `run` print them. Not part of the file.
    #[serde(skip)]
    #[schemars(skip)]
    pub warnings: Vec<String>,
}

/// The access log: one line per client request (time, session, principal, method, tool,
/// id, outcome, error code, HTTP status of a refusal, correlation id, duration).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AccessLogConfig {
    /// Write it. Default: on under `seawall run`; under `seawall stdio`, whose stderr
    /// its client shows as the server's log, on only when `path` names a file (or
    /// `enabled: true` is written).
    pub enabled: Option<bool>,
    /// A file to append it to; `null` writes it to stderr. Default `null`.
    pub path: Option<std::path::PathBuf>,
    /// `json` (one object per line), `text`, or `auto`: text on a terminal, JSON
    /// otherwise (and always in a file). Default `auto`.
    pub format: AccessLogFormat,
}

impl Default for AccessLogConfig {
    fn default() -> Self {
        AccessLogConfig { enabled: None, path: None, format: AccessLogFormat::Auto }
    }
}

impl AccessLogConfig {
    /// Whether lines are written (on unless turned off).
    pub(crate) fn is_on(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// Turns the log off for a stdio client's gateway unless the file asked for it
    /// (`enabled: true`, or a `path`): its stderr is that client's view of its
    /// server's log, not a place for a line per request.
    pub(crate) fn default_off_on_stdio(&mut self) {
        if self.enabled.is_none() && self.path.is_none() {
            self.enabled = Some(false);
        }
    }
}

/// The access log's line format.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogFormat {
    /// Text on a terminal, JSON otherwise.
    #[default]
    Auto,
    /// One JSON object per line.
    Json,
    /// Readable text.
    Text,
}

/// The response cache: cacheable results that carry `ttlMs > 0` (upstreams of the
/// modern era send them) are kept for that long, `public` ones for every client of the
/// endpoint, `private` ones for the same principal (or session) only.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Keep and serve cached results. Default `false`.
    pub enabled: bool,
    /// Most results kept; the oldest goes first (count, at least 1). Default `1024`.
    pub max_entries: usize,
    /// Largest result kept (bytes). Default `1048576` (1 MiB).
    pub max_entry_bytes: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { enabled: false, max_entries: 1024, max_entry_bytes: 1 << 20 }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080),
            admin_listen: Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9090)),
            workers: None,
            admin: AdminConfig::default(),
            shutdown: ShutdownConfig::default(),
            name_separator: "__".to_owned(),
            session: SessionConfig::default(),
            limits: LimitsConfig::default(),
            trusted_proxies: TrustedProxiesConfig::default(),
            security: SecurityConfig::default(),
            defaults: Defaults::default(),
            errors: ErrorsConfig::default(),
            auth: None,
            rate_limits: RateLimitsConfig::default(),
            breaker_sharing: BreakerSharingConfig::default(),
            authorization: AuthorizationConfig::default(),
            cache: CacheConfig::default(),
            access_log: AccessLogConfig::default(),
            tracing: TracingConfig::default(),
            include_mcp_servers: None,
            upstreams: Vec::new(),
            warnings: Vec::new(),
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
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// A session with no traffic for this long is closed (duration). Default `30m`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Most concurrent client sessions (count); more are refused as overloaded (-32012,
    /// HTTP 503). Lowered at start when the open-file limit cannot hold them: each
    /// session keeps one connection per HTTP upstream. Default `4096`.
    pub max_sessions: usize,
    /// Most concurrent sessions opened from one client IP address (count); `0` means no
    /// per-address limit. Behind a reverse proxy every client has the proxy's address
    /// unless `trusted_proxies` names the proxy. Default `256`.
    pub max_sessions_per_peer: usize,
    /// Most concurrent sessions one authenticated principal (API key name or JWT `sub`)
    /// may hold (count); more are refused as overloaded like the other session caps.
    /// Unauthenticated clients are not counted here. `0` means no per-principal limit,
    /// the default, since one API key often serves a whole fleet of clients.
    pub max_sessions_per_principal: usize,
    /// What each SSE stream towards a Streamable HTTP client keeps for a client that
    /// reconnects with `Last-Event-ID`.
    pub replay_buffer: ReplayBufferConfig,
    /// The key that seals legacy session ids, the same on every replica so that any of
    /// them resumes any session: 32 bytes in base64 (standard or URL-safe alphabet,
    /// padding optional), e.g. from `openssl rand -base64 32`; `${VAR}` is expanded.
    /// At most one of `key` and `key_file`. Default: none — each process draws a key of
    /// its own, and a session is served only by the process that opened it.
    pub key: Option<String>,
    /// A file holding the key, encoded as for `key` (surrounding whitespace ignored),
    /// e.g. a mounted Kubernetes Secret; read at start, a relative path from the working
    /// directory. Default: none.
    pub key_file: Option<std::path::PathBuf>,
    /// Keys that sealed ids still to be accepted after a rotation, encoded as for `key`
    /// (`${VAR}` expanded); ids are sealed with `key` only. Needs `key` or `key_file`.
    /// Default `[]`.
    pub previous_keys: Vec<String>,
    /// A file of previous keys, one per line (blank lines ignored). Default: none.
    pub previous_key_file: Option<std::path::PathBuf>,
    /// How long after its `initialize` a session id opens on a replica that does not hold
    /// the session (duration): a replica holding it keeps serving it while it is used,
    /// and a DELETEd session may be resumed on another replica until then. Default `24h`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub id_lifetime: Duration,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            idle_timeout: Duration::from_secs(30 * 60),
            max_sessions: 4096,
            max_sessions_per_peer: 256,
            max_sessions_per_principal: 0,
            replay_buffer: ReplayBufferConfig::default(),
            key: None,
            key_file: None,
            previous_keys: Vec::new(),
            previous_key_file: None,
            id_lifetime: Duration::from_secs(24 * 60 * 60),
        }
    }
}

/// The replay buffer of one SSE stream towards a Streamable HTTP client: the newest
/// events it sent or has yet to send, oldest dropped first when either bound is passed.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ReplayBufferConfig {
    /// Most events kept per stream (count, at least 1). Default `256`.
    pub messages: usize,
    /// Most bytes of events kept per stream (bytes, at least 1); one event larger than
    /// this is kept only until it is sent. Default `1048576` (1 MiB).
    pub bytes: usize,
}

impl Default for ReplayBufferConfig {
    fn default() -> Self {
        ReplayBufferConfig { messages: 256, bytes: 1 << 20 }
    }
}

/// Size and concurrency limits.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest client POST body, and for `seawall stdio` the longest line (bytes); larger
    /// is answered 413 (on stdio -32600). Default `4194304` (4 MiB).
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
    /// Most requests one authenticated principal may have outstanding at once, over all
    /// its sessions (count); beyond it requests are refused as overloaded. Unauthenticated
    /// requests are not counted here. `0` means no per-principal limit. Default `0`.
    pub max_in_flight_per_principal: usize,
    /// Most open client connections (count); more are refused at once with HTTP 503.
    /// Lowered at start when the open-file limit cannot hold them. Default `4096`.
    pub max_connections: usize,
    /// Most open client connections from one IP address (count); `0` means no
    /// per-address limit. Counted by the address a connection comes from, a trusted
    /// proxy's own included (`trusted_proxies` does not change it): behind a proxy it
    /// bounds the connections the proxy holds open. Default `256`.
    pub max_connections_per_peer: usize,
    /// Longest time a client may take to send a request's headers (HTTP/1; duration);
    /// then the connection is closed. Default `10s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// Longest time a client may take to send a POST body (duration); then it is
    /// answered 408 and the connection is closed. Default `30s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub body_timeout: Duration,
    /// A client connection with no request in flight for this long is closed
    /// (duration). Default `60s`.
    #[schemars(with = "HumanDuration")]
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
            max_in_flight_per_principal: 0,
            max_connections: 4096,
            max_connections_per_peer: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Origin / Host checks on client requests (DNS-rebinding protection).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    /// Extra accepted `Origin` values: full origins like `https://app.example.com`, or
    /// `*`. Without an entry an Origin is accepted only if its host is the Host the client
    /// reached, or `localhost`/`127.0.0.1`/`[::1]` when listening on loopback. Default `[]`.
    pub allowed_origins: Vec<String>,
    /// Accepted `Host` values: host names, optionally with `:port`. When empty and
    /// `listen` is loopback, only `localhost`/`127.0.0.1`/`[::1]` (any port) are accepted;
    /// otherwise any host. Default `[]`.
    pub allowed_hosts: Vec<String>,
    /// Cross-origin requests from browser-based clients (CORS). Default: off (no
    /// origins).
    pub cors: CorsConfig,
}

/// CORS for browser-based clients on the MCP endpoints and the protected-resource
/// metadata. Off while `allowed_origins` is empty.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CorsConfig {
    /// Origins whose pages may call the gateway: full origins like
    /// `https://app.example.com`, or `*` for any. Each is also accepted by the Origin
    /// check above. Default `[]` (CORS off).
    pub allowed_origins: Vec<String>,
    /// How long a browser may cache a preflight answer (duration; browsers cap it at
    /// 2 h or less). Default `10m`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub max_age: Duration,
    /// Send `Access-Control-Allow-Credentials: true`, so pages may send cookies or TLS
    /// client certificates; not needed for bearer tokens. Not allowed with `*`.
    /// Default `false`.
    pub allow_credentials: bool,
}

impl Default for CorsConfig {
    fn default() -> Self {
        CorsConfig { allowed_origins: Vec::new(), max_age: Duration::from_secs(600), allow_credentials: false }
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

impl Config {
    /// The Redis URL breakers are shared through: `breaker_sharing.redis`, else the rate
    /// limits' Redis. `None` when neither is set (or the one set is not a valid URL,
    /// which validation reports).
    pub fn breaker_sharing_redis(&self) -> Option<String> {
        match &self.breaker_sharing.redis {
            Some(url) => super::breaker_sharing::redis_url(url).ok(),
            None => match self.rate_limits.backend() {
                Ok(super::rate_limit::RateBackend::Redis(url)) => Some(url),
                _ => None,
            },
        }
    }

    /// Whether any upstream's breakers are `shared`.
    pub fn shares_breakers(&self) -> bool {
        self.upstreams.iter().any(|up| up.breaker(&self.defaults.breaker).shared)
    }
}
