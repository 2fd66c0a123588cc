//! Routing: which upstream serves a request, and the fan-out and merge of list methods
//! on the aggregated endpoint.
//!
//! On `/mcp` tools and prompts are named `<upstream><sep><name>`, resources keep their
//! URIs and are routed by what the session's list results taught the [`Catalog`], and
//! list results are merged under a gateway cursor that carries each upstream's own.
//! On `/mcp/<upstream>` everything is forwarded unchanged.

pub mod catalog;
pub mod cursor;
pub mod uri_template;

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tower::ServiceExt;

pub use catalog::Catalog;

use crate::call::{Answer, Clock, EventSink, GatewayError, Link, Reply, Tagged, UpstreamCall};
use crate::errors::Rewriter;
use crate::jsonrpc::{self, code};
use crate::mcp::init::InitParams;
use crate::mcp::{meta, method};
use crate::resilience::breaker::Breakers;
use crate::session::{Scope, Session, Slot};
use crate::telemetry::metrics;
use crate::upstream::registry::{UpstreamHandle, Upstreams};

/// What the router needs to know about the request it routes.
pub struct RequestCtx<'a> {
    /// The client session.
    pub session: &'a Arc<Session>,
    /// Where related upstream events go.
    pub related: &'a mpsc::Sender<Tagged>,
    /// The upstream-side progress token already written into the params, if any.
    pub progress: Option<&'a Value>,
    /// Fires when the client cancels the request.
    pub cancel: &'a tokio_util::sync::CancellationToken,
}

/// Routes requests to upstreams.
pub struct Router {
    upstreams: Arc<Upstreams>,
    separator: String,
    breakers: Arc<Breakers>,
    rewriter: Arc<Rewriter>,
}

/// The list methods and how their results are merged.
struct ListKind {
    /// The array in the result.
    key: &'static str,
    /// The server capability that must be declared.
    capability: &'static str,
    /// Whether item names get the upstream prefix.
    prefix: bool,
}

fn list_kind(method: &str) -> Option<ListKind> {
    Some(match method {
        method::TOOLS_LIST => ListKind { key: "tools", capability: "tools", prefix: true },
        method::PROMPTS_LIST => ListKind { key: "prompts", capability: "prompts", prefix: true },
        method::RESOURCES_LIST => ListKind { key: "resources", capability: "resources", prefix: false },
        method::RESOURCE_TEMPLATES_LIST => {
            ListKind { key: "resourceTemplates", capability: "resources", prefix: false }
        }
        _ => return None,
    })
}

impl Router {
    /// A router over these upstreams.
    pub fn new(
        upstreams: Arc<Upstreams>,
        separator: String,
        breakers: Arc<Breakers>,
        rewriter: Arc<Rewriter>,
    ) -> Router {
        Router { upstreams, separator, breakers, rewriter }
    }

    /// The error rewriter.
    pub fn rewriter(&self) -> &Arc<Rewriter> {
        &self.rewriter
    }

    /// The circuit breakers.
    pub fn breakers(&self) -> &Arc<Breakers> {
        &self.breakers
    }

    /// The upstreams.
    pub fn upstreams(&self) -> &Arc<Upstreams> {
        &self.upstreams
    }

    /// The tool name as a client of this scope sees it.
    pub fn client_name(&self, scope: &Scope, upstream: &str, name: &str) -> String {
        match scope {
            Scope::Aggregate => format!("{upstream}{}{name}", self.separator),
            Scope::Single(_) => name.to_owned(),
        }
    }

    /// Routes one request and returns the upstream's answer.
    pub async fn route(
        &self,
        ctx: &RequestCtx<'_>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Reply, GatewayError> {
        if let Scope::Single(name) = &ctx.session.scope {
            let handle = self.handle(name)?;
            return self.forward(ctx, handle, method, params).await;
        }
        if method == method::PING {
            return Ok(Ok(jsonrpc::to_raw(&json!({}))));
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

    /// The session's link to an upstream, connecting (again) if it is down.
    pub async fn link(&self, session: &Arc<Session>, handle: &UpstreamHandle) -> Result<Link, GatewayError> {
        if let Some(Slot::Up(link)) = session.slot(&handle.name) {
            return Ok(link);
        }
        let _serial = session.reconnect.lock().await;
        if let Some(Slot::Up(link)) = session.slot(&handle.name) {
            return Ok(link);
        }
        match handle.connect(&self.init_params(session, handle)).await {
            Ok(link) => {
                session.set_slot(&handle.name, Slot::Up(link.clone()));
                Ok(link)
            }
            Err(e) => {
                session.set_slot(&handle.name, Slot::Down(e.to_string()));
                Err(GatewayError::Unavailable { upstream: Arc::clone(&handle.name), reason: e.to_string() })
            }
        }
    }

    /// What the gateway declares when it opens an upstream session for this client session.
    pub fn init_params(&self, session: &Session, handle: &UpstreamHandle) -> InitParams {
        if handle.is_shared() {
            return InitParams::gateway_own();
        }
        InitParams {
            protocol_version: session.version.clone(),
            capabilities: session.client_capabilities.clone(),
            client_info: session.client_info.clone(),
        }
    }

    /// Sends one request to one upstream through its stack.
    async fn forward(
        &self,
        ctx: &RequestCtx<'_>,
        handle: &Arc<UpstreamHandle>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Reply, GatewayError> {
        let tool: Option<Arc<str>> = (method == method::TOOLS_CALL)
            .then(|| jsonrpc::view::<NameParams>(params.as_deref()).map(|p| Arc::from(p.name)))
            .flatten();
        let info = match tool.as_deref() {
            Some(t) => self.tool_info(ctx, handle, t).await,
            None => None,
        };
        // Tools are metric labels only once the upstream listed them (bounded cardinality).
        let tool_label = match (&tool, &info) {
            (Some(t), Some(_)) => t.to_string(),
            (Some(_), None) => "other".to_owned(),
            (None, _) => String::new(),
        };
        let timer = metrics::RequestTimer::start(&handle.name, method, tool_label);
        let client_tool = tool.as_deref().map(|t| self.client_name(&ctx.session.scope, &handle.name, t));
        let asked_uri = method
            .starts_with("resources/")
            .then(|| jsonrpc::view::<UriParams>(params.as_deref()).map(|p| p.uri))
            .flatten();
        if let Some(client_tool) = &client_tool {
            let arguments = jsonrpc::view::<ArgumentsParams>(params.as_deref()).and_then(|p| p.arguments);
            if let Err(answer) = self.rewriter.check_arguments(client_tool, info.as_deref(), arguments.as_ref()) {
                timer.finish("refused");
                return Ok(answer);
            }
        }
        let result = self.send(ctx, handle, method, params, tool).await;
        timer.finish(match &result {
            Ok(answer) => answer.outcome(),
            Err(e) => e.class().outcome,
        });
        let answer = match result? {
            Answer::Result { raw, .. } if method == method::TOOLS_LIST => {
                handle.policy.catalog.learn(&raw);
                Answer::result(self.without_open_tools(handle, raw))
            }
            other => other,
        };
        Ok(self.rewriter.upstream_reply(
            &handle.name,
            method,
            client_tool.as_deref(),
            asked_uri.as_deref(),
            info.as_deref(),
            answer,
        ))
    }

    /// Sends one request through the upstream's stack.
    async fn send(
        &self,
        ctx: &RequestCtx<'_>,
        handle: &Arc<UpstreamHandle>,
        method: &str,
        params: Option<Box<RawValue>>,
        tool: Option<Arc<str>>,
    ) -> Result<Answer, GatewayError> {
        let link = self.link(ctx.session, handle).await?;
        let req = UpstreamCall {
            upstream: Arc::clone(&handle.name),
            method: Arc::from(method),
            params: params.map(Arc::from),
            progress_token: ctx.progress.cloned(),
            idempotent: handle.policy.is_idempotent(method, tool.as_deref()),
            clock: Clock::new(handle.policy.timeout(method, tool.as_deref())),
            tool,
            events: EventSink::new(Arc::clone(&handle.name), ctx.related.clone()),
            target: link,
            avoid: Vec::new(),
            endpoint: None,
            attempt_deadline: None,
        };
        handle.service.clone().oneshot(req).await
    }

    /// What the gateway knows of a tool; a tool the catalog has not seen makes seawall
    /// list the upstream's tools itself first (at most once per refresh interval), so
    /// arguments are checked from the very first call.
    async fn tool_info(
        &self,
        ctx: &RequestCtx<'_>,
        handle: &Arc<UpstreamHandle>,
        tool: &str,
    ) -> Option<Arc<crate::upstream::settings::ToolInfo>> {
        if let Some(info) = handle.policy.catalog.get(tool) {
            return Some(info);
        }
        if !handle.policy.catalog.begin_refresh() {
            return None;
        }
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_CATALOG_PAGES {
            let params = cursor.as_ref().map(|c| jsonrpc::to_raw(&json!({ "cursor": c })));
            let Ok(Answer::Result { raw, .. }) = self.send(ctx, handle, method::TOOLS_LIST, params, None).await else {
                break;
            };
            handle.policy.catalog.learn(&raw);
            cursor = jsonrpc::view::<NextCursor>(Some(&raw)).and_then(|p| p.next_cursor);
            if cursor.is_none() {
                break;
            }
        }
        handle.policy.catalog.get(tool)
    }

    /// `tools/call`, `prompts/get`: the prefix of `params.name` names the upstream.
    async fn by_name(
        &self,
        ctx: &RequestCtx<'_>,
        method: &str,
        params: Option<Box<RawValue>>,
        unknown: fn(String) -> GatewayError,
    ) -> Result<Reply, GatewayError> {
        let mut map = meta::params_object(params.as_deref())
            .ok_or_else(|| GatewayError::InvalidParams("params must be an object".into()))?;
        let name = map
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| GatewayError::InvalidParams("params.name must be a string".into()))?
            .to_owned();
        let (handle, local) = self.split(&name).ok_or_else(|| unknown(name.clone()))?;
        map.insert("name".into(), Value::String(local.to_owned()));
        self.forward(ctx, handle, method, Some(jsonrpc::to_raw(&map))).await
    }

    /// Splits `<upstream><sep><name>`.
    fn split<'n>(&self, name: &'n str) -> Option<(&Arc<UpstreamHandle>, &'n str)> {
        let (prefix, local) = name.split_once(self.separator.as_str())?;
        Some((self.upstreams.get(prefix)?, local))
    }

    /// `resources/read`, `resources/subscribe`, `resources/unsubscribe`.
    async fn by_uri(
        &self,
        ctx: &RequestCtx<'_>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Reply, GatewayError> {
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

    async fn find_and_read(
        &self,
        ctx: &RequestCtx<'_>,
        method: &str,
        params: Option<Box<RawValue>>,
        uri: String,
    ) -> Result<Reply, GatewayError> {
        if let Some(handle) = self.resolve_uri(ctx, &uri).await {
            return self.forward(ctx, &handle, method, params).await;
        }
        // Not listed anywhere: ask every upstream with resources at once. The first
        // answer that is not "not found" wins; the lookup takes as long as the slowest
        // candidate's deadline at most, not the sum of them.
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
        let rank = |answer: &Result<Reply, GatewayError>| match answer {
            Err(GatewayError::Timeout { .. }) => 3,
            Err(_) => 2,
            Ok(_) => 1,
        };
        let mut failure: Option<Result<Reply, GatewayError>> = None;
        while let Some((handle, answer)) = futures::StreamExt::next(&mut asks).await {
            match answer {
                Ok(Ok(result)) => return Ok(Ok(result)),
                Ok(Err(error)) if is_not_found(&error) => {}
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
        failure.unwrap_or(Err(GatewayError::ResourceNotFound(uri)))
    }

    /// The upstream that serves a URI, learning templates on first need.
    async fn resolve_uri(&self, ctx: &RequestCtx<'_>, uri: &str) -> Option<Arc<UpstreamHandle>> {
        let resources = self.with_capability(ctx, "resources").await;
        if resources.len() == 1 {
            return resources.into_iter().next();
        }
        if let Some(name) = ctx.session.catalog.lock().resolve(uri) {
            return self.upstreams.get(&name).cloned();
        }
        let loaded = ctx.session.catalog.lock().templates_loaded;
        if !loaded {
            let kind = list_kind(method::RESOURCE_TEMPLATES_LIST)?;
            let _ = self.list(ctx, method::RESOURCE_TEMPLATES_LIST, &kind, None).await;
            ctx.session.catalog.lock().templates_loaded = true;
            let name = ctx.session.catalog.lock().resolve(uri)?;
            return self.upstreams.get(&name).cloned();
        }
        None
    }

    /// `completion/complete`: routed by its prompt or resource ref.
    async fn completion(&self, ctx: &RequestCtx<'_>, params: Option<Box<RawValue>>) -> Result<Reply, GatewayError> {
        let mut map = meta::params_object(params.as_deref())
            .ok_or_else(|| GatewayError::InvalidParams("params must be an object".into()))?;
        let Some(Value::Object(reference)) = map.get_mut("ref") else {
            return Err(GatewayError::InvalidParams("params.ref must be an object".into()));
        };
        match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                let (handle, local) = self.split(&name).ok_or(GatewayError::UnknownPrompt(name.clone()))?;
                let handle = Arc::clone(handle);
                reference.insert("name".into(), Value::String(local.to_owned()));
                self.forward(ctx, &handle, method::COMPLETION_COMPLETE, Some(jsonrpc::to_raw(&map))).await
            }
            Some("ref/resource") => {
                let uri = reference.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
                let handle = self.resolve_uri(ctx, &uri).await.ok_or(GatewayError::ResourceNotFound(uri))?;
                self.forward(ctx, &handle, method::COMPLETION_COMPLETE, params).await
            }
            _ => Err(GatewayError::InvalidParams("params.ref.type must be ref/prompt or ref/resource".into())),
        }
    }

    /// Sends a request to every upstream with a capability; `{}` if any accepted it.
    async fn broadcast(
        &self,
        ctx: &RequestCtx<'_>,
        method: &str,
        params: Option<Box<RawValue>>,
        capability: &str,
    ) -> Result<Reply, GatewayError> {
        let targets = self.with_capability(ctx, capability).await;
        let calls = targets.iter().map(|h| self.forward(ctx, h, method, params.clone()));
        let results = futures::future::join_all(calls).await;
        let mut first_failure = None;
        for result in results {
            match result {
                Ok(Ok(_)) => return Ok(Ok(jsonrpc::to_raw(&json!({})))),
                other => {
                    first_failure.get_or_insert(other);
                }
            }
        }
        first_failure.unwrap_or_else(|| Ok(Ok(jsonrpc::to_raw(&json!({})))))
    }

    /// A method the gateway does not know: route it by a prefixed `name`, by `uri`, or to
    /// the only upstream there is.
    async fn unknown_method(
        &self,
        ctx: &RequestCtx<'_>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Reply, GatewayError> {
        if let Some(p) = jsonrpc::view::<NameParams>(params.as_deref())
            && let Some((handle, _)) = self.split(&p.name)
        {
            let handle = Arc::clone(handle);
            return self.by_name_to(ctx, &handle, method, params).await;
        }
        if let Some(p) = jsonrpc::view::<UriParams>(params.as_deref())
            && let Some(handle) = self.resolve_uri(ctx, &p.uri).await
        {
            return self.forward(ctx, &handle, method, params).await;
        }
        if self.upstreams.len() == 1
            && let Some(handle) = self.upstreams.iter().next()
        {
            let handle = Arc::clone(handle);
            return self.forward(ctx, &handle, method, params).await;
        }
        Err(GatewayError::MethodNotFound(method.to_owned()))
    }

    async fn by_name_to(
        &self,
        ctx: &RequestCtx<'_>,
        handle: &Arc<UpstreamHandle>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Reply, GatewayError> {
        let mut map = meta::params_object(params.as_deref()).unwrap_or_default();
        if let Some(Value::String(name)) = map.get("name")
            && let Some((_, local)) = name.split_once(self.separator.as_str())
        {
            let local = local.to_owned();
            map.insert("name".into(), Value::String(local));
        }
        self.forward(ctx, handle, method, Some(jsonrpc::to_raw(&map))).await
    }

    /// The session's upstreams (connected, or connectable now) that declare a capability.
    async fn with_capability(&self, ctx: &RequestCtx<'_>, capability: &str) -> Vec<Arc<UpstreamHandle>> {
        let mut out = Vec::new();
        for handle in self.upstreams.iter() {
            let Ok(link) = self.link(ctx.session, handle).await else {
                continue;
            };
            if link.init_result().is_some_and(|init| init.has(capability)) {
                out.push(Arc::clone(handle));
            }
        }
        out
    }

    /// Fans a list method out to every upstream and merges the pages.
    async fn list(
        &self,
        ctx: &RequestCtx<'_>,
        method: &str,
        kind: &ListKind,
        params: Option<Box<RawValue>>,
    ) -> Result<Reply, GatewayError> {
        let mut base = meta::params_object(params.as_deref()).unwrap_or_default();
        let targets: Vec<(Arc<UpstreamHandle>, Option<String>)> = match base.remove("cursor") {
            None | Some(Value::Null) => {
                self.with_capability(ctx, kind.capability).await.into_iter().map(|h| (h, None)).collect()
            }
            Some(Value::String(c)) => {
                let cursors = cursor::decode(&c).ok_or_else(|| GatewayError::InvalidParams("invalid cursor".into()))?;
                let mut targets = Vec::new();
                for (name, upstream_cursor) in cursors {
                    let handle = self
                        .upstreams
                        .get(&name)
                        .ok_or_else(|| GatewayError::InvalidParams("invalid cursor".into()))?;
                    targets.push((Arc::clone(handle), Some(upstream_cursor)));
                }
                targets
            }
            Some(_) => {
                return Err(GatewayError::InvalidParams("cursor must be a string".into()));
            }
        };
        let calls = targets.iter().map(|(handle, upstream_cursor)| {
            let mut p = base.clone();
            if let Some(c) = upstream_cursor {
                p.insert("cursor".into(), Value::String(c.clone()));
            }
            let params = (!p.is_empty() || params.is_some()).then(|| jsonrpc::to_raw(&p));
            async move { (handle, self.forward(ctx, handle, method, params).await) }
        });
        let results = futures::future::join_all(calls).await;

        let mut items = Vec::new();
        let mut next = cursor::Cursors::new();
        let mut failures = Vec::new();
        let mut succeeded = 0usize;
        for (handle, result) in results {
            match result {
                Ok(Ok(result)) => {
                    succeeded += 1;
                    self.merge_page(ctx, handle, kind, &result, &mut items, &mut next);
                }
                Ok(Err(error)) => {
                    tracing::warn!(upstream = %handle.name, method, error = %error.get(), "upstream refused a list request");
                    failures.push(Ok(Err(error)));
                }
                Err(e) => {
                    tracing::warn!(upstream = %handle.name, method, error = %e, "list request failed");
                    failures.push(Err(e));
                }
            }
        }
        if succeeded == 0
            && let Some(failure) = failures.into_iter().next()
        {
            return failure;
        }
        let mut result = Map::new();
        result.insert(kind.key.into(), Value::Array(items));
        if !next.is_empty() {
            result.insert("nextCursor".into(), Value::String(cursor::encode(&next)));
        }
        Ok(Ok(jsonrpc::to_raw(&result)))
    }

    fn merge_page(
        &self,
        ctx: &RequestCtx<'_>,
        handle: &UpstreamHandle,
        kind: &ListKind,
        result: &RawValue,
        items: &mut Vec<Value>,
        next: &mut cursor::Cursors,
    ) {
        let Ok(Value::Object(mut page)) = serde_json::from_str::<Value>(result.get()) else {
            tracing::warn!(upstream = %handle.name, "list result is not an object");
            return;
        };
        if let Some(Value::String(c)) = page.remove("nextCursor") {
            next.insert(handle.name.to_string(), c);
        }
        let Some(Value::Array(entries)) = page.remove(kind.key) else {
            return;
        };
        let mut catalog = ctx.session.catalog.lock();
        for mut entry in entries {
            let Value::Object(obj) = &mut entry else {
                continue;
            };
            if kind.prefix {
                let Some(Value::String(name)) = obj.get("name") else {
                    continue;
                };
                let prefixed = format!("{}{}{name}", handle.name, self.separator);
                obj.insert("name".into(), Value::String(prefixed));
            }
            match kind.key {
                "resources" => {
                    if let Some(Value::String(uri)) = obj.get("uri") {
                        let owner = catalog.learn_resource(uri, &handle.name);
                        if owner != handle.name {
                            tracing::warn!(
                                upstream = %handle.name,
                                served_by = %owner,
                                uri = %crate::sanitize::ident(uri),
                                "two upstreams list the same resource URI; it is listed and read from the first"
                            );
                            continue;
                        }
                    }
                }
                "resourceTemplates" => {
                    if let Some(Value::String(t)) = obj.get("uriTemplate") {
                        catalog.learn_template(t, &handle.name);
                    }
                }
                _ => {}
            }
            items.push(entry);
        }
        if kind.key == "resourceTemplates" && next.is_empty() {
            catalog.templates_loaded = true;
        }
    }
}

impl Router {
    /// With `hide_open_tools`, drops tools whose breaker is open from a `tools/list` page.
    fn without_open_tools(&self, handle: &UpstreamHandle, result: Box<RawValue>) -> Box<RawValue> {
        if !handle.policy.breaker.hide_open_tools {
            return result;
        }
        let Ok(Value::Object(mut page)) = serde_json::from_str::<Value>(result.get()) else { return result };
        let Some(Value::Array(tools)) = page.get_mut("tools") else { return result };
        let before = tools.len();
        tools.retain(|t| !t["name"].as_str().is_some_and(|name| self.breakers.is_open(&handle.name, Some(name))));
        if tools.len() == before {
            return result;
        }
        jsonrpc::to_raw(&page)
    }
}

/// Most `tools/list` pages read when seawall lists an upstream's tools itself.
const MAX_CATALOG_PAGES: usize = 16;

#[derive(serde::Deserialize)]
struct NextCursor {
    #[serde(rename = "nextCursor", default)]
    next_cursor: Option<String>,
}

#[derive(serde::Deserialize)]
struct NameParams {
    name: String,
}

#[derive(serde::Deserialize)]
struct ArgumentsParams {
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(serde::Deserialize)]
struct UriParams {
    uri: String,
}

/// Whether an upstream error says "no such resource".
fn is_not_found(error: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    serde_json::from_str::<Code>(error.get())
        .is_ok_and(|c| c.code == code::RESOURCE_NOT_FOUND || c.code == code::INVALID_PARAMS)
}
