//! Deserializing a document with every serde problem reported, not only the first.
//!
//! yaml_serde stops at the first type error or unknown key. To find the next one, the
//! document is also parsed into a [`Value`] tree; after each error the node it names is
//! taken out of the tree (the unknown key, the mistyped field, a list item that cannot be
//! read at all) and the rest is deserialized again, so that field takes its default and
//! the next problem comes to light. Each error's path is resolved against the tree as it
//! stands and mapped back to the original document ([`Indices`]: a removed list item
//! shifts the ones after it), where `locate` finds its line.

use serde::de::IgnoredAny;
use yaml_serde::Value;

use super::Config;
use super::error::ConfigIssue;
use super::locate::{self, FieldPath, Segment};

/// Most serde problems reported from one document.
const MAX_PROBLEMS: usize = 64;

/// What deserializing found.
pub(super) struct Collected {
    /// The configuration with every offending node left out; `None` when a problem
    /// could not be taken out (the root itself is wrong), so no later pass can run.
    pub(super) config: Option<Config>,
    /// One issue per problem, with original field paths and lines.
    pub(super) issues: Vec<ConfigIssue>,
    /// The original paths of the nodes left out.
    pub(super) removed: Vec<FieldPath>,
    /// Maps paths of the reduced document back to the original one.
    pub(super) indices: Indices,
}

/// Deserializes `text`, collecting every type error and unknown key.
pub(super) fn deserialize(text: &str) -> Collected {
    let mut out = Collected { config: None, issues: Vec::new(), removed: Vec::new(), indices: Indices::default() };
    let mut err = match yaml_serde::from_str::<Config>(text) {
        Ok(config) => {
            out.config = Some(config);
            return out;
        }
        Err(err) => err,
    };
    // A syntax error leaves no tree to work on: it is the only problem reported, even
    // when deserializing met a type error before it reached the syntax error.
    if let Err(syntax) = yaml_serde::from_str::<IgnoredAny>(text) {
        out.issues.push(ConfigIssue::from_yaml(&syntax, text));
        return out;
    }
    // Nor does a key written twice in one mapping (which a map field takes, the last
    // value winning): the first problem is the only one reported.
    let Ok(mut tree) = yaml_serde::from_str::<Value>(text) else {
        out.issues.push(ConfigIssue::from_yaml(&err, text));
        return out;
    };
    let mut first = true;
    loop {
        let raw = ConfigIssue::from_yaml(&err, text);
        let at = resolve(&tree, &raw.field).map(FieldPath::from_segments);
        let target = at.as_ref().map(|at| target_of(at, &raw.message));
        let (Some(at), Some(target)) = (at, target) else {
            // The path cannot be followed: report the problem as yaml_serde saw it.
            out.issues.push(ConfigIssue { line: raw.line.filter(|_| first), ..raw });
            return out;
        };
        let original = out.indices.original(&target);
        out.issues.push(ConfigIssue {
            line: Some(if first && target.segments().is_empty() {
                raw.line.unwrap_or(1)
            } else {
                locate::line_of(text, &original)
            }),
            field: out.indices.original(&at).to_string(),
            message: raw.message,
        });
        if out.issues.len() >= MAX_PROBLEMS || !remove(&mut tree, &target, &mut out.indices) {
            return out;
        }
        out.removed.push(original);
        let again = yaml_serde::to_string(&tree).and_then(|t| yaml_serde::from_str::<Config>(&t));
        match again {
            Ok(config) => {
                out.config = Some(config);
                return out;
            }
            Err(next) => {
                err = next;
                first = false;
            }
        }
    }
}

/// The node to take out for a problem at `at`: the key itself for an unknown key
/// (reported at its enclosing mapping), else the node the problem is about.
fn target_of(at: &FieldPath, message: &str) -> FieldPath {
    match message.strip_prefix("unknown field `").and_then(|rest| rest.split_once('`')) {
        Some((key, _)) => at.key(key),
        None => at.clone(),
    }
}

/// Follows a yaml_serde path (`upstreams[1].headers.X-A`) through `node`. Keys may
/// contain `.`, so each step tries the longest key of the mapping that fits.
fn resolve(node: &Value, path: &str) -> Option<Vec<Segment>> {
    if path.is_empty() {
        return Some(Vec::new());
    }
    match node {
        Value::Sequence(items) => {
            let (digits, rest) = path.strip_prefix('[')?.split_once(']')?;
            let index: usize = digits.parse().ok()?;
            let mut tail = resolve(items.get(index)?, rest.strip_prefix('.').unwrap_or(rest))?;
            tail.insert(0, Segment::Index(index));
            Some(tail)
        }
        Value::Mapping(map) => {
            let mut keys: Vec<&str> = map.keys().filter_map(Value::as_str).filter(|k| path.starts_with(k)).collect();
            keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
            keys.into_iter().find_map(|key| {
                let rest = path.get(key.len()..)?;
                let rest = match rest.strip_prefix('.') {
                    Some(after_dot) => after_dot,
                    None if rest.is_empty() || rest.starts_with('[') => rest,
                    None => return None,
                };
                let mut tail = resolve(map.get(key)?, rest)?;
                tail.insert(0, Segment::Key(key.to_owned()));
                Some(tail)
            })
        }
        Value::Tagged(tagged) => resolve(&tagged.value, path),
        _ => None,
    }
}

/// Takes the node at `target` out of `tree`; `false` if there is none (or it is the root).
fn remove(tree: &mut Value, target: &FieldPath, indices: &mut Indices) -> bool {
    let Some((last, parent)) = target.segments().split_last() else { return false };
    let Some(node) = node_mut(tree, parent) else { return false };
    match (node, last) {
        (Value::Mapping(map), Segment::Key(key)) => map.shift_remove(key.as_str()).is_some(),
        (Value::Sequence(items), Segment::Index(index)) if *index < items.len() => {
            indices.removed(&FieldPath::from_segments(parent.to_vec()), items.len(), *index);
            items.remove(*index);
            true
        }
        _ => false,
    }
}

fn node_mut<'a>(node: &'a mut Value, path: &[Segment]) -> Option<&'a mut Value> {
    let Some((first, rest)) = path.split_first() else { return Some(node) };
    let child = match (node, first) {
        (Value::Tagged(tagged), _) => return node_mut(&mut tagged.value, path),
        (Value::Mapping(map), Segment::Key(key)) => map.get_mut(key.as_str())?,
        (Value::Sequence(items), Segment::Index(index)) => items.get_mut(*index)?,
        _ => return None,
    };
    node_mut(child, rest)
}

/// For each list that lost items, the original indices of the items left, in order.
#[derive(Debug, Default)]
pub(super) struct Indices(Vec<(FieldPath, Vec<usize>)>);

impl Indices {
    /// `path` in the reduced document → the same node's path in the original one.
    pub(super) fn original(&self, path: &FieldPath) -> FieldPath {
        let mut out: Vec<Segment> = Vec::with_capacity(path.segments().len());
        for segment in path.segments() {
            let segment = match segment {
                Segment::Index(index) => {
                    let list = FieldPath::from_segments(out.clone());
                    let left = self.0.iter().find(|(at, _)| *at == list).map(|(_, left)| left);
                    Segment::Index(left.and_then(|left| left.get(*index)).copied().unwrap_or(*index))
                }
                key => key.clone(),
            };
            out.push(segment);
        }
        FieldPath::from_segments(out)
    }

    /// Records that item `index` of the list at `list` (reduced path), `len` long before,
    /// was taken out.
    fn removed(&mut self, list: &FieldPath, len: usize, index: usize) {
        let original = self.original(list);
        let position = match self.0.iter().position(|(at, _)| *at == original) {
            Some(position) => position,
            None => {
                self.0.push((original, (0..len).collect()));
                self.0.len() - 1
            }
        };
        if let Some((_, left)) = self.0.get_mut(position)
            && index < left.len()
        {
            left.remove(index);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every type error, unknown key and semantic problem of a document in one report.

    use crate::config::test_support::{assert_issue, assert_one, issues, ok, parse, with_upstream};

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
        let err = parse(&[
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
            parse(&["\"a\\nb\": 1", "upstreams:", "  - name: x", "    command: y", "    \"c\\rd\": 1"]).unwrap_err();
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
}
