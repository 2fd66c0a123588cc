//! Semantic checks that serde cannot express. Each check reports the field path it
//! concerns; `mod.rs` turns paths into line numbers. Checks never stop early: every
//! problem in the file is reported at once.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use http::uri::{Authority, Uri};
use http::{HeaderName, HeaderValue};

use super::locate::{FieldPath, Problem};
use super::{
    BreakerConfig, ConcurrencyConfig, Config, HttpTransport, RestartConfig, RetryConfig, StdioShare, Timeouts,
    UpstreamConfig, UpstreamProtocol,
};

/// Upstream fields that only mean something for a stdio (`command`) upstream.
const STDIO_ONLY: [&str; 8] =
    ["args", "env", "inherit_env", "cwd", "share", "restart", "shutdown_grace", "max_processes"];

/// Headers the gateway sets itself on upstream requests; a static value would break
/// framing or sessions.
const MANAGED_HEADERS: [&str; 7] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
];

/// Most worker threads `workers` may ask for.
const MAX_WORKERS: usize = 1024;

/// Checks `config`. `written` says whether a field appears in the source text, so that
/// e.g. `share: shared` on an HTTP upstream is caught even though it equals the default.
pub(crate) fn validate(config: &Config, written: &dyn Fn(&FieldPath) -> bool) -> Vec<Problem> {
    let mut out = Vec::new();
    let separator_ok = check_separator(&config.name_separator, &mut out);
    check_listeners(config.listen, config.admin_listen, &mut out);
    if let Some(workers) = config.workers
        && !(1..=MAX_WORKERS).contains(&workers)
    {
        out.push(Problem::new(FieldPath::root().key("workers"), format!("must be 1 to {MAX_WORKERS}, not {workers}")));
    }
    check_limits(config, &mut out);
    super::trusted_proxies::check_trusted_proxies(&config.trusted_proxies, &mut out);
    super::session_key::check_session_keys(&config.session, &mut out);
    check_security(config, &mut out);
    super::auth::check_auth(config.auth.as_ref(), &mut out);
    super::operations::check_operations(&config.admin, &config.shutdown, &mut out);
    let defaults = FieldPath::root().key("defaults").key("timeouts");
    check_timeouts(&defaults, &config.defaults.timeouts, &mut out);
    check_resilience_defaults(config, &mut out);
    let separator = separator_ok.then_some(config.name_separator.as_str());
    check_upstreams(&config.upstreams, separator, written, &mut out);
    super::rate_limit::check_rate_limits(&config.rate_limits, &mut out);
    check_breaker_sharing(config, &mut out);
    super::authorization::check_authorization(&config.authorization, &mut out);
    super::trace::check_tracing(&config.tracing, &mut out);
    if config.cache.enabled {
        let at = FieldPath::root().key("cache");
        if config.cache.max_entries == 0 {
            out.push(Problem::new(at.key("max_entries"), "must be at least 1"));
        }
        if config.cache.max_entry_bytes == 0 {
            out.push(Problem::new(at.key("max_entry_bytes"), "must be at least 1"));
        }
    }
    out
}

fn check_limits(config: &Config, out: &mut Vec<Problem>) {
    let session = FieldPath::root().key("session");
    positive(&session.key("idle_timeout"), config.session.idle_timeout, out);
    positive(&session.key("id_lifetime"), config.session.id_lifetime, out);
    nonzero(&session.key("max_sessions"), config.session.max_sessions, out);
    let replay = session.key("replay_buffer");
    nonzero(&replay.key("messages"), config.session.replay_buffer.messages, out);
    nonzero(&replay.key("bytes"), config.session.replay_buffer.bytes, out);
    let at = FieldPath::root().key("limits");
    let limits = &config.limits;
    for (field, value) in [
        ("max_body_bytes", limits.max_body_bytes),
        ("max_message_bytes", limits.max_message_bytes),
        ("max_in_flight_per_session", limits.max_in_flight_per_session),
        ("max_connections", limits.max_connections),
    ] {
        nonzero(&at.key(field), value, out);
    }
    for (field, value) in [
        ("header_timeout", limits.header_timeout),
        ("body_timeout", limits.body_timeout),
        ("idle_timeout", limits.idle_timeout),
    ] {
        positive(&at.key(field), value, out);
    }
}

fn check_security(config: &Config, out: &mut Vec<Problem>) {
    let at = FieldPath::root().key("security");
    for (i, origin) in config.security.allowed_origins.iter().enumerate() {
        if let Err(why) = check_origin(origin) {
            out.push(Problem::new(at.key("allowed_origins").index(i), why));
        }
    }
    for (i, host) in config.security.allowed_hosts.iter().enumerate() {
        if let Err(why) = check_host(host) {
            out.push(Problem::new(at.key("allowed_hosts").index(i), why));
        }
    }
    let cors = &config.security.cors;
    let at = at.key("cors");
    for (i, origin) in cors.allowed_origins.iter().enumerate() {
        if let Err(why) = check_origin(origin) {
            out.push(Problem::new(at.key("allowed_origins").index(i), why));
        }
    }
    if cors.allow_credentials && cors.allowed_origins.iter().any(|o| o == "*") {
        let why = "cannot be true while allowed_origins contains \"*\": every site could send credentialed requests";
        out.push(Problem::new(at.key("allow_credentials"), why));
    }
    if cors.max_age > MAX_CORS_MAX_AGE {
        out.push(Problem::new(at.key("max_age"), "must be at most 24h (browsers cap it at 2h or less)"));
    }
}

/// Longest `security.cors.max_age` accepted: the longest any browser honours.
const MAX_CORS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// `separator` is `None` when it is itself invalid (already reported).
fn check_upstreams(
    upstreams: &[UpstreamConfig],
    separator: Option<&str>,
    written: &dyn Fn(&FieldPath) -> bool,
    out: &mut Vec<Problem>,
) {
    let list = FieldPath::root().key("upstreams");
    if upstreams.is_empty() {
        out.push(Problem::new(list.clone(), "at least one upstream is required"));
    }
    let mut first_use: HashMap<&str, usize> = HashMap::new();
    for (i, upstream) in upstreams.iter().enumerate() {
        let at = list.index(i);
        let name = &upstream.name;
        let why = if let Err(why) = check_name(name) {
            Some(why)
        } else if let Some(first) = first_use.get(name.as_str()) {
            Some(format!("duplicate upstream name {name:?} (also upstreams[{first}])"))
        } else {
            separator
                .filter(|sep| name.contains(sep))
                .map(|sep| format!("name {name:?} contains the name separator {sep:?}"))
        };
        if let Some(why) = why {
            out.push(Problem::new(at.key("name"), why));
        }
        first_use.entry(name).or_insert(i);
        check_upstream(&at, upstream, written, out);
    }
}

fn check_separator(separator: &str, out: &mut Vec<Problem>) -> bool {
    let why = if separator.is_empty() {
        "must not be empty"
    } else if !separator.bytes().all(|b| b.is_ascii_graphic()) {
        "must be printable ASCII without spaces"
    } else if separator.contains('/') {
        "must not contain `/`"
    } else {
        return true;
    };
    out.push(Problem::new(FieldPath::root().key("name_separator"), why));
    false
}

fn check_listeners(listen: SocketAddr, admin: Option<SocketAddr>, out: &mut Vec<Problem>) {
    let Some(admin) = admin else { return };
    let overlap = listen.port() == admin.port()
        && listen.port() != 0
        && (listen.ip() == admin.ip() || listen.ip().is_unspecified() || admin.ip().is_unspecified());
    if overlap {
        let why = format!("conflicts with `listen` ({listen}); use another port or `null`");
        out.push(Problem::new(FieldPath::root().key("admin_listen"), why));
    }
}

fn check_upstream(
    at: &FieldPath,
    upstream: &UpstreamConfig,
    written: &dyn Fn(&FieldPath) -> bool,
    out: &mut Vec<Problem>,
) {
    match (&upstream.command, &upstream.url) {
        (None, None) => {
            out.push(Problem::new(at.clone(), "needs `command` (a stdio upstream) or `url` (an HTTP upstream)"))
        }
        (Some(_), Some(_)) => out.push(Problem::new(
            at.key("url"),
            "cannot be combined with `command`: an upstream is either stdio or HTTP",
        )),
        (Some(command), None) => {
            check_stdio(at, upstream, command, out);
            for field in ["headers", "endpoints", "protocol", "transport"] {
                let set = match field {
                    "headers" => !upstream.headers.is_empty(),
                    "endpoints" => !upstream.endpoints.is_empty(),
                    "protocol" => upstream.protocol != UpstreamProtocol::default(),
                    _ => upstream.transport != HttpTransport::default(),
                };
                if written(&at.key(field)) || set {
                    let why = "applies only to HTTP upstreams (`url`), and this one has `command`";
                    out.push(Problem::new(at.key(field), why));
                }
            }
        }
        (None, Some(url)) => {
            check_http(at, upstream, url, out);
            if upstream.transport == HttpTransport::Sse && !upstream.endpoints.is_empty() {
                let why = "replicas are balanced over Streamable HTTP only, and this upstream has `transport: sse`";
                out.push(Problem::new(at.key("endpoints"), why));
            }
            if upstream.transport == HttpTransport::Sse && upstream.protocol == UpstreamProtocol::Modern {
                let why = "HTTP+SSE is the transport of protocol version 2024-11-05: `transport: sse` speaks the \
                           session era (`legacy`) only";
                out.push(Problem::new(at.key("protocol"), why));
            }
            for field in STDIO_ONLY {
                if written(&at.key(field)) || !stdio_field_is_default(upstream, field) {
                    let why = "applies only to stdio upstreams (`command`), and this one has `url`";
                    out.push(Problem::new(at.key(field), why));
                }
            }
        }
    }
    if let Some(overrides) = &upstream.timeouts {
        let t = at.key("timeouts");
        for (field, value) in [
            ("connect", overrides.connect),
            ("request", overrides.request),
            ("tool_call", overrides.tool_call),
            ("tool_idle", overrides.tool_idle),
            ("tool_max", overrides.tool_max),
            ("attempt", overrides.attempt),
        ] {
            if let Some(value) = value {
                positive(&t.key(field), value, out);
            }
        }
    }
    if upstream.retry.is_some() {
        check_retry(&at.key("retry"), &upstream.retry(&RetryConfig::default()), out);
    }
    if upstream.breaker.is_some() {
        check_breaker(&at.key("breaker"), &upstream.breaker(&BreakerConfig::default()), out);
    }
    if upstream.concurrency.is_some() {
        check_concurrency(&at.key("concurrency"), &upstream.concurrency(&ConcurrencyConfig::default()), out);
    }
    for (name, tool) in &upstream.tools {
        if let Some(timeout) = tool.timeout {
            positive(&at.key("tools").key(name).key("timeout"), timeout, out);
        }
    }
    super::tools::check_tools(at, &upstream.tools, out);
    super::prompts::check_prompts(at, &upstream.prompts, out);
}

/// Checks the resilience sections under `defaults`.
pub(crate) fn check_resilience_defaults(config: &Config, out: &mut Vec<Problem>) {
    let d = FieldPath::root().key("defaults");
    check_retry(&d.key("retry"), &config.defaults.retry, out);
    check_breaker(&d.key("breaker"), &config.defaults.breaker, out);
    check_concurrency(&d.key("concurrency"), &config.defaults.concurrency, out);
    check_inherit_env(&d.key("inherit_env"), &config.defaults.inherit_env, out);
    nonzero(&FieldPath::root().key("limits").key("max_in_flight"), config.limits.max_in_flight, out);
}

fn check_retry(at: &FieldPath, r: &RetryConfig, out: &mut Vec<Problem>) {
    if r.max_attempts == 0 {
        out.push(Problem::new(at.key("max_attempts"), "must be at least 1 (1 disables retries)"));
    }
    positive(&at.key("base_delay"), r.base_delay, out);
    positive(&at.key("max_delay"), r.max_delay, out);
    if r.base_delay > r.max_delay {
        out.push(Problem::new(at.key("base_delay"), "is longer than max_delay"));
    }
    if !(0.0..=1000.0).contains(&r.budget_percent) {
        out.push(Problem::new(at.key("budget_percent"), "must be between 0 and 1000"));
    }
    if r.budget_min_per_sec > 1_000_000 {
        out.push(Problem::new(at.key("budget_min_per_sec"), "must be at most 1000000"));
    }
}

fn check_breaker(at: &FieldPath, b: &BreakerConfig, out: &mut Vec<Problem>) {
    positive(&at.key("window"), b.window, out);
    positive(&at.key("break"), b.break_duration, out);
    positive(&at.key("max_break"), b.max_break, out);
    positive(&at.key("probe_timeout"), b.probe_timeout, out);
    positive(&at.key("slow_call"), b.slow_call, out);
    if b.break_duration > b.max_break {
        out.push(Problem::new(at.key("break"), "is longer than max_break"));
    }
    for (field, rate) in [("failure_rate", b.failure_rate), ("slow_call_rate", b.slow_call_rate)] {
        if !(rate > 0.0 && rate <= 1.0) {
            out.push(Problem::new(at.key(field), "must be a fraction in (0, 1]"));
        }
    }
    if b.min_calls == 0 {
        out.push(Problem::new(at.key("min_calls"), "must be at least 1"));
    }
    if b.half_open_probes == 0 {
        out.push(Problem::new(at.key("half_open_probes"), "must be at least 1"));
    }
}

fn check_concurrency(at: &FieldPath, c: &ConcurrencyConfig, out: &mut Vec<Problem>) {
    nonzero(&at.key("max_in_flight"), c.max_in_flight, out);
    positive(&at.key("queue_timeout"), c.queue_timeout, out);
}

fn stdio_field_is_default(upstream: &UpstreamConfig, field: &str) -> bool {
    let defaults = UpstreamConfig::default();
    match field {
        "args" => upstream.args.is_empty(),
        "env" => upstream.env.is_empty(),
        "inherit_env" => upstream.inherit_env.is_empty(),
        "cwd" => upstream.cwd.is_none(),
        "share" => upstream.share == StdioShare::default(),
        "restart" => upstream.restart == RestartConfig::default(),
        "max_processes" => upstream.max_processes == defaults.max_processes,
        _ => upstream.shutdown_grace == defaults.shutdown_grace,
    }
}

/// Names of variables (or `*`) an `inherit_env` list passes on.
fn check_inherit_env(at: &FieldPath, names: &[String], out: &mut Vec<Problem>) {
    for (i, name) in names.iter().enumerate() {
        if name != "*" && (name.is_empty() || name.contains(['=', '\0'])) {
            out.push(Problem::new(
                at.index(i),
                "must be the name of an environment variable (no `=` or NUL), or `*` for all",
            ));
        }
    }
}

fn check_stdio(at: &FieldPath, upstream: &UpstreamConfig, command: &str, out: &mut Vec<Problem>) {
    if command.is_empty() || command.contains('\0') {
        out.push(Problem::new(at.key("command"), "must be a non-empty program name or path"));
    }
    check_inherit_env(&at.key("inherit_env"), &upstream.inherit_env, out);
    for (i, arg) in upstream.args.iter().enumerate() {
        if arg.contains('\0') {
            out.push(Problem::new(at.key("args").index(i), "must not contain a NUL byte"));
        }
    }
    for (key, value) in &upstream.env {
        if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
            let why = "variable names must be non-empty without `=` or NUL, values without NUL";
            out.push(Problem::new(at.key("env").key(key), why));
        }
    }
    if upstream.cwd.as_ref().is_some_and(|cwd| cwd.as_os_str().is_empty()) {
        out.push(Problem::new(at.key("cwd"), "must not be empty"));
    }
    let restart = at.key("restart");
    positive(&restart.key("base_delay"), upstream.restart.base_delay, out);
    positive(&restart.key("max_delay"), upstream.restart.max_delay, out);
    if upstream.restart.base_delay > upstream.restart.max_delay {
        let why = format!(
            "{} is longer than max_delay ({})",
            humantime_serde::re::humantime::format_duration(upstream.restart.base_delay),
            humantime_serde::re::humantime::format_duration(upstream.restart.max_delay)
        );
        out.push(Problem::new(restart.key("base_delay"), why));
    }
    nonzero(&at.key("max_processes"), upstream.max_processes, out);
    positive(&at.key("shutdown_grace"), upstream.shutdown_grace, out);
}

fn is_http_url(url: &str) -> bool {
    url.parse::<Uri>().is_ok_and(|uri| {
        matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some_and(|host| !host.is_empty())
    })
}

fn check_http(at: &FieldPath, upstream: &UpstreamConfig, url: &str, out: &mut Vec<Problem>) {
    if !is_http_url(url) {
        out.push(Problem::new(at.key("url"), format!("not an http(s) URL: {url:?}")));
    }
    for (i, endpoint) in upstream.endpoints.iter().enumerate() {
        if !is_http_url(endpoint) {
            out.push(Problem::new(at.key("endpoints").index(i), format!("not an http(s) URL: {endpoint:?}")));
        }
    }
    for (name, value) in &upstream.headers {
        let path = at.key("headers").key(name);
        match HeaderName::from_bytes(name.as_bytes()) {
            Err(_) => out.push(Problem::new(path, format!("invalid HTTP header name {name:?}"))),
            Ok(header) if MANAGED_HEADERS.contains(&header.as_str()) => {
                out.push(Problem::new(path, "is set by the gateway and cannot be configured"));
            }
            // The value may hold a secret: never echo it.
            Ok(_) if HeaderValue::from_str(value).is_err() => out.push(Problem::new(
                path,
                "invalid HTTP header value (control characters or non-ASCII after ${VAR} expansion)",
            )),
            Ok(_) => {}
        }
    }
}

fn check_timeouts(at: &FieldPath, timeouts: &Timeouts, out: &mut Vec<Problem>) {
    positive(&at.key("connect"), timeouts.connect, out);
    positive(&at.key("request"), timeouts.request, out);
    positive(&at.key("tool_call"), timeouts.tool_call, out);
    positive(&at.key("tool_idle"), timeouts.tool_idle, out);
    positive(&at.key("tool_max"), timeouts.tool_max, out);
    if let Some(attempt) = timeouts.attempt {
        positive(&at.key("attempt"), attempt, out);
    }
    if timeouts.tool_max < timeouts.tool_call {
        out.push(Problem::new(at.key("tool_max"), "is shorter than tool_call"));
    }
}

/// `[A-Za-z0-9_-]{1,64}`.
fn check_name(name: &str) -> Result<(), String> {
    let valid =
        (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid { Ok(()) } else { Err(format!("invalid name {name:?}: use 1 to 64 of A-Z a-z 0-9 _ -")) }
}

/// `*` or a full origin `scheme://host[:port]` with no path (browsers send no path,
/// so an entry with one would never match).
fn check_origin(origin: &str) -> Result<(), String> {
    if origin == "*" {
        return Ok(());
    }
    let valid = origin.split_once("://").is_some_and(|(scheme, authority)| {
        scheme.parse::<http::uri::Scheme>().is_ok() && check_host(authority).is_ok()
    });
    if valid { Ok(()) } else { Err(format!("not an origin: {origin:?} (want `*` or scheme://host[:port], no path)")) }
}

/// A host name or IP, optionally with `:port`.
fn check_host(host: &str) -> Result<(), String> {
    let valid = !host.contains(['@', '/', '?', '#']) && host.parse::<Authority>().is_ok_and(|a| !a.host().is_empty());
    if valid { Ok(()) } else { Err(format!("not a host name: {host:?} (want host or host:port)")) }
}

fn positive(path: &FieldPath, value: Duration, out: &mut Vec<Problem>) {
    if value.is_zero() {
        out.push(Problem::new(path.clone(), "must be longer than 0"));
    }
}

fn nonzero(path: &FieldPath, value: usize, out: &mut Vec<Problem>) {
    if value == 0 {
        out.push(Problem::new(path.clone(), "must be at least 1"));
    }
}

/// Checks the Redis URL and the prefix, and that every `shared: true` has a Redis to
/// share through.
fn check_breaker_sharing(config: &Config, out: &mut Vec<Problem>) {
    let at = FieldPath::root().key("breaker_sharing");
    let sharing = &config.breaker_sharing;
    if let Some(Err(why)) = sharing.redis.as_deref().map(super::breaker_sharing::redis_url) {
        out.push(Problem::new(at.key("redis"), why));
    }
    let prefix = &sharing.prefix;
    if prefix.is_empty()
        || prefix.len() > super::breaker_sharing::MAX_PREFIX
        || !prefix.bytes().all(|b| b.is_ascii_graphic())
    {
        let why =
            format!("must be 1 to {} bytes of printable ASCII without spaces", super::breaker_sharing::MAX_PREFIX);
        out.push(Problem::new(at.key("prefix"), why));
    }
    // An invalid URL is reported above; a missing one is reported where sharing is asked.
    if sharing.redis.is_some() || config.breaker_sharing_redis().is_some() {
        return;
    }
    let why = "needs a Redis to share through: set breaker_sharing.redis, or a redis:// rate_limits.backend";
    if config.defaults.breaker.shared {
        out.push(Problem::new(FieldPath::root().key("defaults").key("breaker").key("shared"), why));
    }
    for (i, up) in config.upstreams.iter().enumerate() {
        if up.breaker.is_some_and(|b| b.shared == Some(true)) {
            let path = FieldPath::root().key("upstreams").index(i).key("breaker").key("shared");
            out.push(Problem::new(path, why));
        }
    }
}

#[cfg(test)]
mod tests {
    //! One test per validation rule, asserting the exact line and field reported.

    use std::time::Duration;

    use crate::config::test_support::{assert_issue, assert_one, issues, ok, with_upstream};
    use crate::config::{Config, CorsConfig};

    #[test]
    fn at_least_one_upstream() {
        assert_one(&["listen: 127.0.0.1:1"], 1, "upstreams", "at least one upstream");
        assert_one(&["listen: 127.0.0.1:1", "upstreams: []"], 2, "upstreams", "at least one");
    }

    #[test]
    fn upstream_names_are_valid_unique_and_separator_free() {
        let found = issues(&[
            "upstreams:",
            "  - name: 'has space'",
            "    command: x",
            "  - name: ''",
            "    command: x",
            "  - name: dup",
            "    command: x",
            "  - name: dup",
            "    command: x",
            "  - name: a__b",
            "    command: x",
            &format!("  - name: {}", "n".repeat(65)),
            "    command: x",
        ]);
        assert_eq!(found.len(), 5, "{found:#?}");
        assert_issue(&found[0], 2, "upstreams[0].name", "invalid name \"has space\"");
        assert_issue(&found[1], 4, "upstreams[1].name", "invalid name \"\"");
        assert_issue(&found[2], 8, "upstreams[3].name", "duplicate upstream name \"dup\" (also upstreams[2])");
        assert_issue(&found[3], 10, "upstreams[4].name", "contains the name separator \"__\"");
        assert_issue(&found[4], 12, "upstreams[5].name", "invalid name");
        ok(&["upstreams:", "  - name: Aa0_-", "    command: x"]);
    }

    #[test]
    fn separator_applies_to_names() {
        ok(&["name_separator: '.'", "upstreams:", "  - name: a__b", "    command: x"]);
        assert_one(
            &["name_separator: '-'", "upstreams:", "  - name: a-b", "    command: x"],
            3,
            "upstreams[0].name",
            "contains the name separator \"-\"",
        );
    }

    #[test]
    fn separator_is_nonempty_printable_without_slash() {
        for (value, message) in [
            ("''", "must not be empty"),
            ("'a b'", "printable ASCII"),
            ("\"\\t\"", "printable ASCII"),
            ("'é'", "printable ASCII"),
            ("'/'", "must not contain `/`"),
        ] {
            let line = format!("name_separator: {value}");
            assert_one(&with_upstream(&["# x", &line]), 2, "name_separator", message);
        }
    }

    #[test]
    fn exactly_one_of_command_or_url() {
        assert_one(
            &["upstreams:", "  - name: a", "    args: [x]"],
            2,
            "upstreams[0]",
            "needs `command` (a stdio upstream) or `url` (an HTTP upstream)",
        );
        assert_one(
            &["upstreams:", "  - name: a", "    command: x", "    url: http://h/"],
            4,
            "upstreams[0].url",
            "cannot be combined with `command`",
        );
        assert_one(&["upstreams:", "  - name: a", "    command: ''"], 3, "upstreams[0].command", "non-empty");
    }

    #[test]
    fn stdio_fields_are_rejected_on_http_upstreams() {
        let found = issues(&[
            "upstreams:",
            "  - name: h",
            "    url: http://h/mcp",
            "    args: []",
            "    env: {A: b}",
            "    cwd: /tmp",
            "    share: shared",
            "    restart: {base_delay: 1s}",
            "    shutdown_grace: 2s",
        ]);
        let fields = ["args", "env", "cwd", "share", "restart", "shutdown_grace"];
        assert_eq!(found.len(), fields.len(), "{found:#?}");
        for (i, (issue, field)) in found.iter().zip(fields).enumerate() {
            let path = format!("upstreams[0].{field}");
            assert_issue(issue, i + 4, &path, "applies only to stdio upstreams (`command`)");
        }
    }

    #[test]
    fn headers_are_rejected_on_stdio_upstreams() {
        assert_one(
            &["upstreams:", "  - name: s", "    command: x", "    headers: {}"],
            4,
            "upstreams[0].headers",
            "applies only to HTTP upstreams (`url`), and this one has `command`",
        );
    }

    #[test]
    fn the_sse_transport_is_for_single_http_upstreams() {
        let config = ok(&["upstreams:", "  - name: old", "    url: http://127.0.0.1:1/sse", "    transport: sse"]);
        assert!(matches!(
            config.upstreams[0].kind(),
            crate::config::UpstreamKind::Sse { url: "http://127.0.0.1:1/sse", .. }
        ));
        ok(&["upstreams:", "  - name: new", "    url: http://127.0.0.1:1/mcp", "    transport: streamable_http"]);
        assert_one(
            &["upstreams:", "  - name: s", "    command: x", "    transport: sse"],
            4,
            "upstreams[0].transport",
            "applies only to HTTP upstreams (`url`), and this one has `command`",
        );
        assert_one(
            &[
                "upstreams:",
                "  - name: old",
                "    url: http://h/sse",
                "    transport: sse",
                "    endpoints: [http://g/sse]",
            ],
            5,
            "upstreams[0].endpoints",
            "replicas are balanced over Streamable HTTP only",
        );
        assert_one(
            &["upstreams:", "  - name: old", "    url: http://h/sse", "    transport: sse", "    protocol: modern"],
            5,
            "upstreams[0].protocol",
            "speaks the session era (`legacy`) only",
        );
        ok(&["upstreams:", "  - name: old", "    url: http://h/sse", "    transport: sse", "    protocol: legacy"]);
        let found = issues(&["upstreams:", "  - name: old", "    url: http://h/sse", "    transport: websocket"]);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_issue(&found[0], 4, "upstreams[0].transport", "unknown variant `websocket`");
    }

    #[test]
    fn url_must_be_http_or_https_with_a_host() {
        for (url, ok_url) in [
            ("http://127.0.0.1:18080/mcp", true),
            ("https://mcp.example.com", true),
            ("ftp://x", false),
            ("http:///mcp", false),
            ("/mcp", false),
            ("not a url", false),
        ] {
            let lines = ["upstreams:", "  - name: a", "    command: x", "  - name: b", &format!("    url: '{url}'")];
            if ok_url {
                ok(&lines);
            } else {
                let message = format!("not an http(s) URL: {url:?}");
                assert_one(&lines, 5, "upstreams[1].url", &message);
            }
        }
    }

    #[test]
    fn header_names_and_values_must_be_valid_http() {
        let found = issues(&[
            "upstreams:",
            "  - name: h",
            "    url: http://h/mcp",
            "    headers:",
            "      X-Fine: ok",
            "      'Bad Name': v",
            "      X-Newline: \"a\\nb\"",
            "      Content-Type: text/plain",
            "      Mcp-Session-Id: abc",
        ]);
        assert_eq!(found.len(), 4, "{found:#?}");
        assert_issue(&found[0], 6, "upstreams[0].headers.Bad Name", "invalid HTTP header name");
        assert_issue(&found[1], 7, "upstreams[0].headers.X-Newline", "invalid HTTP header value");
        assert_issue(&found[2], 8, "upstreams[0].headers.Content-Type", "set by the gateway");
        assert_issue(&found[3], 9, "upstreams[0].headers.Mcp-Session-Id", "set by the gateway");
        assert!(!found[1].message.contains("a\nb"), "header values are never echoed");
    }

    #[test]
    fn env_names_and_args_must_be_usable() {
        let found = issues(&[
            "upstreams:",
            "  - name: s",
            "    command: x",
            "    args: [ok, \"nul\\0\"]",
            "    env:",
            "      'A=B': x",
            "    cwd: ''",
        ]);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_issue(&found[0], 4, "upstreams[0].args[1]", "NUL");
        assert_issue(&found[1], 6, "upstreams[0].env.A=B", "without `=`");
        assert_issue(&found[2], 7, "upstreams[0].cwd", "must not be empty");
    }

    #[test]
    fn durations_must_be_positive() {
        let found = issues(&[
            "session:",
            "  idle_timeout: 0s",
            "defaults:",
            "  timeouts:",
            "    connect: 0s",
            "    request: 0ms",
            "    tool_call: 0s",
            "upstreams:",
            "  - name: s",
            "    command: x",
            "    restart:",
            "      base_delay: 0s",
            "    shutdown_grace: 0s",
            "    timeouts:",
            "      request: 0s",
        ]);
        let expected = [
            (2, "session.idle_timeout"),
            (5, "defaults.timeouts.connect"),
            (6, "defaults.timeouts.request"),
            (7, "defaults.timeouts.tool_call"),
            (12, "upstreams[0].restart.base_delay"),
            (13, "upstreams[0].shutdown_grace"),
            (15, "upstreams[0].timeouts.request"),
        ];
        assert_eq!(found.len(), expected.len(), "{found:#?}");
        for (issue, (line, field)) in found.iter().zip(expected) {
            assert_issue(issue, line, field, "must be longer than 0");
        }
    }

    #[test]
    fn restart_base_delay_at_most_max_delay() {
        assert_one(
            &[
                "upstreams:",
                "  - name: s",
                "    command: x",
                "    restart:",
                "      max_delay: 1s",
                "      base_delay: 2s",
            ],
            6,
            "upstreams[0].restart.base_delay",
            "2s is longer than max_delay (1s)",
        );
        // Only base_delay written: the default max_delay (30s) still bounds it.
        assert_one(
            &["upstreams:", "  - name: s", "    command: x", "    restart:", "      base_delay: 1m"],
            5,
            "upstreams[0].restart.base_delay",
            "1m is longer than max_delay (30s)",
        );
        ok(&["upstreams:", "  - name: s", "    command: x", "    restart: {base_delay: 1s, max_delay: 1s}"]);
    }

    #[test]
    fn limits_must_be_positive() {
        let found = issues(&with_upstream(&[
            "session:",
            "  max_sessions: 0",
            "limits:",
            "  max_body_bytes: 0",
            "  max_message_bytes: 0",
            "  max_in_flight_per_session: 0",
        ]));
        let expected = [
            (2, "session.max_sessions"),
            (4, "limits.max_body_bytes"),
            (5, "limits.max_message_bytes"),
            (6, "limits.max_in_flight_per_session"),
        ];
        assert_eq!(found.len(), expected.len(), "{found:#?}");
        for (issue, (line, field)) in found.iter().zip(expected) {
            assert_issue(issue, line, field, "must be at least 1");
        }
    }

    #[test]
    fn admin_listener_must_not_collide_with_listen() {
        assert_one(
            &with_upstream(&["listen: 0.0.0.0:8080", "admin_listen: 127.0.0.1:8080"]),
            2,
            "admin_listen",
            "conflicts with `listen` (0.0.0.0:8080)",
        );
        ok(&with_upstream(&["listen: 0.0.0.0:8080", "admin_listen: 127.0.0.1:9090"]));
        ok(&with_upstream(&["listen: 127.0.0.1:8080", "admin_listen: 127.0.0.2:8080"]));
        ok(&with_upstream(&["listen: 127.0.0.1:0", "admin_listen: 127.0.0.1:0"]));
        ok(&with_upstream(&["listen: '[::1]:8080'", "admin_listen: ~"]));
    }

    #[test]
    fn allowed_origins_are_full_origins_or_star() {
        ok(&with_upstream(&[
            "security:",
            "  allowed_origins: ['*', 'https://app.example.com', 'http://localhost:3000', 'vscode-webview://abc']",
        ]));
        let found = issues(&with_upstream(&[
            "security:",
            "  allowed_origins:",
            "    - app.example.com",
            "    - https://app.example.com/",
            "    - https://app.example.com/path",
        ]));
        assert_eq!(found.len(), 3, "{found:#?}");
        for (i, issue) in found.iter().enumerate() {
            let field = format!("security.allowed_origins[{i}]");
            assert_issue(issue, i + 3, &field, "not an origin");
        }
    }

    #[test]
    fn allowed_hosts_are_host_names_with_optional_port() {
        ok(&with_upstream(&["security:", "  allowed_hosts: [example.com, 'gw.internal:8080', '[::1]:80', 10.0.0.1]"]));
        let found = issues(&with_upstream(&[
            "security:",
            "  allowed_hosts:",
            "    - 'user@host'",
            "    - 'http://host'",
            "    - ''",
        ]));
        assert_eq!(found.len(), 3, "{found:#?}");
        for (i, issue) in found.iter().enumerate() {
            let field = format!("security.allowed_hosts[{i}]");
            assert_issue(issue, i + 3, &field, "not a host name");
        }
    }

    #[test]
    fn shared_breakers_need_a_redis_and_take_the_rate_limits_one() {
        let found = issues(&[
            "defaults:",
            "  breaker: { shared: true }",
            "upstreams:",
            "  - name: a",
            "    command: x",
            "  - name: b",
            "    command: x",
            "    breaker:",
            "      shared: true",
        ]);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_issue(&found[0], 2, "defaults.breaker.shared", "needs a Redis to share through");
        assert_issue(&found[1], 9, "upstreams[1].breaker.shared", "set breaker_sharing.redis");
        let config = ok(&with_upstream(&[
            "defaults:",
            "  breaker: { shared: true }",
            "rate_limits:",
            "  backend: redis://10.0.0.7:6379/2",
        ]));
        assert_eq!(config.breaker_sharing_redis().as_deref(), Some("redis://10.0.0.7:6379/2"));
        assert!(config.shares_breakers());
        let config = ok(&with_upstream(&[
            "breaker_sharing:",
            "  redis: redis://breakers:6379",
            "  prefix: 'fleet-a:breakers:'",
            "rate_limits:",
            "  backend: redis://limits:6379",
        ]));
        assert_eq!(config.breaker_sharing_redis().as_deref(), Some("redis://breakers:6379"));
        assert_eq!(config.breaker_sharing.prefix, "fleet-a:breakers:");
        assert!(!config.shares_breakers(), "nothing is shared unless a breaker says so");
    }

    #[test]
    fn breaker_sharing_takes_a_redis_url_and_a_plain_prefix() {
        let found = issues(&with_upstream(&["breaker_sharing:", "  redis: http://cache:6379", "  prefix: 'a b'"]));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_issue(&found[0], 2, "breaker_sharing.redis", "expected a redis://host:port[/db] URL");
        assert_issue(&found[1], 3, "breaker_sharing.prefix", "printable ASCII without spaces");
        assert_one(
            &with_upstream(&["breaker_sharing:", "  prefix: ''"]),
            2,
            "breaker_sharing.prefix",
            "must be 1 to 128",
        );
        assert_one(
            &with_upstream(&["breaker_sharing:", "  channel: x"]),
            2,
            "breaker_sharing",
            "unknown field `channel`",
        );
    }

    // --- the guards: CORS, and the per-principal session and in-flight caps ------------

    #[test]
    fn guards_are_off_by_default() {
        let c = Config::default();
        assert_eq!(c.security.cors, CorsConfig::default());
        assert!(c.security.cors.allowed_origins.is_empty());
        assert_eq!(c.security.cors.max_age, Duration::from_secs(600));
        assert!(!c.security.cors.allow_credentials);
        assert_eq!(c.session.max_sessions_per_principal, 0);
        assert_eq!(c.limits.max_in_flight_per_principal, 0);
    }

    #[test]
    fn guards_parse() {
        let c = ok(&with_upstream(&[
            "security:",
            "  cors: { allowed_origins: ['https://app.example.com', 'http://localhost:5173'], max_age: 1h, allow_credentials: true }",
            "session: { max_sessions_per_principal: 64 }",
            "limits: { max_in_flight_per_principal: 32 }",
        ]));
        let cors = &c.security.cors;
        assert_eq!(cors.allowed_origins, ["https://app.example.com", "http://localhost:5173"]);
        assert_eq!(cors.max_age, Duration::from_secs(3600));
        assert!(cors.allow_credentials);
        assert_eq!(c.session.max_sessions_per_principal, 64);
        assert_eq!(c.limits.max_in_flight_per_principal, 32);
        ok(&with_upstream(&["security:", "  cors: { allowed_origins: ['*'], max_age: 0s }"]));
    }

    #[test]
    fn bad_cors_values_are_reported_at_their_line() {
        let found = issues(&with_upstream(&[
            "security:",
            "  cors:",
            "    allowed_origins:",
            "      - '*'",
            "      - app.example.com",
            "      - https://app.example.com/path",
            "    max_age: 2d",
            "    allow_credentials: true",
        ]));
        assert_eq!(found.len(), 4, "{found:#?}");
        assert_issue(&found[0], 5, "security.cors.allowed_origins[1]", "not an origin");
        assert_issue(&found[1], 6, "security.cors.allowed_origins[2]", "not an origin");
        assert_issue(&found[2], 7, "security.cors.max_age", "at most 24h");
        assert_issue(&found[3], 8, "security.cors.allow_credentials", "contains \"*\"");
        assert_one(
            &with_upstream(&["security:", "  cors: { allowed_origin: ['*'] }"]),
            2,
            "security.cors",
            "unknown field `allowed_origin`",
        );
        assert_one(
            &with_upstream(&["security:", "  cors:", "    max_age: soon"]),
            3,
            "security.cors.max_age",
            "invalid",
        );
    }

    #[test]
    fn per_principal_caps_are_counts() {
        assert_one(
            &with_upstream(&["session:", "  max_sessions_per_principal: -1"]),
            2,
            "session.max_sessions_per_principal",
            "expected usize",
        );
        assert_one(
            &with_upstream(&["limits:", "  max_in_flight_per_principal: many"]),
            2,
            "limits.max_in_flight_per_principal",
            "invalid type",
        );
    }
}
