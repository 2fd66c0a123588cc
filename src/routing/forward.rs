//! Forwarding one request to one upstream: the tool's catalog entry, the per-upstream
//! request metric, the argument check, the `Mcp-Param-*` headers, the upstream's stack,
//! and what a `tools/list` teaches the catalog. Its answer is rewritten above, once.

use std::sync::Arc;

use serde_json::json;
use serde_json::value::RawValue;

use super::overrides::shape_call;
use super::{CallParams, Router, UriParams};
use crate::call::{Answer, ArgumentViolation, CallTrace, Clock, EventSink, GatewayError, UpstreamCall};
use crate::client::{ClientRequest, FromUpstream, Routed};
use crate::jsonrpc;
use crate::mcp::{method, modern};
use crate::telemetry::metrics;
use crate::upstream::registry::UpstreamHandle;

/// The `Mcp-Param-*` headers of a `tools/call` towards the upstream: the `arguments` it
/// is sent that the tool's schema annotates with `x-mcp-header`, mirrored, and a modern
/// client's undeclared `Mcp-Param-*` headers, forwarded. A modern client's declared ones
/// must match the arguments it `sent` (`Err`: the -32020 message); those the gateway
/// sets are not the client's to declare.
fn param_headers(
    ctx: &ClientRequest,
    info: Option<&crate::catalog::ToolInfo>,
    sent: Option<&serde_json::Value>,
    arguments: Option<&serde_json::Value>,
) -> Result<Vec<(String, String)>, String> {
    // Only a schema that marks arguments is walked for them.
    let schema = info.filter(|i| i.mirrors_headers).and_then(|i| i.input_schema.as_deref());
    let empty = json!({});
    let mut out = schema.map(|s| modern::param_headers(s, arguments.unwrap_or(&empty))).unwrap_or_default();
    if let Some(declared) = &ctx.param_headers {
        if let Some(schema) = schema {
            modern::check_param_headers(schema, sent.unwrap_or(&empty), declared)?;
        }
        for (name, value) in declared.iter() {
            if !out.iter().any(|(n, _)| n == name) {
                out.push((name.clone(), value.clone()));
            }
        }
    }
    Ok(out)
}

/// Tools are metric labels only once the upstream listed them (bounded cardinality).
fn tool_label(tool: Option<&Arc<str>>, listed: bool) -> metrics::ToolLabel {
    match tool {
        Some(t) if listed => metrics::ToolLabel::Listed(Arc::clone(t)),
        Some(_) => metrics::ToolLabel::Unlisted,
        None => metrics::ToolLabel::None,
    }
}

/// Most `tools/list` pages read when seawall lists an upstream's tools itself.
pub(super) const MAX_CATALOG_PAGES: usize = 16;

#[derive(serde::Deserialize)]
pub(super) struct NextCursor {
    #[serde(rename = "nextCursor", default)]
    next_cursor: Option<String>,
}

impl Router {
    /// Sends one request to one upstream: [`Router::forward_call`], with the tool and
    /// arguments of a `tools/call` read from `params`.
    pub(super) async fn forward(
        &self,
        ctx: &ClientRequest,
        handle: &Arc<UpstreamHandle>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Routed, GatewayError> {
        let call = (method == method::TOOLS_CALL)
            .then(|| jsonrpc::view::<CallParams>(params.as_deref()))
            .flatten()
            .map(|call| (Arc::from(call.name), call.arguments.map(Arc::new)));
        self.forward_call(ctx, handle, method, params, call).await
    }

    /// One request to one upstream, in the steps `app.rs` lists under "forward": the
    /// tool's entry in the catalog, the per-upstream request metric around the rest, the
    /// arguments against the tool's input schema, the `Mcp-Param-*` headers, the
    /// upstream's own stack, and what a `tools/list` teaches the catalog. The answer goes
    /// back as the upstream sent it, with what the rewrite layer needs to rewrite it.
    pub(super) async fn forward_call(
        &self,
        ctx: &ClientRequest,
        handle: &Arc<UpstreamHandle>,
        method: &str,
        params: Option<Box<RawValue>>,
        call: Option<(Arc<str>, Option<Arc<serde_json::Value>>)>,
    ) -> Result<Routed, GatewayError> {
        // A prompt the operator renamed or hid (only an upstream with such overrides looks).
        let params = match &handle.policy.prompt_overrides {
            Some(overrides) if method == method::PROMPTS_GET || method == method::COMPLETION_COMPLETE => {
                self.shape_prompt_request(ctx, handle, overrides, method, params.as_deref())?.or(params)
            }
            _ => params,
        };
        // The tool as the client named it (unprefixed), and the arguments it sent.
        let (named, sent): (Option<Arc<str>>, _) = match call {
            Some((name, arguments)) => (Some(name), arguments),
            None => (None, None),
        };
        let client_tool = named.as_deref().map(|t| self.client_name(&ctx.session.scope, &handle.name, t));
        // Only an upstream with overrides looks the tool up among them.
        let shaped = match (&handle.policy.tool_overrides, named.as_deref(), client_tool.as_deref()) {
            (Some(overrides), Some(name), Some(client)) => {
                shape_call(ctx, overrides, name, client, sent.as_deref(), params.as_deref())?
            }
            _ => None,
        };
        // From here on the tool is the upstream's, and the arguments those it is sent.
        let (tool, params, shaped_arguments) = match shaped {
            Some(call) => (Some(call.tool), Some(call.params), call.arguments),
            None => (named, params, None),
        };
        let arguments = shaped_arguments.as_deref().or(sent.as_deref());
        let info = match tool.as_deref() {
            Some(t) => self.tool_info(ctx, handle, t).await,
            None => None,
        };
        let timer = metrics::RequestTimer::start(&handle.name, method, tool_label(tool.as_ref(), info.is_some()));
        let mut headers: Vec<(String, String)> = Vec::new();
        if let Some(client_tool) = &client_tool {
            if let Err(refused) = self.check_arguments(client_tool, info.as_deref(), arguments) {
                timer.finish("refused");
                return Err(refused);
            }
            match param_headers(ctx, info.as_deref(), sent.as_deref(), arguments) {
                Ok(mirrored) => headers = mirrored,
                Err(why) => {
                    timer.finish("refused");
                    return Ok(Routed::Made(Err(jsonrpc::error_object(modern::HEADER_MISMATCH, &why, None))));
                }
            }
        }
        let uri = method
            .starts_with("resources/")
            .then(|| jsonrpc::view::<UriParams>(params.as_deref()).map(|p| p.uri))
            .flatten();
        let result = self.send_with(ctx, handle, method, params, tool, headers).await;
        timer.finish(match &result {
            Ok(answer) => answer.outcome(),
            Err(e) => e.class().outcome,
        });
        let answer = self.learn(handle, method, result?);
        Ok(Routed::Upstream(Box::new(FromUpstream {
            answer,
            upstream: Arc::clone(&handle.name),
            level: handle.policy.sanitize,
            tool: client_tool,
            info,
            arguments: sent,
            uri,
        })))
    }

    /// The arguments of a `tools/call` against the tool's input schema; `Err` refuses
    /// the call before it is sent.
    fn check_arguments(
        &self,
        client_tool: &str,
        info: Option<&crate::catalog::ToolInfo>,
        arguments: Option<&serde_json::Value>,
    ) -> Result<(), GatewayError> {
        let schema = info.and_then(|i| i.input_schema.as_deref());
        let key = info.and_then(|i| i.input_key.as_ref());
        self.arguments.check(schema, key, arguments).map_err(|violations| GatewayError::InvalidArguments {
            tool: client_tool.to_owned(),
            violations: violations
                .into_iter()
                .map(|v| ArgumentViolation { pointer: v.pointer, message: v.message })
                .collect(),
        })
    }

    /// What a `tools/list` page teaches: the catalog learns the upstream's tools, and
    /// the page loses the tools seawall hides and shows the overridden ones as clients
    /// see them (a `prompts/list` page, its overridden prompts).
    fn learn(&self, handle: &Arc<UpstreamHandle>, method: &str, answer: Answer) -> Answer {
        match answer {
            Answer::Result { raw, .. } if method == method::TOOLS_LIST => {
                handle.policy.catalog.learn(&raw);
                let listed = self.without_open_tools(handle, raw);
                Answer::result(match &handle.policy.tool_overrides {
                    Some(overrides) => overrides.list(listed),
                    None => listed,
                })
            }
            Answer::Result { raw, is_error } if method == method::PROMPTS_LIST => {
                let raw = match &handle.policy.prompt_overrides {
                    Some(overrides) => overrides.list(raw),
                    None => raw,
                };
                Answer::Result { raw, is_error }
            }
            other => other,
        }
    }

    /// Sends one request through the upstream's stack.
    pub(super) async fn send(
        &self,
        ctx: &ClientRequest,
        handle: &Arc<UpstreamHandle>,
        method: &str,
        params: Option<Box<RawValue>>,
        tool: Option<Arc<str>>,
    ) -> Result<Answer, GatewayError> {
        self.send_with(ctx, handle, method, params, tool, Vec::new()).await
    }

    /// [`Router::send`] with extra HTTP headers.
    async fn send_with(
        &self,
        ctx: &ClientRequest,
        handle: &Arc<UpstreamHandle>,
        method: &str,
        params: Option<Box<RawValue>>,
        tool: Option<Arc<str>>,
        headers: Vec<(String, String)>,
    ) -> Result<Answer, GatewayError> {
        let link = self.link(&ctx.session, handle).await?;
        let req = UpstreamCall {
            upstream: Arc::clone(&handle.name),
            method: Arc::from(method),
            params: params.map(Arc::from),
            progress_token: ctx.progress.clone(),
            idempotent: handle.policy.is_idempotent(method, tool.as_deref()),
            clock: Clock::new(handle.policy.timeout(method, tool.as_deref())),
            tool,
            events: EventSink::new(Arc::clone(&handle.name), ctx.related.clone()),
            target: link,
            avoid: Vec::new(),
            endpoint: None,
            attempt_deadline: None,
            headers: Arc::from(headers),
            trace: CallTrace {
                context: ctx.trace.parent().cloned().map(Arc::new),
                in_meta: ctx.trace.meta.is_some(),
                ..CallTrace::default()
            },
        };
        handle.service.call(req).await
    }

    /// What the gateway knows of a tool; a tool the catalog has not seen makes seawall
    /// list the upstream's tools itself first (at most once per refresh interval), so
    /// arguments are checked from the very first call.
    pub(super) async fn tool_info(
        &self,
        ctx: &ClientRequest,
        handle: &Arc<UpstreamHandle>,
        tool: &str,
    ) -> Option<Arc<crate::catalog::ToolInfo>> {
        if let Some(info) = handle.policy.catalog.fresh(tool) {
            return Some(info);
        }
        if !handle.policy.catalog.begin_refresh() {
            return handle.policy.catalog.get(tool);
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
}
