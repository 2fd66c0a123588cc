//! Requests routed by resource URI: listed URIs and templates first, then every upstream
//! with resources at once, under one deadline.

use std::sync::Arc;

use serde_json::value::RawValue;

use super::lists::list_kind;
use super::{Router, UriParams};
use crate::call::GatewayError;
use crate::client::ClientRequest;
use crate::client::Routed;
use crate::jsonrpc::{self, code};
use crate::mcp::method;
use crate::upstream::registry::UpstreamHandle;

/// Whether an upstream error says "no such resource".
pub(super) fn is_not_found(error: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    serde_json::from_str::<Code>(error.get())
        .is_ok_and(|c| c.code == code::RESOURCE_NOT_FOUND || c.code == code::INVALID_PARAMS)
}

impl Router {
    /// `resources/read`, `resources/subscribe`, `resources/unsubscribe`.
    pub(super) async fn by_uri(
        &self,
        ctx: &ClientRequest,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Routed, GatewayError> {
        let uri = jsonrpc::view::<UriParams>(params.as_deref())
            .ok_or_else(|| GatewayError::InvalidParams("params.uri must be a string".into()))?
            .uri;
        // One deadline for the whole lookup, however many upstreams it asks: the longest
        // any one of them would be given.
        let limit = self.upstreams.iter().map(|h| h.policy.timeout(method, None)).max().unwrap_or_default();
        match tokio::time::timeout(limit, self.find_and_read(ctx, method, params, uri)).await {
            Ok(answer) => answer,
            Err(_) => Err(GatewayError::Timeout { upstream: Arc::from("resource lookup"), after: limit }),
        }
    }

    pub(super) async fn find_and_read(
        &self,
        ctx: &ClientRequest,
        method: &str,
        params: Option<Box<RawValue>>,
        uri: String,
    ) -> Result<Routed, GatewayError> {
        if let Some(handle) = self.resolve_uri(ctx, &uri).await {
            return self.forward(ctx, &handle, method, params).await;
        }
        // Not listed anywhere: ask every upstream with resources at once. For a read,
        // the first answer that is not "not found" wins; a subscription (or its end) is
        // made with every upstream that has the URI, each asked to the end, so which one
        // answers first never decides which one sends the updates. The lookup takes as
        // long as the slowest candidate's deadline at most, not the sum of them.
        let every = method != method::RESOURCES_READ;
        let mut done = None;
        let candidates = self.with_capability(ctx, "resources").await;
        let mut asks: futures::stream::FuturesUnordered<_> = candidates
            .iter()
            .map(|handle| {
                let params = params.clone();
                async move { (handle, self.forward(ctx, handle, method, params).await) }
            })
            .collect();
        // What to answer when nobody has it: a timeout (the resource may exist) before
        // any other failure, before an upstream's error answer, before "not found".
        let rank = |answer: &Result<Routed, GatewayError>| match answer {
            Err(GatewayError::Timeout { .. }) => 3,
            Err(_) => 2,
            Ok(_) => 1,
        };
        let mut failure: Option<Result<Routed, GatewayError>> = None;
        while let Some((handle, answer)) = futures::StreamExt::next(&mut asks).await {
            match answer {
                Ok(result) if every && result.as_result().is_some() => {
                    done.get_or_insert(result);
                }
                Ok(result) if result.as_result().is_some() => return Ok(result),
                Ok(error) if error.as_error().is_some_and(is_not_found) => {}
                other => {
                    if let Err(e) = &other {
                        tracing::debug!(upstream = %handle.name, error = %e, "resource lookup failed");
                    }
                    if failure.as_ref().is_none_or(|f| rank(&other) > rank(f)) {
                        failure = Some(other);
                    }
                }
            }
        }
        if let Some(result) = done {
            return Ok(result);
        }
        failure.unwrap_or(Err(GatewayError::ResourceNotFound(uri)))
    }

    /// The upstream that serves a URI, learning templates on first need.
    pub(super) async fn resolve_uri(&self, ctx: &ClientRequest, uri: &str) -> Option<Arc<UpstreamHandle>> {
        let resources = self.with_capability(ctx, "resources").await;
        if resources.len() == 1 {
            return resources.into_iter().next();
        }
        if let Some(name) = ctx.session.resources.lock().resolve(uri) {
            return self.upstreams.get(&name).cloned();
        }
        let loaded = ctx.session.resources.lock().templates_loaded;
        if !loaded {
            let kind = list_kind(method::RESOURCE_TEMPLATES_LIST)?;
            let _ = self.list(ctx, method::RESOURCE_TEMPLATES_LIST, &kind, None).await;
            ctx.session.resources.lock().templates_loaded = true;
            let name = ctx.session.resources.lock().resolve(uri)?;
            return self.upstreams.get(&name).cloned();
        }
        None
    }
}
