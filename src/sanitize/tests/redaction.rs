//! Paths, URLs, addresses, host names and credentials become markers; look-alikes stay.

use super::big;

// --- paths -------------------------------------------------------------------------------

#[test]
fn absolute_paths_are_redacted() {
    let cases = [
        ("open /home/alice/.ssh/id_rsa: permission denied", "open [path]: permission denied"),
        ("config /srv/app/config.yaml missing", "config [path] missing"),
        ("no such file: '/var/lib/app/db.sqlite'", "no such file: '[path]'"),
        ("read ~/.config/acme/credentials.json", "read [path]"),
        ("see ~deploy/app/logs", "see [path]"),
        ("cannot write /tmp", "cannot write [path]"),
        ("error at /srv/app/x.py:12", "error at [path]:12"),
        (r"C:\Users\bob\AppData\Local\acme\cfg.toml not found", "[path] not found"),
        (r"ran C:\Program Files\Acme Tools\bin\tool.exe today", "ran [path] today"),
        ("C:/Users/bob/x.txt", "[path]"),
        (r"share \\fileserver\finance\q3.xlsx is offline", "share [path] is offline"),
        ("path=/opt/acme/lib", "path=[path]"),
        ("/home/ünïcode/dir/file", "[path]"),
    ];
    for (input, expected) in cases {
        assert_eq!(big(input), expected, "{input}");
    }
}

#[test]
fn things_that_are_not_absolute_paths_stay() {
    for s in [
        "a / b",
        "use / as separator",
        "read/write and TCP/IP",
        "relative src/main.rs:2:5",
        "ratio 1/2",
        "// comment",
        "see ./config.yaml",
        "route /health",
    ] {
        assert_eq!(big(s), s, "{s}");
    }
}

#[test]
fn url_path_parts_are_part_of_the_url() {
    assert_eq!(big("GET https://api.example.com/home/alice/data failed"), "GET [url] failed");
    assert_eq!(big("file:///home/alice/notes.md"), "[url]");
}

// --- URLs and hosts ----------------------------------------------------------------------

#[test]
fn urls_are_redacted() {
    let cases = [
        ("fetch https://admin:hunter2@db.internal:8443/x?token=abc failed", "fetch [url] failed"),
        ("(see http://10.0.0.5/docs).", "(see [url])."),
        ("redis://cache:6379/0, retrying", "[url], retrying"),
        ("link <https://example.com/a_(b)>", "link <[url]>"),
        ("postgres://u:p@h/db", "[url]"),
        ("url: https://ex.com/a?b=c&d=e", "url: [url]"),
    ];
    for (input, expected) in cases {
        assert_eq!(big(input), expected, "{input}");
    }
}

#[test]
fn addresses_and_internal_hosts_are_redacted() {
    let cases = [
        ("dial tcp 10.0.3.7:5432: connect: connection refused", "dial tcp [host]: connect: connection refused"),
        ("from 192.168.1.20 via 10.0.0.0/8", "from [host] via [host]"),
        ("listen [fe80::1]:80 failed", "listen [host] failed"),
        ("peer fe80::1ff:fe23:4567:890a%eth0", "peer [host]%eth0"),
        ("addr 2001:db8:85a3::8a2e:370:7334 down", "addr [host] down"),
        ("mapped ::ffff:10.0.0.1 here", "mapped [host] here"),
        ("loopback ::1 and 1:2:3:4:5:6:7:8", "loopback [host] and [host]"),
        ("connect db.prod.internal:5432 refused", "connect [host] refused"),
        ("host redis.default.svc.cluster.local unreachable", "host [host] unreachable"),
        ("api.example.com:443 timed out", "[host] timed out"),
        ("dial redis:6379: refused", "dial [host]: refused"),
        ("localhost refused", "[host] refused"),
        ("http on localhost:8080", "http on [host]"),
        ("printer.corp is down", "[host] is down"),
        ("mail to ops@mx1.internal", "mail to ops@[host]"),
    ];
    for (input, expected) in cases {
        assert_eq!(big(input), expected, "{input}");
    }
}

#[test]
fn things_that_are_not_hosts_stay() {
    for s in [
        "syntax error at line:12",
        "at 12:30:45 UTC",
        "in app.py:42 and main.go:7",
        "index.js:10:5",
        "version 1.2.3",
        "std::io::Error and Vec::new",
        "ratio 3.14",
        "MAC aa:bb:cc:dd:ee:ff",
        "example.com is public",
        "see section 4.2.1",
        "2024-01-01T12:30:00Z",
    ] {
        assert_eq!(big(s), s, "{s}");
    }
}

// --- credentials -------------------------------------------------------------------------

#[test]
fn credentials_are_redacted() {
    let jwt =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    let cases = [
        ("Authorization: Bearer abc.def-ghi_jkl123".to_owned(), "Authorization: [redacted]".to_owned()),
        ("sent Bearer 7f3c9a0b1e2d4c5f".to_owned(), "sent Bearer [redacted]".to_owned()),
        ("header Basic dXNlcjpwYXNzd29yZA== rejected".to_owned(), "header Basic [redacted] rejected".to_owned()),
        (format!("token {jwt} expired"), "token [redacted] expired".to_owned()),
        ("key sk-proj-4fT9xQ2mLp8RzW1vB6nK3jH0 invalid".to_owned(), "key [redacted] invalid".to_owned()),
        ("sk-live-0123456789abcdefghijkLMN".to_owned(), "[redacted]".to_owned()),
        ("stripe sk_test_4eC39HqLyjWDarjtT1zdp7dc".to_owned(), "stripe [redacted]".to_owned()),
        ("aws AKIAIOSFODNN7EXAMPLE denied".to_owned(), "aws [redacted] denied".to_owned()),
        ("gh ghp_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(), "gh [redacted]".to_owned()),
        ("gho_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(), "[redacted]".to_owned()),
        ("ghs_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(), "[redacted]".to_owned()),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop".to_owned(), "[redacted]".to_owned()),
        ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".to_owned(), "slack [redacted]".to_owned()),
        ("xoxp-123456789012-abcdefghij".to_owned(), "[redacted]".to_owned()),
        ("password=hunter2 rejected".to_owned(), "password=[redacted] rejected".to_owned()),
        ("DB_PASSWORD: s3cr3t!".to_owned(), "DB_PASSWORD: [redacted]".to_owned()),
        ("passwd:letmein".to_owned(), "passwd:[redacted]".to_owned()),
        ("client_secret=abc&x=1".to_owned(), "client_secret=[redacted]&x=1".to_owned()),
        ("api_key=AbC123 user=bob".to_owned(), "api_key=[redacted] user=bob".to_owned()),
        ("token=deadbeef".to_owned(), "token=[redacted]".to_owned()),
        ("x-api-key: k-123".to_owned(), "x-api-key: [redacted]".to_owned()),
        (
            "{\"password\": \"correct horse battery\", \"user\": \"bob\"}".to_owned(),
            "{\"password\": \"[redacted]\", \"user\": \"bob\"}".to_owned(),
        ),
        ("{'accessToken': 'a\\'b'}".to_owned(), "{'accessToken': '[redacted]'}".to_owned()),
        ("Cookie: session=abc; theme=dark".to_owned(), "Cookie: [redacted]".to_owned()),
        (
            "FATAL: could not connect as svc_billing:Pa55w0rd-Billing@10.20.30.40:5432".to_owned(),
            "FATAL: could not connect as [redacted]@[host]".to_owned(),
        ),
        ("auth :r3dis-pass@cache:6379 refused".to_owned(), "auth [redacted]@[host] refused".to_owned()),
        ("login admin:hunter2@db.example.com failed".to_owned(), "login [redacted]@db.example.com failed".to_owned()),
        (
            "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".to_owned(),
            "sha [redacted]".to_owned(),
        ),
        ("aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY2".to_owned(), "aws secret [redacted]".to_owned()),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nafter".to_owned(),
            "[redacted]\\x0aafter".to_owned(),
        ),
        // What follows a key block stays a word of its own: a malformed end line does not
        // take the space after it, and a token glued to the dashes is set off.
        (
            "-----BEGIN RSA PRIVATE KEY-----\n... -----END Bearer Zk3Q9x2LmPq7Rt5Vw8Y1 x".to_owned(),
            "[redacted] Bearer [redacted] x".to_owned(),
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----Bearer Zk3Q9x2LmPq7Rt5Vw8Y1"
                .to_owned(),
            "[redacted] Bearer [redacted]".to_owned(),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(big(&input), expected, "{input}");
    }
}

#[test]
fn words_that_resemble_credentials_stay() {
    for s in [
        "Basic usage: call with a query",
        "the bearer of bad news",
        "max_tokens=100 exceeded",
        "tokens: 5",
        "unexpected token } at position 3",
        "some_long_snake_case_function_name_here_too",
        "getUserAccountSettingsForTenantAndRegion",
        "request 550e8400-e29b-41d4-a716-446655440000 failed",
        "sk-learn-is-a-python-library-for-ml",
        "password must be at least 8 characters",
        "std::io::Error",
        "mail ops@example.com at 12:30",
        "git@github.com:org/repo.git",
        "key::value@node",
    ] {
        assert_eq!(big(s), s, "{s}");
    }
}

#[test]
fn a_secret_key_used_as_a_value_does_not_shield_the_next_value() {
    let out = super::super::sanitize("password: password: A0a!a*^~#^#0", 256);
    assert!(!out.contains("A0a!a"), "{out}");
}

// --- credentials only (log lines) --------------------------------------------------------

#[test]
fn redacting_credentials_keeps_paths_hosts_and_urls() {
    use crate::sanitize::redact_credentials;
    let cases = [
        (
            "starting; DATABASE_URL=postgres://app_user:hunter2@db.internal:5432/orders",
            "starting; DATABASE_URL=postgres://[redacted]@db.internal:5432/orders",
        ),
        (
            "  File \"/srv/app/handlers/tools.py\", line 42, in call password=hunter2",
            "  File \"/srv/app/handlers/tools.py\", line 42, in call password=[redacted]",
        ),
        ("Authorization: Bearer Zm9vYmFyYmF6LWJlYXJlci10b2tlbi00Mg", "Authorization: [redacted]"),
        (
            "GET https://api.example/v1?api_key=Q1w2E3r4T5y6 from 10.0.3.7",
            "GET https://api.example/v1?api_key=[redacted] from 10.0.3.7",
        ),
        ("\u{1b}[31mred\u{1b}[0m tab\there é", "red tab\\x09here \\xc3\\xa9"),
    ];
    for (input, expected) in cases {
        assert_eq!(redact_credentials(input, 1024), expected, "{input}");
    }
    let long = format!("password=hunter2 {}", "x".repeat(2000));
    let out = redact_credentials(&long, 100);
    assert!(out.len() <= 100 && out.ends_with("...") && !out.contains("hunter2"), "{out}");
}

// --- what the client itself sent ---------------------------------------------------------

#[test]
fn what_the_client_sent_is_kept_and_what_the_upstream_added_is_not() {
    use crate::sanitize::{Quoting, TEXT_CAP, sanitize_quoting};
    let values = vec!["/home/alice/notes.txt".to_owned(), "/home/é/x".to_owned(), "hunter2".to_owned()];
    let standard = Quoting { client_values: &values, credentials_only: false };
    let cases = [
        (
            "Access denied - path outside allowed directories: /home/alice/notes.txt not in /srv/data",
            "Access denied - path outside allowed directories: /home/alice/notes.txt not in [path]",
        ),
        ("password=Upstream-Pw9 for /home/alice/notes.txt", "password=[redacted] for /home/alice/notes.txt"),
        // The client's own secret-looking value is its own.
        ("login failed: password=hunter2", "login failed: password=hunter2"),
        // What merely contains the client's value is still the upstream's.
        ("read file:///home/alice/notes.txt failed", "read [url] failed"),
        ("no such dir /home/é/x", "no such dir /home/\\xc3\\xa9/x"),
    ];
    for (input, expected) in cases {
        let out = sanitize_quoting(input, TEXT_CAP, &standard);
        assert_eq!(out, expected, "{input}");
        assert_eq!(sanitize_quoting(&out, TEXT_CAP, &standard), out, "a fixed point: {out}");
    }
    let strict = Quoting::default();
    assert_eq!(
        sanitize_quoting(cases[0].0, TEXT_CAP, &strict),
        "Access denied - path outside allowed directories: [path] not in [path]"
    );
    let trusted = Quoting { client_values: &values, credentials_only: true };
    assert_eq!(
        sanitize_quoting("cannot open /srv/data/x.db on db.internal: token=Upstream-T0ken-77", TEXT_CAP, &trusted),
        "cannot open /srv/data/x.db on db.internal: token=[redacted]"
    );
}
