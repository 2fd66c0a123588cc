//! Where each resource lives: URIs and URI templates learnt from the list results that
//! passed through a session, so `resources/read` reaches the right upstream.

use std::collections::HashMap;
use std::sync::Arc;

use super::uri_template;

/// Most entries remembered per session; beyond it, routing falls back to probing.
const MAX_ENTRIES: usize = 10_000;

/// Resource URIs and templates → upstream.
#[derive(Debug, Default)]
pub(crate) struct ResourceCatalog {
    resources: HashMap<String, Arc<str>>,
    templates: Vec<(String, Arc<str>)>,
    /// Whether every upstream's templates have been listed at least once.
    pub templates_loaded: bool,
}

impl ResourceCatalog {
    /// Remembers that `uri` is served by `upstream`. A URI that another upstream listed
    /// first stays with that one (lists are merged in configuration order), so every
    /// listed resource can be read; returns the upstream that keeps it.
    pub(crate) fn learn_resource(&mut self, uri: &str, upstream: &Arc<str>) -> Arc<str> {
        if let Some(owner) = self.resources.get(uri) {
            return Arc::clone(owner);
        }
        if self.resources.len() < MAX_ENTRIES {
            self.resources.insert(uri.to_owned(), Arc::clone(upstream));
        }
        Arc::clone(upstream)
    }

    /// Remembers that `template` is served by `upstream`.
    pub(crate) fn learn_template(&mut self, template: &str, upstream: &Arc<str>) {
        if self.templates.iter().any(|(t, u)| t == template && u == upstream) {
            return;
        }
        if self.templates.len() < MAX_ENTRIES {
            self.templates.push((template.to_owned(), Arc::clone(upstream)));
        }
    }

    /// The upstream serving `uri`: a listed resource, a template written exactly so
    /// (completion refs name templates), or a template the URI expands.
    pub(crate) fn resolve(&self, uri: &str) -> Option<Arc<str>> {
        if let Some(up) = self.resources.get(uri) {
            return Some(Arc::clone(up));
        }
        if let Some((_, up)) = self.templates.iter().find(|(t, _)| t == uri) {
            return Some(Arc::clone(up));
        }
        self.templates.iter().find(|(t, _)| uri_template::matches(t, uri)).map(|(_, up)| Arc::clone(up))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_resources_then_templates() {
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let mut c = ResourceCatalog::default();
        assert_eq!(c.learn_resource("demo://readme", &a), a);
        assert_eq!(c.learn_resource("demo://readme", &b), a, "the first upstream keeps a shared URI");
        c.learn_template("demo://echo/{text}", &b);
        assert_eq!(c.resolve("demo://readme").as_deref(), Some("a"));
        assert_eq!(c.resolve("demo://echo/hi").as_deref(), Some("b"));
        assert_eq!(c.resolve("demo://echo/{text}").as_deref(), Some("b"));
        assert_eq!(c.resolve("other://x"), None);
    }
}
