//! The hash maps of the request path: foldhash, seeded per process, instead of the
//! standard library's SipHash. Every proxied call looks up its session (by an id of a few
//! hundred characters), its tool, breakers, metric series and in-flight requests; SipHash
//! made those lookups a few percent of a call's work. foldhash's `quality` variant keeps
//! a random seed per map, so keys a peer chooses (session ids, request ids) cannot be
//! made to collide on purpose.

/// A hash map with the request path's hasher.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::quality::RandomState>;
