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
