//! One test per validation rule, asserting the exact line and field reported.

use super::{assert_issue, assert_one, issues, ok, with_upstream};

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
        super::super::UpstreamKind::Sse { url: "http://127.0.0.1:1/sse", .. }
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
        &["upstreams:", "  - name: s", "    command: x", "    restart:", "      max_delay: 1s", "      base_delay: 2s"],
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
fn rate_limits_parse_and_default_the_burst_to_the_rate() {
    let config = ok(&with_upstream(&[
        "rate_limits:",
        "  backend: memory",
        "  limits:",
        "    - { per: principal, tools: ['*'], rate: 20/s, burst: 40 }",
        "    - { per: global, rate: 100/m }",
    ]));
    let limits = &config.rate_limits.limits;
    assert_eq!(limits.len(), 2);
    let (rate, burst) = limits[0].quota().unwrap();
    assert_eq!((rate.count, rate.period, burst), (20, std::time::Duration::from_secs(1), 40));
    assert_eq!(limits[1].quota().unwrap().1, 100, "burst defaults to the rate's count");
    assert_eq!(limits[1].tools, None);
}

#[test]
fn bad_rate_limits_are_reported_at_their_line() {
    for (rate, message) in [
        ("20", "invalid rate \"20\": expected <count>/<unit>"),
        ("20/d", "invalid rate \"20/d\""),
        ("x/s", "invalid rate \"x/s\""),
        ("-1/s", "invalid rate \"-1/s\""),
        ("0/s", "the count must be at least 1"),
    ] {
        let line = format!("    - {{ per: tool, rate: '{rate}' }}");
        assert_one(&with_upstream(&["rate_limits:", "  limits:", &line]), 3, "rate_limits.limits[0].rate", message);
    }
    let found = issues(&with_upstream(&[
        "rate_limits:",
        "  limits:",
        "    - per: global",
        "      rate: 1/s",
        "      burst: 0",
        "    - per: tool",
        "      rate: 1/s",
        "      tools: []",
        "    - per: tool",
        "      rate: 1/s",
        "      tools: ['']",
    ]));
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_issue(&found[0], 5, "rate_limits.limits[0].burst", "must be at least 1");
    assert_issue(&found[1], 8, "rate_limits.limits[1].tools", "at least one pattern");
    assert_issue(&found[2], 11, "rate_limits.limits[2].tools[0]", "must not be empty");
}

#[test]
fn rate_limit_keys_and_backends_are_closed_sets() {
    let found = issues(&with_upstream(&["rate_limits:", "  limits:", "    - { per: session, rate: 1/s }"]));
    assert_issue(&found[0], 3, "rate_limits.limits[0].per", "unknown variant `session`");
    assert_one(&with_upstream(&["rate_limits:", "  backend: disk"]), 2, "rate_limits.backend", "expected `memory`");
    let found = issues(&with_upstream(&["rate_limits:", "  on_backend_error: maybe"]));
    assert_issue(&found[0], 2, "rate_limits.on_backend_error", "unknown variant `maybe`");
    let config = ok(&with_upstream(&[
        "rate_limits:",
        "  backend: redis://127.0.0.1:6379",
        "  on_backend_error: deny",
        "  key_prefix: 'a:'",
    ]));
    assert_eq!(config.rate_limits.backend(), Ok(crate::config::RateBackend::Redis("redis://127.0.0.1:6379".into())));
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
    assert_one(&with_upstream(&["breaker_sharing:", "  prefix: ''"]), 2, "breaker_sharing.prefix", "must be 1 to 128");
    assert_one(&with_upstream(&["breaker_sharing:", "  channel: x"]), 2, "breaker_sharing", "unknown field `channel`");
}
