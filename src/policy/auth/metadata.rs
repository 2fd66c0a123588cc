//! OAuth 2.0 Protected Resource Metadata (RFC 9728): the document that tells an MCP
//! client which authorization servers issue tokens for seawall, and where it lives.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::config::ResourceMetadataConfig;

/// The well-known path prefix of the document.
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The configured document, and the URLs derived from it.
#[derive(Debug)]
pub(crate) struct Metadata {
    config: ResourceMetadataConfig,
    /// `scheme://authority` of the resource.
    origin: String,
    /// The resource's path, without a trailing `/` (`/mcp` for `https://gw/mcp`).
    path: String,
}

impl Metadata {
    /// The document for `config`, whose `resource` `check-config` has validated.
    pub(crate) fn new(config: &ResourceMetadataConfig) -> Metadata {
        let resource = config.resource.trim_end_matches('/');
        let (origin, path) = match resource.find("://").map(|i| i + 3) {
            Some(start) => match resource[start..].find('/') {
                Some(slash) => resource.split_at(start + slash),
                None => (resource, ""),
            },
            None => (resource, ""),
        };
        let path = path.split('?').next().unwrap_or("");
        Metadata { config: config.clone(), origin: origin.to_owned(), path: path.to_owned() }
    }

    /// The document's URL for a request to `request_path` (`/mcp` or `/mcp/<upstream>`):
    /// the well-known prefix inserted between the resource's origin and its path.
    pub(crate) fn url_for(&self, request_path: &str) -> String {
        format!("{}{WELL_KNOWN}{}{}", self.origin, self.path, upstream_suffix(request_path))
    }

    /// The document describing the resource reached at `<resource><suffix>`.
    fn document(&self, suffix: &str) -> Value {
        let resource = format!("{}{suffix}", self.config.resource.trim_end_matches('/'));
        let mut doc = json!({
            "resource": resource,
            "authorization_servers": self.config.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !self.config.scopes_supported.is_empty()
            && let Some(map) = doc.as_object_mut()
        {
            map.insert("scopes_supported".into(), json!(self.config.scopes_supported));
        }
        doc
    }
}

/// `""` for `/mcp`, `"/<upstream>"` for `/mcp/<upstream>`.
fn upstream_suffix(request_path: &str) -> &str {
    match request_path.strip_prefix("/mcp") {
        Some(rest) if rest.starts_with('/') && rest.len() > 1 => rest.trim_end_matches('/'),
        _ => "",
    }
}

#[derive(Clone)]
struct Served {
    metadata: Arc<Metadata>,
    upstreams: Arc<HashSet<String>>,
}

/// The unauthenticated routes serving the document: for `/mcp` (also at the bare
/// well-known path) and for each `/mcp/<upstream>`.
pub(crate) fn router(metadata: Arc<Metadata>, upstreams: HashSet<String>) -> Router {
    let served = Served { metadata, upstreams: Arc::new(upstreams) };
    Router::new()
        .route(WELL_KNOWN, get(aggregate))
        .route(&format!("{WELL_KNOWN}/mcp"), get(aggregate))
        .route(&format!("{WELL_KNOWN}/mcp/{{upstream}}"), get(single))
        .with_state(served)
}

async fn aggregate(State(served): State<Served>) -> Response {
    json_document(&served.metadata.document(""))
}

async fn single(State(served): State<Served>, Path(upstream): Path<String>) -> Response {
    if !served.upstreams.contains(&upstream) {
        return StatusCode::NOT_FOUND.into_response();
    }
    json_document(&served.metadata.document(&format!("/{upstream}")))
}

fn json_document(doc: &Value) -> Response {
    let mut resp = doc.to_string().into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(resource: &str) -> Metadata {
        Metadata::new(&ResourceMetadataConfig {
            resource: resource.into(),
            authorization_servers: vec!["https://idp.example".into()],
            scopes_supported: vec![],
        })
    }

    #[test]
    fn document_url_inserts_the_well_known_prefix() {
        let m = meta("https://gw.example/mcp");
        assert_eq!(m.url_for("/mcp"), "https://gw.example/.well-known/oauth-protected-resource/mcp");
        assert_eq!(m.url_for("/mcp/github"), "https://gw.example/.well-known/oauth-protected-resource/mcp/github");
        let bare = meta("https://gw.example:8443/");
        assert_eq!(bare.url_for("/mcp"), "https://gw.example:8443/.well-known/oauth-protected-resource");
    }

    #[test]
    fn document_names_the_resource_reached() {
        let m = meta("https://gw.example/mcp");
        assert_eq!(m.document("/github")["resource"], "https://gw.example/mcp/github");
        assert_eq!(m.document("")["authorization_servers"], json!(["https://idp.example"]));
        assert!(m.document("").get("scopes_supported").is_none());
    }
}
