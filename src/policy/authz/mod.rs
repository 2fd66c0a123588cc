//! Authorisation: ordered rules decide which tools, prompts and resources a principal
//! may use (`authorization:` in the config).
//!
//! - A denied `tools/call`, `prompts/get`, `resources/read`, `resources/subscribe`,
//!   `resources/unsubscribe` or `completion/complete` is answered exactly as an unknown
//!   name ([`GatewayError::UnknownTool`], [`GatewayError::UnknownPrompt`],
//!   [`GatewayError::ResourceNotFound`]), and a denied other method as an unknown
//!   method, so that the name's existence does not leak; it never reaches the router.
//! - A rule's `upstreams` patterns speak of everything an upstream serves: on `/mcp`
//!   tools and prompts belong to the upstream their prefix names and resources to the
//!   upstream the session's lists attribute them to (a resource of unknown owner is
//!   denied by every `upstreams` deny pattern that applies, and allowed by none).
//! - A rule's `when` condition (CEL) is evaluated with the principal, the name, the
//!   upstream and the call's arguments.
//! - The results of the four list methods lose the entries the principal may not use,
//!   on the way back, so routing stays unaware of authorisation.
//!
//! Every decision is logged at debug (target `seawall::policy`) with the index of the
//! rule that made it (`None`: the default).

mod filter;
mod rules;

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::Either;
use serde::Deserialize;
use serde_json::Value;
use tower::{Layer, Service};

use crate::call::GatewayError;
use crate::client::{ClientFuture, ClientRequest, Routed};
use crate::config::{AuthorizationConfig, Decision};
use crate::mcp::method;
use crate::session::Scope;

use filter::{Lister, filter_list, list_shape};
use rules::{Kind, Rules, Target};

/// Applies [`Authorize`] with the configured rules.
#[derive(Clone, Debug)]
pub(crate) struct AuthorizeLayer {
    rules: Arc<Rules>,
    separator: Arc<str>,
}

impl AuthorizeLayer {
    /// The layer enforcing `config`; `separator` joins upstream and name on `/mcp`.
    pub(crate) fn new(config: &AuthorizationConfig, separator: &str) -> AuthorizeLayer {
        AuthorizeLayer { rules: Arc::new(Rules::new(config)), separator: Arc::from(separator) }
    }
}

impl<S> Layer<S> for AuthorizeLayer {
    type Service = Authorize<S>;
    fn layer(&self, inner: S) -> Authorize<S> {
        Authorize { inner, rules: Arc::clone(&self.rules), separator: Arc::clone(&self.separator) }
    }
}

/// Refuses requests for names the principal may not use and filters its lists.
#[derive(Clone, Debug)]
pub(crate) struct Authorize<S> {
    inner: S,
    rules: Arc<Rules>,
    separator: Arc<str>,
}

/// How a denied request of some kind is answered: as that kind of unknown name.
type Unknown = fn(String) -> GatewayError;

/// What a request asks for, owned: the name, its kind, its upstream when known, the
/// call's arguments, and how a denial is answered.
struct Asked {
    kind: Kind,
    name: String,
    upstream: Option<Arc<str>>,
    args: Value,
    unknown: Unknown,
}

impl Asked {
    fn target<'a>(&'a self, method: &'a str) -> Target<'a> {
        Target { kind: self.kind, name: &self.name, upstream: self.upstream.as_deref(), method, args: Some(&self.args) }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Params {
    name: Option<String>,
    uri: Option<String>,
    arguments: Option<Value>,
    #[serde(rename = "ref")]
    reference: Option<Ref>,
}

#[derive(Deserialize)]
struct Ref {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
    uri: Option<String>,
}

/// Methods the gateway answers itself or fans out, and list methods (filtered on the way
/// back): no decision is made on the request.
fn undecided(method: &str) -> bool {
    list_shape(method).is_some()
        || matches!(method, method::PING | method::INITIALIZE | method::LOGGING_SET_LEVEL)
        || method.starts_with("notifications/")
}

impl<S> Authorize<S> {
    /// What `req` asks for, or `None` when no decision is made on it.
    fn asked(&self, req: &ClientRequest) -> Option<Asked> {
        let method = &*req.method;
        if undecided(method) {
            return None;
        }
        let params = crate::jsonrpc::view::<Params>(req.params.as_deref()).unwrap_or_default();
        let args = || params.arguments.clone().unwrap_or_else(|| Value::Object(Default::default()));
        let (kind, name, unknown): (Kind, String, Unknown) = match method {
            method::TOOLS_CALL => (Kind::Tool, req.tool.as_deref()?.to_owned(), GatewayError::UnknownTool),
            method::PROMPTS_GET => (Kind::Prompt, params.name.clone()?, GatewayError::UnknownPrompt),
            method::RESOURCES_READ | method::RESOURCES_SUBSCRIBE | method::RESOURCES_UNSUBSCRIBE => {
                (Kind::Resource, params.uri.clone()?, GatewayError::ResourceNotFound)
            }
            method::COMPLETION_COMPLETE => match params.reference.as_ref()? {
                Ref { kind, name: Some(name), .. } if kind == "ref/prompt" => {
                    (Kind::Prompt, name.clone(), GatewayError::UnknownPrompt)
                }
                Ref { kind, uri: Some(uri), .. } if kind == "ref/resource" => {
                    (Kind::Resource, uri.clone(), GatewayError::ResourceNotFound)
                }
                _ => return None,
            },
            _ => (Kind::Other, method.to_owned(), GatewayError::MethodNotFound),
        };
        let upstream = match &req.session.scope {
            Scope::Single(upstream) => Some(Arc::clone(upstream)),
            Scope::Aggregate => match kind {
                Kind::Tool | Kind::Prompt => self.prefix(&name),
                Kind::Resource => req.session.resources.lock().resolve(&name),
                Kind::Other => params
                    .name
                    .as_deref()
                    .and_then(|n| self.prefix(n))
                    .or_else(|| params.uri.as_deref().and_then(|u| req.session.resources.lock().resolve(u))),
            },
        };
        let args = if kind == Kind::Tool || kind == Kind::Prompt { args() } else { Value::Object(Default::default()) };
        Some(Asked { kind, name, upstream, args, unknown })
    }

    /// The upstream part of a `/mcp` name.
    fn prefix(&self, name: &str) -> Option<Arc<str>> {
        name.split_once(&*self.separator).map(|(upstream, _)| Arc::from(upstream))
    }
}

impl<S> Service<ClientRequest> for Authorize<S>
where
    S: Service<ClientRequest, Response = Routed, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Routed;
    type Error = GatewayError;
    type Future = Either<S::Future, ClientFuture>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ClientRequest) -> Self::Future {
        if self.rules.allows_everything() {
            return Either::Left(self.inner.call(req));
        }
        let principal = req.principal.clone();
        if let Some(asked) = self.asked(&req) {
            let verdict = self.rules.decide(principal.as_deref(), &asked.target(&req.method));
            tracing::debug!(
                target: "seawall::policy",
                method = &*req.method,
                name = %asked.name,
                upstream = asked.upstream.as_deref(),
                principal = principal.as_deref().map(|p| p.label()),
                decision = ?verdict.decision,
                rule = ?verdict.rule,
                "authorisation"
            );
            if verdict.decision == Decision::Deny {
                let answer = Box::new((asked.unknown)(asked.name));
                return Either::Right(Box::pin(std::future::ready(Err(GatewayError::Denied { answer }))));
            }
        }
        let filter = list_shape(&req.method)
            .filter(|(_, _, kind)| self.rules.may_deny(principal.as_deref(), *kind))
            .map(|_| Lister {
                rules: Arc::clone(&self.rules),
                method: Arc::clone(&req.method),
                session: Arc::clone(&req.session),
                separator: Arc::clone(&self.separator),
            });
        let Some(lister) = filter else { return Either::Left(self.inner.call(req)) };
        let fut = self.inner.call(req);
        Either::Right(Box::pin(async move {
            let reply = fut.await?;
            Ok(reply.map_result(|result| filter_list(&lister, principal.as_deref(), result)))
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::config::{AuthzRuleConfig, PatternsConfig};
    use crate::identity::Principal;
    use crate::jsonrpc::Id;
    use crate::session::{Scope, Session};

    fn request(method: &str, params: serde_json::Value, principal: Option<&str>) -> ClientRequest {
        let (tx, _rx) = crate::call::events(1);
        let session = Session::new(Scope::Aggregate, "2025-11-25".into(), json!({}), json!({}));
        let mut req =
            ClientRequest::new(session, Id::number(1), method, Some(crate::jsonrpc::to_raw(&params)), None, tx);
        req.principal = principal.map(|name| Arc::new(Principal::api_key(name)));
        req
    }

    fn layer() -> AuthorizeLayer {
        let only = |tools: &[&str]| PatternsConfig {
            tools: tools.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        };
        AuthorizeLayer::new(
            &AuthorizationConfig {
                default: Decision::Allow,
                rules: vec![
                    AuthzRuleConfig {
                        principals: vec!["ci".into()],
                        allow: Some(only(&["demo__echo"])),
                        deny: None,
                        when: None,
                    },
                    AuthzRuleConfig {
                        principals: vec!["ci".into(), "anonymous".into()],
                        allow: None,
                        deny: Some(PatternsConfig {
                            tools: vec!["*".into()],
                            prompts: vec!["*".into()],
                            resources: vec!["secret://*".into()],
                            ..Default::default()
                        }),
                        when: None,
                    },
                ],
            },
            "__",
        )
    }

    /// An inner service that records the methods it sees and answers `answer`.
    fn inner(
        seen: Arc<Mutex<Vec<String>>>,
        answer: serde_json::Value,
    ) -> impl Service<ClientRequest, Response = Routed, Error = GatewayError, Future: Send + 'static> + Clone {
        service_fn(move |req: ClientRequest| {
            seen.lock().unwrap().push(req.method.to_string());
            let answer = crate::jsonrpc::to_raw(&answer);
            async move { Ok::<Routed, GatewayError>(Routed::result(answer)) }
        })
    }

    #[tokio::test]
    async fn a_denied_call_is_an_unknown_name_and_never_reaches_the_router() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let svc = layer().layer(inner(Arc::clone(&seen), json!({"content": []})));
        let call = |name: &str, who| request("tools/call", json!({"name": name, "arguments": {}}), who);
        // A denial is counted as one and answered as the unknown name it stands for.
        let answer = |err: GatewayError| match err {
            GatewayError::Denied { answer } => *answer,
            other => panic!("not a denial: {other}"),
        };
        let err = answer(svc.clone().oneshot(call("demo__add", Some("ci"))).await.unwrap_err());
        assert!(matches!(&err, GatewayError::UnknownTool(t) if t == "demo__add"));
        let err = answer(
            svc.clone().oneshot(request("prompts/get", json!({"name": "demo__greet"}), None)).await.unwrap_err(),
        );
        assert!(matches!(&err, GatewayError::UnknownPrompt(p) if p == "demo__greet"));
        let read = request("resources/read", json!({"uri": "secret://x"}), Some("ci"));
        let err = answer(svc.clone().oneshot(read).await.unwrap_err());
        assert!(matches!(&err, GatewayError::ResourceNotFound(u) if u == "secret://x"));
        assert!(seen.lock().unwrap().is_empty(), "no denied request reached the inner service");
        assert!(svc.clone().oneshot(call("demo__echo", Some("ci"))).await.unwrap().as_result().is_some());
        assert!(svc.clone().oneshot(call("demo__add", Some("other"))).await.unwrap().as_result().is_some());
        assert_eq!(*seen.lock().unwrap(), ["tools/call", "tools/call"]);
    }

    #[tokio::test]
    async fn lists_are_filtered_only_for_principals_with_a_deny_in_effect() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let tools = json!({"tools": [{"name": "demo__echo"}, {"name": "demo__add"}], "nextCursor": "n"});
        let svc = layer().layer(inner(Arc::clone(&seen), tools.clone()));
        let list = |who| request("tools/list", json!({}), who);
        let reply = svc.clone().oneshot(list(Some("ci"))).await.unwrap();
        let got: serde_json::Value = serde_json::from_str(reply.as_result().unwrap().get()).unwrap();
        assert_eq!(got, json!({"tools": [{"name": "demo__echo"}], "nextCursor": "n"}));
        let reply = svc.clone().oneshot(list(Some("other"))).await.unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(reply.as_result().unwrap().get()).unwrap(), tools);
    }
}
