//! Requests routed by name: prefixed tools and prompts, completion refs, and methods
//! seawall does not know.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use super::{NameParams, Router, UriParams};
use crate::call::GatewayError;
use crate::client::ClientRequest;
use crate::client::Routed;
use crate::jsonrpc;
use crate::mcp::{meta, method};
use crate::upstream::registry::UpstreamHandle;

impl Router {
    /// `tools/call`, `prompts/get`: the prefix of `params.name` names the upstream.
    pub(super) async fn by_name(
        &self,
        ctx: &ClientRequest,
        method: &str,
        params: Option<Box<RawValue>>,
        unknown: fn(String) -> GatewayError,
    ) -> Result<Routed, GatewayError> {
        let mut map = meta::params_object(params.as_deref())
            .ok_or_else(|| GatewayError::InvalidParams("params must be an object".into()))?;
        let name = map
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| GatewayError::InvalidParams("params.name must be a string".into()))?
            .to_owned();
        let (handle, local) = self.split(&name).ok_or_else(|| unknown(name.clone()))?;
        map.insert("name".into(), Value::String(local.to_owned()));
        let call =
            (method == method::TOOLS_CALL).then(|| (Arc::from(local), map.get("arguments").cloned().map(Arc::new)));
        self.forward_call(ctx, handle, method, Some(jsonrpc::to_raw(&map)), call).await
    }

    /// Splits `<upstream><sep><name>`.
    pub(super) fn split<'n>(&self, name: &'n str) -> Option<(&Arc<UpstreamHandle>, &'n str)> {
        let (prefix, local) = name.split_once(self.separator.as_str())?;
        Some((self.upstreams.get(prefix)?, local))
    }

    /// `completion/complete`: routed by its prompt or resource ref.
    pub(super) async fn completion(
        &self,
        ctx: &ClientRequest,
        params: Option<Box<RawValue>>,
    ) -> Result<Routed, GatewayError> {
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

    /// A method the gateway does not know: route it by a prefixed `name`, by `uri`, or to
    /// the only upstream there is.
    pub(super) async fn unknown_method(
        &self,
        ctx: &ClientRequest,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Routed, GatewayError> {
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

    pub(super) async fn by_name_to(
        &self,
        ctx: &ClientRequest,
        handle: &Arc<UpstreamHandle>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Routed, GatewayError> {
        let mut map = meta::params_object(params.as_deref()).unwrap_or_default();
        if let Some(Value::String(name)) = map.get("name")
            && let Some((_, local)) = name.split_once(self.separator.as_str())
        {
            let local = local.to_owned();
            map.insert("name".into(), Value::String(local));
        }
        self.forward(ctx, handle, method, Some(jsonrpc::to_raw(&map))).await
    }
}
