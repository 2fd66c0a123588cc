//! Requests for what the operator overrides (`upstreams[].tools`, `upstreams[].prompts`):
//! a call of a renamed tool becomes a call of the upstream's tool with the arguments the
//! gateway sets, a request for a renamed prompt names the upstream's prompt, and hidden
//! ones, or the upstream's own names of renamed ones, are unknown. Only upstreams with
//! overrides come here.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use super::Router;
use crate::call::GatewayError;
use crate::catalog::overrides::{Overrides, Resolved};
use crate::client::ClientRequest;
use crate::jsonrpc;
use crate::mcp::{meta, method};
use crate::upstream::registry::UpstreamHandle;

/// A call of an overridden tool as the upstream gets it.
pub(super) struct ShapedCall {
    /// The tool's name on the upstream.
    pub(super) tool: Arc<str>,
    /// The arguments sent, when the gateway sets some (`None`: the client's, unchanged).
    pub(super) arguments: Option<Arc<Value>>,
    /// The params sent: the upstream's name, those arguments, the rest as the client sent it.
    pub(super) params: Box<RawValue>,
}

/// The call of `name` (`client` as the client wrote it, prefixed on `/mcp`) under
/// `overrides`: `None` for a tool they leave alone, an unknown tool for a hidden one or
/// the upstream's own name of a renamed one, and otherwise the upstream's tool with the
/// arguments the gateway sets.
pub(super) fn shape_call(
    ctx: &ClientRequest,
    overrides: &Overrides,
    name: &str,
    client: &str,
    sent: Option<&Value>,
    params: Option<&RawValue>,
) -> Result<Option<ShapedCall>, GatewayError> {
    let tool = match overrides.resolve(name) {
        Resolved::Plain => return Ok(None),
        Resolved::Unknown => return Err(GatewayError::UnknownTool(client.to_owned())),
        Resolved::Shaped(tool) => tool,
    };
    let arguments = if tool.keeps_arguments() {
        None
    } else {
        let made = tool.arguments(client, ctx.principal.as_deref(), sent).map_err(|refusal| {
            if refusal.is_invalid_params() {
                GatewayError::InvalidParams(refusal.to_string())
            } else {
                GatewayError::InvalidRequest(refusal.to_string())
            }
        })?;
        Some(Arc::new(made))
    };
    let mut map = meta::params_object(params).unwrap_or_default();
    map.insert("name".into(), Value::String(tool.upstream.to_string()));
    if let Some(arguments) = &arguments {
        map.insert("arguments".into(), Value::clone(arguments));
    }
    Ok(Some(ShapedCall { tool: Arc::clone(&tool.upstream), arguments, params: jsonrpc::to_raw(&map) }))
}

impl Router {
    /// A `prompts/get`, or a `completion/complete` for a prompt, under `overrides`: the
    /// params with the upstream's name of an overridden prompt (`None`: as they are), or
    /// an unknown prompt for a hidden one or the upstream's own name of a renamed one.
    pub(super) fn shape_prompt_request(
        &self,
        ctx: &ClientRequest,
        handle: &UpstreamHandle,
        overrides: &Overrides,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Option<Box<RawValue>>, GatewayError> {
        let Some(mut map) = meta::params_object(params) else { return Ok(None) };
        let name = if method == method::PROMPTS_GET {
            map.get_mut("name")
        } else {
            match map.get_mut("ref") {
                Some(Value::Object(reference))
                    if reference.get("type").and_then(Value::as_str) == Some("ref/prompt") =>
                {
                    reference.get_mut("name")
                }
                _ => None,
            }
        };
        let Some(Value::String(name)) = name else { return Ok(None) };
        match overrides.resolve(name) {
            Resolved::Plain => Ok(None),
            Resolved::Unknown => {
                Err(GatewayError::UnknownPrompt(self.client_name(&ctx.session.scope, &handle.name, name)))
            }
            Resolved::Shaped(prompt) => {
                *name = prompt.upstream.to_string();
                Ok(Some(jsonrpc::to_raw(&map)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::config::ToolConfig;
    use crate::identity::Principal;
    use crate::jsonrpc::Id;
    use crate::session::{Scope, Session};

    fn overrides() -> Overrides {
        let tools: BTreeMap<String, ToolConfig> = yaml_serde::from_str(
            "add: { name: plus, arguments: { b: { value: 40 } } }\necho: { name: whoami, arguments: { message: { principal: name } } }\nfail: { hidden: true }",
        )
        .unwrap();
        Overrides::tools("demo", &tools).unwrap()
    }

    fn request(principal: Option<&str>) -> ClientRequest {
        let (tx, _rx) = crate::call::events(1);
        let session = Session::new(Scope::Aggregate, "2025-11-25".into(), json!({}), json!({}));
        let mut req = ClientRequest::new(session, Id::number(1), "tools/call", None, None, tx);
        req.principal = principal.map(|name| Arc::new(Principal::api_key(name)));
        req
    }

    fn shape(principal: Option<&str>, name: &str, sent: Value) -> Result<Option<ShapedCall>, GatewayError> {
        let params = jsonrpc::to_raw(&json!({"name": name, "arguments": sent, "_meta": {"progressToken": 7}}));
        shape_call(&request(principal), &overrides(), name, &format!("demo__{name}"), Some(&sent), Some(&params))
    }

    #[tokio::test]
    async fn a_call_of_a_renamed_tool_reaches_the_upstreams_with_the_gateways_arguments() {
        let call = shape(None, "plus", json!({"a": 2})).unwrap().unwrap();
        assert_eq!(&*call.tool, "add");
        assert_eq!(call.arguments.as_deref(), Some(&json!({"a": 2, "b": 40})));
        let params: Value = serde_json::from_str(call.params.get()).unwrap();
        assert_eq!(params, json!({"name": "add", "arguments": {"a": 2, "b": 40}, "_meta": {"progressToken": 7}}));
        let call = shape(Some("ci"), "whoami", json!({})).unwrap().unwrap();
        assert_eq!(call.arguments.as_deref(), Some(&json!({"message": "ci"})));
        assert!(shape(None, "sleep", json!({})).unwrap().is_none(), "a tool without overrides passes as it is");
    }

    #[tokio::test]
    async fn old_and_hidden_names_are_unknown_and_refusals_have_their_codes() {
        for name in ["add", "fail"] {
            let refused = shape(None, name, json!({})).err();
            assert!(matches!(refused, Some(GatewayError::UnknownTool(t)) if t == format!("demo__{name}")));
        }
        let sent_fixed = shape(None, "plus", json!({"a": 2, "b": 1})).err();
        assert!(matches!(sent_fixed, Some(GatewayError::InvalidParams(m)) if m.contains("'b'")));
        let no_caller = shape(None, "whoami", json!({})).err();
        assert!(matches!(no_caller, Some(GatewayError::InvalidRequest(m)) if m.contains("authenticated caller")));
    }
}
