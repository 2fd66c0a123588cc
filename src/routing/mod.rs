//! Routing: which upstream serves a request, and the fan-out and merge of list methods
//! on the aggregated endpoint.
//!
//! On `/mcp` tools and prompts are named `<upstream><sep><name>` (`names.rs`), resources
//! keep their URIs and are routed by what the session's list results taught its
//! [`ResourceCatalog`](crate::catalog::ResourceCatalog) (`resources.rs`), and list results
//! are merged under a gateway cursor that carries each upstream's own (`lists.rs`). On
//! `/mcp/<upstream>` everything is forwarded unchanged. Either way one request reaches
//! one upstream through `forward.rs`, over the session's link to it (`links.rs`), and a
//! tool or prompt the operator renamed, hid or gave arguments to is turned back into the
//! upstream's there (`overrides.rs`).

pub(crate) mod cursor;
mod duplicates;
mod forward;
mod links;
mod lists;
mod names;
mod overrides;
mod resources;

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::call::GatewayError;
use crate::client::{ClientFuture, ClientRequest, Routed};
use crate::jsonrpc;
use crate::mcp::method;
use crate::resilience::breaker::Breakers;
use crate::session::Scope;
use crate::upstream::registry::{UpstreamHandle, Upstreams};
use crate::validation::ArgumentCheck;
use lists::list_kind;

/// Routes requests to upstreams.
pub(crate) struct Router {
    upstreams: Arc<Upstreams>,
    separator: String,
    breakers: Arc<Breakers>,
    /// The check of `tools/call` arguments against the tool's input schema.
    arguments: ArgumentCheck,
    /// The last merged `tools/list` and `prompts/list` results.
    merged: lists::MergedLists,
    /// Resource URIs two upstreams list, warned about once.
    duplicates: duplicates::DuplicateUris,
}

/// The router as the innermost service of the client stack.
#[derive(Clone)]
pub(crate) struct Routes {
    router: Arc<Router>,
}

impl Routes {
    /// Routes with `router`.
    pub(crate) fn new(router: Arc<Router>) -> Routes {
        Routes { router }
    }
}

impl tower::Service<ClientRequest> for Routes {
    type Response = Routed;
    type Error = GatewayError;
    type Future = ClientFuture;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: ClientRequest) -> Self::Future {
        let router = Arc::clone(&self.router);
        Box::pin(async move {
            let params = req.params.take();
            let method = Arc::clone(&req.method);
            router.route(&req, &method, params).await
        })
    }
}

impl Router {
    /// A router over these upstreams; `validate_arguments` turns the argument check on.
    pub(crate) fn new(
        upstreams: Arc<Upstreams>,
        separator: String,
        breakers: Arc<Breakers>,
        validate_arguments: bool,
    ) -> Router {
        Router {
            upstreams,
            separator,
            breakers,
            arguments: ArgumentCheck::new(validate_arguments),
            merged: Default::default(),
            duplicates: Default::default(),
        }
    }

    /// The circuit breakers.
    pub(crate) fn breakers(&self) -> &Arc<Breakers> {
        &self.breakers
    }

    /// The upstreams.
    pub(crate) fn upstreams(&self) -> &Arc<Upstreams> {
        &self.upstreams
    }

    /// The tool name as a client of this scope sees it.
    pub(crate) fn client_name(&self, scope: &Scope, upstream: &str, name: &str) -> String {
        match scope {
            Scope::Aggregate => format!("{upstream}{}{name}", self.separator),
            Scope::Single(_) => name.to_owned(),
        }
    }

    /// Routes one request and returns the upstream's answer.
    pub(crate) async fn route(
        &self,
        ctx: &ClientRequest,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Routed, GatewayError> {
        if let Scope::Single(name) = &ctx.session.scope {
            let handle = self.handle(name)?;
            // The tool and arguments of a `tools/call` were read with its `_meta`.
            if method == method::TOOLS_CALL
                && let Some(tool) = &ctx.tool
            {
                let call = Some((Arc::clone(tool), ctx.arguments.clone()));
                return self.forward_call(ctx, handle, method, params, call).await;
            }
            return self.forward(ctx, handle, method, params).await;
        }
        if method == method::PING {
            return Ok(Routed::result(jsonrpc::to_raw(&json!({}))));
        }
        if let Some(kind) = list_kind(method) {
            return self.list(ctx, method, &kind, params).await;
        }
        match method {
            method::TOOLS_CALL => self.by_name(ctx, method, params, GatewayError::UnknownTool).await,
            method::PROMPTS_GET => self.by_name(ctx, method, params, GatewayError::UnknownPrompt).await,
            method::RESOURCES_READ | method::RESOURCES_SUBSCRIBE | method::RESOURCES_UNSUBSCRIBE => {
                self.by_uri(ctx, method, params).await
            }
            method::COMPLETION_COMPLETE => self.completion(ctx, params).await,
            method::LOGGING_SET_LEVEL => self.broadcast(ctx, method, params, "logging").await,
            _ => self.unknown_method(ctx, method, params).await,
        }
    }

    fn handle(&self, name: &str) -> Result<&Arc<UpstreamHandle>, GatewayError> {
        self.upstreams.get(name).ok_or_else(|| GatewayError::Internal(format!("no upstream named {name:?}")))
    }
}

/// Typed views of the params the router reads.
#[derive(serde::Deserialize)]
pub(super) struct NameParams {
    pub(super) name: String,
}

#[derive(serde::Deserialize)]
pub(super) struct UriParams {
    pub(super) uri: String,
}

/// The params of a `tools/call`, read once: its tool and arguments.
#[derive(serde::Deserialize)]
pub(super) struct CallParams {
    pub(super) name: String,
    #[serde(default)]
    pub(super) arguments: Option<Value>,
}
