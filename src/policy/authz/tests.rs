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
    let mut req = ClientRequest::new(session, Id::number(1), method, Some(crate::jsonrpc::to_raw(&params)), None, tx);
    req.principal = principal.map(|name| Arc::new(Principal::api_key(name)));
    req
}

fn layer() -> AuthorizeLayer {
    let only =
        |tools: &[&str]| PatternsConfig { tools: tools.iter().map(|t| t.to_string()).collect(), ..Default::default() };
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
    let err =
        answer(svc.clone().oneshot(request("prompts/get", json!({"name": "demo__greet"}), None)).await.unwrap_err());
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
