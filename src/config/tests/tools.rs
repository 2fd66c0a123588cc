//! `upstreams[].tools.<name>` and `upstreams[].prompts.<name>`: what clients see of a
//! tool or prompt, reported by line.

use super::{assert_issue, issues, ok};

#[test]
fn overrides_of_what_clients_see_load() {
    let config = ok(&[
        "upstreams:",
        "  - name: demo",
        "    command: x",
        "    tools:",
        "      add:",
        "        name: plus",
        "        title: Plus",
        "        description: Adds forty.",
        "        annotations: { readOnlyHint: true, idempotentHint: true }",
        "        arguments:",
        "          b: { value: 40 }",
        "          who: { principal: name }",
        "          team: { claim: team }",
        "          secret: { env: TOKEN }",
        "          note: { default: none }",
        "      fail: { hidden: true }",
    ]);
    let add = &config.upstreams[0].tools["add"];
    assert!(add.shapes());
    assert_eq!(add.name.as_deref(), Some("plus"));
    assert_eq!(add.annotations.read_only_hint, Some(true));
    assert_eq!(add.arguments.len(), 5);
    assert!(add.arguments.values().all(|a| a.source().is_some()));
    assert!(config.upstreams[0].tools["fail"].hidden);
}

#[test]
fn a_name_clients_would_see_twice_or_an_invalid_one_is_reported_at_the_name() {
    let found = issues(&[
        "upstreams:",
        "  - name: demo",
        "    command: x",
        "    tools:",
        "      add: { name: echo }",
        "      echo: { timeout: 5s }",
        "      big: { name: 'has space' }",
        "      log: { name: sleep }",
        "      sleep: { name: log }",
        "      crash: { hidden: true }",
        "      roots: { name: crash }",
    ]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_issue(&found[0], 5, "upstreams[0].tools.add.name", "clients would see two tools named \"echo\"");
    assert_issue(&found[1], 7, "upstreams[0].tools.big.name", "invalid name \"has space\"");
}

#[test]
fn an_argument_needs_one_source_and_a_set_environment_variable() {
    let found = issues(&[
        "upstreams:",
        "  - name: demo",
        "    command: x",
        "    tools:",
        "      add:",
        "        arguments:",
        "          a: { value: 1, default: 2 }",
        "          b: {}",
        "          c: { env: NOPE }",
        "          d: { principal: email }",
    ]);
    assert_eq!(found.len(), 4, "{found:#?}");
    assert_issue(&found[0], 7, "upstreams[0].tools.add.arguments.a", "exactly one of `value`, `env`");
    assert_issue(&found[1], 8, "upstreams[0].tools.add.arguments.b", "exactly one of");
    assert_issue(&found[2], 9, "upstreams[0].tools.add.arguments.c.env", "environment variable NOPE is not set");
    assert_issue(&found[3], 10, "upstreams[0].tools.add.arguments.d.principal", "unknown variant `email`");
}

#[test]
fn prompt_names_clients_would_see_twice_are_reported() {
    let found = issues(&[
        "upstreams:",
        "  - name: demo",
        "    command: x",
        "    prompts:",
        "      greet: { name: hello, description: Says hello. }",
        "      hello: { description: Another. }",
        "      other: { name: 'a b' }",
        "      old: { hidden: true, size: 3 }",
    ]);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_issue(&found[0], 5, "upstreams[0].prompts.greet.name", "clients would see two prompts named \"hello\"");
    assert_issue(&found[1], 7, "upstreams[0].prompts.other.name", "invalid name \"a b\"");
    assert_issue(&found[2], 8, "upstreams[0].prompts.old", "unknown field `size`");
}
