//! The configuration of upstreams: the defaults every upstream shares and one
//! upstream's own settings, with their documented defaults and small accessors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::prompts::PromptConfig;
use super::resilience::{
    BreakerConfig, BreakerOverrides, ConcurrencyConfig, ConcurrencyOverrides, ErrorsConfig, RetryConfig,
    RetryOverrides, SanitizeLevel, UpstreamErrorsConfig,
};
use super::schema::{HumanDuration, ScalarText};
use super::tools::ToolConfig;

/// Defaults applied to every upstream unless it overrides them.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
#[schemars(transform = defaults_schema_defaults)]
pub struct Defaults {
    /// Timeouts per method class.
    pub timeouts: Timeouts,
    /// Retries of idempotent requests.
    pub retry: RetryConfig,
    /// Circuit breakers per upstream and per tool.
    pub breaker: BreakerConfig,
    /// Load shedding per upstream.
    pub concurrency: ConcurrencyConfig,
    /// stdio: variables of the gateway's own environment every stdio upstream gets, by
    /// name (`*` for all), besides the baseline and its own `inherit_env` — e.g. the
    /// proxy and TLS variables `npx` needs to download a server (`HTTPS_PROXY`,
    /// `SSL_CERT_FILE`, `NODE_EXTRA_CA_CERTS`). Servers of `include_mcp_servers`, which
    /// have no `inherit_env` of their own, take these. Default `[]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inherit_env: Vec<String>,
}

/// Timeouts for talking to an upstream.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// TCP/TLS connect, or process spawn plus the `initialize` handshake (duration).
    /// Default `5s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub connect: Duration,
    /// Any request other than `tools/call` (duration). Default `15s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub request: Duration,
    /// `tools/call` when the tool sends no progress (duration). Default `60s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub tool_call: Duration,
    /// `tools/call` with progress: each progress notification extends the call's deadline
    /// to at least now + `tool_idle`, never past `tool_max` from the start; a call that
    /// reports no progress ends at `tool_call` (duration). Default `30s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub tool_idle: Duration,
    /// `tools/call`: hard cap however much progress arrives (duration). Default `300s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub tool_max: Duration,
    /// One attempt of an idempotent request that hears nothing from the upstream for this
    /// long is abandoned and, if the deadline leaves room, retried (on another endpoint of
    /// a replicated upstream); progress restarts it (duration). Default: unset — on an
    /// upstream with `endpoints`, an idempotent attempt ends after a third of the request's
    /// deadline (at least 1s) while a replica the request has not tried remains; otherwise
    /// an attempt may use the whole deadline.
    #[schemars(with = "Option<HumanDuration>")]
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
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutOverrides {
    /// Overrides `defaults.timeouts.connect` (duration). Default: not overridden.
    #[schemars(with = "Option<HumanDuration>")]
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub connect: Option<Duration>,
    /// Overrides `defaults.timeouts.request` (duration). Default: not overridden.
    #[schemars(with = "Option<HumanDuration>")]
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub request: Option<Duration>,
    /// Overrides `defaults.timeouts.tool_call` (duration). Default: not overridden.
    #[schemars(with = "Option<HumanDuration>")]
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<Duration>,
    /// Overrides `defaults.timeouts.tool_idle` (duration). Default: not overridden.
    #[schemars(with = "Option<HumanDuration>")]
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub tool_idle: Option<Duration>,
    /// Overrides `defaults.timeouts.tool_max` (duration). Default: not overridden.
    #[schemars(with = "Option<HumanDuration>")]
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub tool_max: Option<Duration>,
    /// Overrides `defaults.timeouts.attempt` (duration). Default: not overridden.
    #[schemars(with = "Option<HumanDuration>")]
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub attempt: Option<Duration>,
}

/// How client sessions share a stdio upstream process.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StdioShare {
    /// One process for all client sessions. Client features (sampling, elicitation,
    /// roots) are not offered to it, since it cannot tell clients apart.
    #[default]
    Shared,
    /// One process per client session.
    PerSession,
}

/// How an HTTP upstream (`url`) is spoken to.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum HttpTransport {
    /// Streamable HTTP (protocol versions 2025-03-26 and later): `url` is the MCP endpoint.
    #[default]
    StreamableHttp,
    /// HTTP+SSE (protocol version 2024-11-05): `url` is the server's event stream, whose
    /// first event names the URL messages are POSTed to.
    Sse,
}

/// Backoff between restarts of a dead stdio process: exponential, doubling from
/// `base_delay` up to `max_delay`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RestartConfig {
    /// Delay before the first restart (duration). Default `250ms`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub base_delay: Duration,
    /// Longest delay between restarts (duration). Default `30s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub max_delay: Duration,
}

impl Default for RestartConfig {
    fn default() -> Self {
        RestartConfig { base_delay: Duration::from_millis(250), max_delay: Duration::from_secs(30) }
    }
}

/// The protocol era seawall speaks to an HTTP upstream.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamProtocol {
    /// Detect it: the modern era if the server answers `server/discover`, else legacy.
    #[default]
    Auto,
    /// The stateless era (2026-07-28): `server/discover`, every request self-contained.
    Modern,
    /// The session era (2025-03-26 … 2025-11-25): `initialize`, `Mcp-Session-Id`.
    Legacy,
}

/// One MCP server behind the gateway: a stdio process (`command`) or an HTTP server
/// (`url`, Streamable HTTP or HTTP+SSE), exactly one of the two.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
#[schemars(transform = upstream_schema_defaults)]
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
    #[schemars(with = "BTreeMap<String, ScalarText>")]
    pub env: BTreeMap<String, String>,
    /// stdio: variables of the gateway's own environment the process also gets, by name
    /// (`*` for all of them). It always gets `PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`,
    /// `TERM`, `TMPDIR`, `TZ`, `LANG` and `LC_*` when they are set, and `env`; nothing
    /// else of the gateway's environment (its credentials among it) unless named here.
    /// Default `[]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inherit_env: Vec<String>,
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
    #[schemars(with = "HumanDuration")]
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
    #[schemars(with = "BTreeMap<String, ScalarText>")]
    pub headers: BTreeMap<String, String>,
    /// HTTP: `streamable_http`, or `sse` for a server that speaks only the HTTP+SSE
    /// transport of protocol version 2024-11-05 (`url` is then its event stream, e.g.
    /// `http://host/sse`). Default `streamable_http`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub transport: HttpTransport,
    /// HTTP: the protocol era spoken to the server: `auto` (ask `server/discover` in the
    /// modern era 2026-07-28 first, fall back to the `initialize` handshake; the answer
    /// is remembered and asked again after a failed handshake), `modern` or `legacy`.
    /// Default `auto`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub protocol: UpstreamProtocol,
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
    /// Per-tool settings, by the tool's name on the upstream: retries and deadline, and
    /// what clients see of it (name, title, description, annotations, hidden, arguments
    /// the gateway sets). Default `{}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolConfig>,
    /// Per-prompt settings, by the prompt's name on the upstream: what clients see of it
    /// (name, description, hidden). Default `{}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, PromptConfig>,
    /// Per-upstream error settings (`sanitize`, overriding `errors.sanitize`). Default:
    /// none.
    #[serde(default, skip_serializing_if = "is_default")]
    pub errors: UpstreamErrorsConfig,
}

/// Serialization leaves an upstream's defaulted fields out, and the schema generator then
/// leaves out their defaults too: they are put back here, from [`UpstreamConfig::default`].
fn upstream_schema_defaults(schema: &mut schemars::Schema) {
    let d = UpstreamConfig::default();
    put_schema_defaults(
        schema,
        [
            ("args", serde_json::json!(d.args)),
            ("env", serde_json::json!(d.env)),
            ("inherit_env", serde_json::json!(d.inherit_env)),
            ("share", serde_json::json!(d.share)),
            ("restart", serde_json::json!(d.restart)),
            ("shutdown_grace", humantime::format_duration(d.shutdown_grace).to_string().into()),
            ("max_processes", serde_json::json!(d.max_processes)),
            ("headers", serde_json::json!(d.headers)),
            ("transport", serde_json::json!(d.transport)),
            ("protocol", serde_json::json!(d.protocol)),
            ("endpoints", serde_json::json!(d.endpoints)),
            ("trust_annotations", serde_json::json!(d.trust_annotations)),
            ("tools", serde_json::json!(d.tools)),
            ("prompts", serde_json::json!(d.prompts)),
            ("errors", serde_json::json!(d.errors)),
        ],
    );
}

/// The default of `defaults.inherit_env`, which serialization skips while empty.
fn defaults_schema_defaults(schema: &mut schemars::Schema) {
    put_schema_defaults(schema, [("inherit_env", serde_json::json!(Defaults::default().inherit_env))]);
}

/// Sets the `default` of each named property of an object schema.
pub(super) fn put_schema_defaults<const N: usize>(
    schema: &mut schemars::Schema,
    defaults: [(&str, serde_json::Value); N],
) {
    let Some(properties) = schema.get_mut("properties").and_then(serde_json::Value::as_object_mut) else { return };
    for (name, value) in defaults {
        if let Some(property) = properties.get_mut(name).and_then(serde_json::Value::as_object_mut) {
            property.insert("default".to_owned(), value);
        }
    }
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
            inherit_env: Vec::new(),
            cwd: None,
            share: StdioShare::default(),
            restart: RestartConfig::default(),
            shutdown_grace: default_shutdown_grace(),
            max_processes: default_max_processes(),
            url: None,
            headers: BTreeMap::new(),
            transport: HttpTransport::default(),
            protocol: UpstreamProtocol::default(),
            endpoints: Vec::new(),
            timeouts: None,
            retry: None,
            breaker: None,
            concurrency: None,
            trust_annotations: false,
            tools: BTreeMap::new(),
            prompts: BTreeMap::new(),
            errors: UpstreamErrorsConfig::default(),
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
    /// An HTTP+SSE server (protocol version 2024-11-05).
    Sse {
        /// The URL of its event stream.
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
            (None, Some(url)) if self.transport == HttpTransport::Sse => {
                UpstreamKind::Sse { url, headers: &self.headers }
            }
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

    /// How this upstream's text is sanitised: its own setting, else `errors.sanitize`.
    pub fn sanitize(&self, errors: &ErrorsConfig) -> SanitizeLevel {
        self.errors.sanitize.unwrap_or(errors.sanitize)
    }
}
