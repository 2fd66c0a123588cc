//! Authorisation: ordered rules decide which tools, prompts and resources a principal
//! may use (`authorization:` in the config).
//!
//! - A denied `tools/call`, `prompts/get`, `resources/read` or `resources/subscribe` is
//!   answered exactly as an unknown name ([`GatewayError::UnknownTool`],
//!   [`GatewayError::UnknownPrompt`], [`GatewayError::ResourceNotFound`]), so that the
//!   name's existence does not leak; it never reaches the router.
//! - The results of the four list methods lose the entries the principal may not use,
//!   on the way back, so routing stays unaware of authorisation.
//!
//! Every decision is logged at debug (target `seawall::policy`) with the index of the
//! rule that made it (`None`: the default).

mod filter;
mod rules;

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use crate::call::{GatewayError, Reply};
use crate::client::{ClientFuture, ClientRequest};
use crate::config::{AuthorizationConfig, Decision};
use crate::mcp::method;

use filter::{filter_list, list_shape};
use rules::{Kind, Rules};

/// Applies [`Authorize`] with the configured rules.
#[derive(Clone, Debug)]
pub(crate) struct AuthorizeLayer {
    rules: Arc<Rules>,
}

impl AuthorizeLayer {
    /// The layer enforcing `config`.
    pub(crate) fn new(config: &AuthorizationConfig) -> AuthorizeLayer {
        AuthorizeLayer { rules: Arc::new(Rules::new(config)) }
    }
}

impl<S> Layer<S> for AuthorizeLayer {
    type Service = Authorize<S>;
    fn layer(&self, inner: S) -> Authorize<S> {
        Authorize { inner, rules: Arc::clone(&self.rules) }
    }
}

/// Refuses requests for names the principal may not use and filters its lists.
#[derive(Clone, Debug)]
pub(crate) struct Authorize<S> {
    inner: S,
    rules: Arc<Rules>,
}

/// How a denied request of some kind is answered: as that kind of unknown name.
type Unknown = fn(String) -> GatewayError;

/// The name a request uses, its kind, and how a denial is answered.
fn target(req: &ClientRequest) -> Option<(Kind, String, Unknown)> {
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct Uri {
        uri: String,
    }
    let params = req.params.as_deref();
    match &*req.method {
        method::TOOLS_CALL => Some((Kind::Tool, req.tool.clone()?, GatewayError::UnknownTool)),
        method::PROMPTS_GET => {
            Some((Kind::Prompt, crate::jsonrpc::view::<Named>(params)?.name, GatewayError::UnknownPrompt))
        }
        method::RESOURCES_READ | method::RESOURCES_SUBSCRIBE => {
            Some((Kind::Resource, crate::jsonrpc::view::<Uri>(params)?.uri, GatewayError::ResourceNotFound))
        }
        _ => None,
    }
}

impl<S> Service<ClientRequest> for Authorize<S>
where
    S: Service<ClientRequest, Response = Reply, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = GatewayError;
    type Future = ClientFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ClientRequest) -> Self::Future {
        if self.rules.allows_everything() {
            return Box::pin(self.inner.call(req));
        }
        let principal = req.principal.clone();
        if let Some((kind, name, unknown)) = target(&req) {
            let verdict = self.rules.decide(principal.as_deref(), kind, &name);
            tracing::debug!(
                target: "seawall::policy",
                method = &*req.method,
                name = %name,
                principal = principal.as_deref().map(|p| p.label()),
                decision = ?verdict.decision,
                rule = ?verdict.rule,
                "authorisation"
            );
            if verdict.decision == Decision::Deny {
                return Box::pin(std::future::ready(Err(unknown(name))));
            }
        }
        let filter = list_shape(&req.method)
            .filter(|(_, _, kind)| self.rules.may_deny(principal.as_deref(), *kind))
            .map(|_| (Arc::clone(&self.rules), Arc::clone(&req.method)));
        let fut = self.inner.call(req);
        Box::pin(async move {
            let reply = fut.await?;
            let Some((rules, method)) = filter else {
                return Ok(reply);
            };
            Ok(reply.map(|result| filter_list(&rules, principal.as_deref(), &method, result)))
        })
    }
}

#[cfg(test)]
mod tests;
