//! Finding the line of a field in the YAML text, for error messages.
//!
//! yaml_serde exposes no spans, but it does stamp every error raised while visiting a
//! node with that node's position. So to find `upstreams[1].url` we deserialize the
//! text once more with a [`Walk`] seed that follows the path, skips everything else, and
//! raises a marker error at the target: at the *key* `url` for a mapping entry (so a
//! block value still points at its key's line), at the element itself for a list item.
//! The error's `location()` is the answer. This follows YAML exactly (flow style,
//! quoting, comments, multi-line scalars, anchors) with no second parser to drift.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// A mapping key.
    Key(String),
    /// A list index.
    Index(usize),
}

/// Where a value lives in the document, e.g. `upstreams[1].headers.Authorization`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldPath(Vec<Segment>);

impl FieldPath {
    /// The document root.
    pub(crate) fn root() -> Self {
        FieldPath::default()
    }

    /// This path extended by mapping key `key`.
    pub(crate) fn key(&self, key: &str) -> Self {
        let mut path = self.clone();
        path.0.push(Segment::Key(key.to_owned()));
        path
    }

    /// This path extended by list index `index`.
    pub(crate) fn index(&self, index: usize) -> Self {
        let mut path = self.clone();
        path.0.push(Segment::Index(index));
        path
    }

    /// The path made of `segments`, root first.
    pub(crate) fn from_segments(segments: Vec<Segment>) -> Self {
        FieldPath(segments)
    }

    /// The steps from the root.
    pub(crate) fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// Whether `self` is `other` or lies inside it.
    pub(crate) fn starts_with(&self, other: &FieldPath) -> bool {
        self.0.starts_with(&other.0)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if i == 0 => f.write_str(key)?,
                Segment::Key(key) => write!(f, ".{key}")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// The 1-based line of `path` in `text`. A path that is not written in the text (a
/// defaulted field) falls back to its nearest written ancestor; the root is line 1.
pub(crate) fn line_of(text: &str, path: &FieldPath) -> usize {
    let mut segments = path.0.as_slice();
    while let Some((_, parent)) = segments.split_last() {
        if let Some(line) = find(text, segments) {
            return line;
        }
        segments = parent;
    }
    1
}

/// Whether `path` is written in `text` (as opposed to taking its default).
pub(crate) fn is_written(text: &str, path: &FieldPath) -> bool {
    find(text, &path.0).is_some()
}

/// The marker error message raised at the target node.
const FOUND: &str = "\u{0}seawall-config-locate-found";

fn find(text: &str, segments: &[Segment]) -> Option<usize> {
    let walk = Walk { segments };
    match walk.deserialize(yaml_serde::Deserializer::from_str(text)) {
        Err(err) if err.to_string().contains(FOUND) => err.location().map(|l| l.line()),
        _ => None,
    }
}

/// Follows `segments` through the document; succeeds only by failing with [`FOUND`].
struct Walk<'p> {
    segments: &'p [Segment],
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Walk<'_> {
    /// Reached a scalar: it is the target only if the path is used up.
    fn scalar<E: de::Error>(self) -> Result<(), E> {
        if self.segments.is_empty() { Err(E::custom(FOUND)) } else { Err(E::custom("not found")) }
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Segment::Key(want), rest)) = self.segments.split_first() else {
            return self.scalar();
        };
        let seed = KeySeed { want, is_target: rest.is_empty() };
        while let Some(matched) = map.next_key_seed(seed)? {
            if matched {
                return map.next_value_seed(Walk { segments: rest });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Err(de::Error::custom("not found"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Segment::Index(want), rest)) = self.segments.split_first() else {
            return self.scalar();
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Err(de::Error::custom("not found"));
            }
        }
        match seq.next_element_seed(Walk { segments: rest })? {
            Some(()) => Ok(()),
            None => Err(de::Error::custom("not found")),
        }
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.scalar()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.scalar()
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
}

/// Reads one mapping key: `true` if it is the wanted one; the marker error instead if it
/// is also the end of the path, so the position reported is the key's.
#[derive(Clone, Copy)]
struct KeySeed<'p> {
    want: &'p str,
    is_target: bool,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        match key == self.want {
            true if self.is_target => Err(E::custom(FOUND)),
            matched => Ok(matched),
        }
    }
}

/// One failed check: the field it concerns and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) path: FieldPath,
    pub(crate) message: String,
}

impl Problem {
    pub(crate) fn new(path: FieldPath, message: impl Into<String>) -> Self {
        Problem { path, message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    //! Line finding over the YAML shapes operators actually write.

    use crate::config::locate::{FieldPath, is_written, line_of};
    use crate::config::test_support::doc;

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
}
