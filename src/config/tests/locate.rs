//! Line finding over the YAML shapes operators actually write.

use super::super::locate::{FieldPath, is_written, line_of};
use super::doc;

fn upstream(i: usize) -> FieldPath {
    FieldPath::root().key("upstreams").index(i)
}

const TEXT: [&str; 17] = [
    "# leading comment",                       // 1
    "listen: 127.0.0.1:1",                     // 2
    "upstreams:",                              // 3
    "  - name: a   # trailing comment",        // 4
    "    args:",                               // 5
    "      - one",                             // 6
    "      - >-",                              // 7
    "        folded",                          // 8
    "      - three",                           // 9
    "  -",                                     // 10
    "    name: b",                             // 11
    "    \"url\": http://h/",                  // 12
    "    headers: {X-A: '1',",                 // 13
    "              X-B: '2'}",                 // 14
    "  - {name: c, command: x, args: [p, q]}", // 15
    "  - &base {name: d, command: y}",         // 16
    "defaults: {timeouts: {connect: 1s}}",     // 17
];

#[test]
fn finds_keys_items_and_nested_fields() {
    let text = doc(&TEXT);
    let at = |path: &FieldPath| line_of(&text, path);
    assert_eq!(at(&FieldPath::root().key("listen")), 2);
    assert_eq!(at(&FieldPath::root().key("upstreams")), 3);
    assert_eq!(at(&upstream(0)), 4);
    assert_eq!(at(&upstream(0).key("args")), 5);
    assert_eq!(at(&upstream(0).key("args").index(0)), 6);
    assert_eq!(at(&upstream(0).key("args").index(1)), 7);
    assert_eq!(at(&upstream(0).key("args").index(2)), 9);
    assert_eq!(at(&upstream(1)), 11);
    assert_eq!(at(&upstream(1).key("url")), 12);
    assert_eq!(at(&upstream(1).key("headers").key("X-B")), 14);
    assert_eq!(at(&upstream(2).key("args").index(1)), 15);
    assert_eq!(at(&upstream(3).key("command")), 16);
    let connect = FieldPath::root().key("defaults").key("timeouts").key("connect");
    assert_eq!(at(&connect), 17);
}

#[test]
fn unwritten_fields_fall_back_to_the_nearest_written_ancestor() {
    let text = doc(&TEXT);
    assert_eq!(line_of(&text, &upstream(0).key("restart").key("max_delay")), 4);
    assert_eq!(line_of(&text, &upstream(0).key("args").index(7)), 5);
    assert_eq!(line_of(&text, &upstream(9)), 3);
    assert_eq!(line_of(&text, &FieldPath::root().key("session")), 1);
    assert_eq!(line_of("", &FieldPath::root().key("session")), 1);
    assert!(is_written(&text, &upstream(1).key("url")));
    assert!(!is_written(&text, &upstream(1).key("command")));
}

#[test]
fn paths_render_like_serde_paths() {
    let path = upstream(1).key("headers").key("Authorization");
    assert_eq!(path.to_string(), "upstreams[1].headers.Authorization");
    assert_eq!(FieldPath::root().to_string(), "");
}
