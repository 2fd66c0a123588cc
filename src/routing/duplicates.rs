//! The warning for a resource URI two upstreams both list: logged once per URI and pair
//! of upstreams while this routing lasts (a reload builds a new one and warns anew),
//! not once per `resources/list` of every session.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

/// Most pairs remembered; past it further duplicates are not logged (one line says so).
const MAX_WARNED: usize = 1024;

/// The duplicates already warned about.
#[derive(Default)]
pub(super) struct DuplicateUris {
    warned: Mutex<Warned>,
}

#[derive(Default)]
struct Warned {
    pairs: HashSet<(String, Arc<str>, Arc<str>)>,
    /// Whether the line saying that no more are logged was written.
    full: bool,
}

impl DuplicateUris {
    /// Logs that `uri`, kept by `owner`, is listed by `other` too, unless that was said
    /// before. The URI is the upstreams' public name for the resource: it is escaped and
    /// capped, not redacted, so the operator can find it.
    pub(super) fn warn(&self, uri: &str, owner: &Arc<str>, other: &Arc<str>) {
        let key = (uri.to_owned(), Arc::clone(owner), Arc::clone(other));
        let mut warned = self.warned.lock();
        if warned.pairs.contains(&key) {
            return;
        }
        if warned.pairs.len() >= MAX_WARNED {
            if !std::mem::replace(&mut warned.full, true) {
                drop(warned);
                tracing::warn!(max = MAX_WARNED, "more resource URIs listed by two upstreams; not logged any further");
            }
            return;
        }
        warned.pairs.insert(key);
        drop(warned);
        tracing::warn!(
            uri = %crate::sanitize::quote(uri, crate::sanitize::TEXT_CAP),
            served_by = %owner,
            also_listed_by = %other,
            "two upstreams list the same resource URI; it is listed and read from the first"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pair_is_remembered_once_and_the_set_stays_bounded() {
        let d = DuplicateUris::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        d.warn("demo://x", &a, &b);
        d.warn("demo://x", &a, &b);
        assert_eq!(d.warned.lock().pairs.len(), 1);
        d.warn("demo://x", &b, &a);
        assert_eq!(d.warned.lock().pairs.len(), 2);
        for i in 0..2 * MAX_WARNED {
            d.warn(&format!("demo://{i}"), &a, &b);
        }
        assert_eq!(d.warned.lock().pairs.len(), MAX_WARNED);
        assert!(d.warned.lock().full);
    }
}
