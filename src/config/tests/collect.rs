//! Every type error, unknown key and semantic problem of a document in one report.

use super::{assert_issue, assert_one, issues, ok, with_upstream};

#[test]
fn a_type_error_does_not_hide_an_unknown_key_after_it() {
    let found = issues(&with_upstream(&[
        "defaults:",
        "  retry: {max_attempts: \"three\"}",
        "  brake: {consecutive_failures: 3}",
    ]));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_issue(&found[0], 2, "defaults.retry.max_attempts", "invalid type: string \"three\"");
    assert_issue(&found[1], 3, "defaults", "unknown field `brake`");
}

#[test]
fn every_kind_of_problem_is_reported_in_line_order() {
    let lines = [
        "listen: 127.0.0.1:80",
        "admin_listen: 127.0.0.1:80",
        "session: {idle_timeout: soon}",
        "upstreams:",
        "  - command: x",
        "  - name: b",
        "    url: ftp://x",
        "    share: sometimes",
        "  - name: c",
        "    command: y",
        "    comand: z",
        "    env: {K: '${NOPE}'}",
    ];
    let found = issues(&lines);
    let summary: Vec<(Option<usize>, &str)> = found.iter().map(|i| (i.line, i.field.as_str())).collect();
    assert_eq!(
        summary,
        [
            (Some(2), "admin_listen"),
            (Some(3), "session.idle_timeout"),
            (Some(5), "upstreams[0]"),
            (Some(7), "upstreams[1].url"),
            (Some(8), "upstreams[1].share"),
            (Some(11), "upstreams[2]"),
            (Some(12), "upstreams[2].env.K"),
        ],
        "{found:#?}"
    );
    assert!(found[2].message.contains("missing field `name`"), "{found:#?}");
    assert!(found[4].message.contains("unknown variant `sometimes`"), "{found:#?}");
    assert!(found[5].message.contains("unknown field `comand`"), "{found:#?}");
    assert!(found[6].message.contains("NOPE is not set"), "{found:#?}");
}

#[test]
fn rendering_gives_one_file_line_field_message_line_per_problem() {
    let err = super::parse(&[
        "limits:",
        "  max_body_bytes: -1",
        "  max_bodies: 3",
        "upstreams:",
        "  - name: a",
        "    command: x",
        "    retry: {max_attempts: many, base: 1s}",
    ])
    .unwrap_err();
    let lines: Vec<String> = err.to_string().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[0].starts_with("t.yaml:2: limits.max_body_bytes: invalid type: integer `-1`"), "{lines:#?}");
    assert!(lines[1].starts_with("t.yaml:3: limits: unknown field `max_bodies`"), "{lines:#?}");
    assert!(lines[2].starts_with("t.yaml:7: upstreams[0].retry"), "{lines:#?}");
    assert!(lines[3].starts_with("t.yaml:7: upstreams[0].retry"), "{lines:#?}");
}

#[test]
fn a_key_written_twice_leaves_the_first_problem_alone() {
    let lines = ["listen: x", "upstreams:", "  - name: a", "    command: c", "    env: {A: '1', A: '2'}"];
    assert_one(&lines, 1, "listen", "invalid socket address");
    // Alone, it is no problem: the last value wins.
    assert_eq!(ok(&lines[1..]).upstreams[0].env["A"], "2");
}

#[test]
fn line_breaks_quoted_from_the_document_are_escaped_in_the_rendering() {
    let err =
        super::parse(&["\"a\\nb\": 1", "upstreams:", "  - name: x", "    command: y", "    \"c\\rd\": 1"]).unwrap_err();
    let rendered = err.to_string();
    assert_eq!(rendered.lines().count(), err.errors().len(), "{rendered}");
    assert_eq!(err.errors().len(), 2, "{rendered}");
    assert!(rendered.starts_with("t.yaml:1: unknown field `a\\nb`"), "{rendered}");
    assert!(rendered.contains("\nt.yaml:5: upstreams[0]: unknown field `c\\rd`"), "{rendered}");
}

#[test]
fn upstreams_that_cannot_be_read_keep_the_indices_of_the_rest() {
    let found = issues(&[
        "upstreams:",
        "  - command: x",
        "  - url: http://h/",
        "  - name: c",
        "    command: y",
        "    timeouts: {request: 0s}",
        "  - name: d",
        "    command: z",
        "    shutdown_grace: later",
    ]);
    let summary: Vec<(Option<usize>, &str)> = found.iter().map(|i| (i.line, i.field.as_str())).collect();
    assert_eq!(
        summary,
        [
            (Some(2), "upstreams[0]"),
            (Some(3), "upstreams[1]"),
            (Some(6), "upstreams[2].timeouts.request"),
            (Some(9), "upstreams[3].shutdown_grace"),
        ],
        "{found:#?}"
    );
}

#[test]
fn a_consequence_of_a_removed_field_is_not_reported() {
    // Without its only upstream the list would be empty; that is not a second problem.
    assert_one(&["upstreams:", "  - command: x"], 2, "upstreams[0]", "missing field `name`");
    // An HTTP upstream's `share` is refused by type, not also as "stdio only".
    assert_one(&["upstreams:", "  - name: a", "    url: http://h/", "    share: 5"], 4, "upstreams[0].share", "");
}

#[test]
fn a_wrong_root_is_the_only_problem() {
    assert_one(&["- a", "- b"], 1, "", "invalid type: sequence");
}

#[test]
fn a_misspelt_required_key_is_reported_as_unknown_and_as_missing() {
    let found = issues(&["upstreams:", "  - nam: a", "    command: x"]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_issue(&found[0], 2, "upstreams[0]", "unknown field `nam`");
    assert_issue(&found[1], 2, "upstreams[0]", "missing field `name`");
}

#[test]
fn keys_with_dots_are_followed_to_their_own_line() {
    let found = issues(&[
        "upstreams:",
        "  - name: a",
        "    url: http://h/",
        "    headers:",
        "      X.Y: {a: 1}",
        "      X: ok",
        "      Z: [1]",
    ]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_issue(&found[0], 5, "upstreams[0].headers.X.Y", "invalid type: map");
    assert_issue(&found[1], 7, "upstreams[0].headers.Z", "invalid type: sequence");
}
