//! The modern era's header values as the client meant them (verbatim or base64-wrapped),
//! and the `Mcp-Param-*` headers that mirror a tool's annotated arguments.

use serde_json::Value;

/// A header value as the client meant it: verbatim, or the UTF-8 inside a
/// `=?base64?…?=` sentinel (`None` when the sentinel is malformed, so it never matches).
pub(crate) fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine as _;
    let Some(payload) = value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) else {
        return Some(value.to_owned());
    };
    let bytes = base64::engine::general_purpose::STANDARD.decode(payload).ok()?;
    String::from_utf8(bytes).ok()
}

/// The prefix of the headers that mirror a tool's annotated arguments.
pub(crate) const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// The arguments a tool's input schema mirrors into headers: the path of `properties`
/// keys from the root to each property carrying `x-mcp-header`, the token, and the
/// property's type. `None` when an annotation is invalid (then, as the spec says, no
/// header is validated or sent for the tool).
fn annotated(schema: &Value) -> Option<Vec<(Vec<String>, String, String)>> {
    fn walk(node: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String, String)>) -> Option<()> {
        let Some(props) = node.get("properties").and_then(Value::as_object) else { return Some(()) };
        for (name, prop) in props {
            path.push(name.clone());
            if let Some(token) = prop.get("x-mcp-header") {
                let token = token.as_str()?;
                let kind = prop.get("type").and_then(Value::as_str)?;
                let token_ok = !token.is_empty()
                    && token.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !token_ok || !matches!(kind, "string" | "integer" | "boolean") {
                    return None;
                }
                if out.iter().any(|(_, t, _)| t.eq_ignore_ascii_case(token)) {
                    return None;
                }
                out.push((path.clone(), token.to_owned(), kind.to_owned()));
            }
            walk(prop, path, out)?;
            path.pop();
        }
        Some(())
    }
    let mut out = Vec::new();
    if marks_headers(schema) {
        walk(schema, &mut Vec::new(), &mut out)?;
    }
    Some(out)
}

/// Whether any property of `schema`, at any depth, carries `x-mcp-header`: most tools
/// have none, and then nothing is walked or allocated.
pub(crate) fn marks_headers(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|props| props.values().any(|p| p.get("x-mcp-header").is_some() || marks_headers(p)))
}

fn value_at<'a>(arguments: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(arguments, |node, key| node.get(key)).filter(|v| !v.is_null())
}

fn rendered(value: &Value) -> Option<String> {
    match value {
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The `Mcp-Param-*` headers a `tools/call` with `arguments` carries for a tool with
/// `schema` (names lowercase; values base64-wrapped when needed).
pub(crate) fn param_headers(schema: &Value, arguments: &Value) -> Vec<(String, String)> {
    let Some(annotated) = annotated(schema) else { return Vec::new() };
    annotated
        .into_iter()
        .filter_map(|(path, token, _)| {
            let value = rendered(value_at(arguments, &path)?)?;
            Some((format!("{PARAM_HEADER_PREFIX}{}", token.to_ascii_lowercase()), encode_header_value(&value)))
        })
        .collect()
}

/// Checks a modern client's `Mcp-Param-*` headers (lowercase names, as received, a name
/// twice when it was sent twice) against the arguments of its `tools/call`: each
/// annotated argument and its header are present together and equal (integers compared
/// as numbers). `Err`: the -32020 message.
pub(crate) fn check_param_headers(
    schema: &Value,
    arguments: &Value,
    headers: &[(String, String)],
) -> Result<(), String> {
    let Some(annotated) = annotated(schema) else { return Ok(()) };
    for (path, token, kind) in annotated {
        let name = format!("{PARAM_HEADER_PREFIX}{}", token.to_ascii_lowercase());
        let shown = format!("Mcp-Param-{token}");
        let mut sent = headers.iter().filter(|(n, _)| *n == name).map(|(_, v)| v.as_str());
        let (raw, twice) = (sent.next(), sent.next().is_some());
        if twice {
            return Err(format!("the {shown} header appears more than once"));
        }
        let argument = path.join(".");
        let value = value_at(arguments, &path);
        match (raw, value.and_then(rendered)) {
            (None, None) if value.is_none() => {}
            (Some(_), None) if value.is_none() => {
                return Err(format!("the {shown} header is present but the {argument:?} argument is absent"));
            }
            (None, Some(_)) => return Err(format!("the {shown} header is missing for the {argument:?} argument")),
            (_, None) => return Err(format!("the {shown} header does not match the {argument:?} argument")),
            (Some(raw), Some(expected)) => {
                let Some(decoded) = decode_header_value(raw) else {
                    return Err(format!("the {shown} header carries a malformed base64 value"));
                };
                let equal = match (kind.as_str(), value.and_then(Value::as_f64)) {
                    ("integer", Some(n)) => decoded.parse::<f64>().is_ok_and(|d| d == n),
                    _ => decoded == expected,
                };
                if !equal {
                    return Err(format!("the {shown} header does not match the {argument:?} argument"));
                }
            }
        }
    }
    Ok(())
}

/// A header value as is when it is printable ASCII without edge spaces, else the UTF-8
/// wrapped as `=?base64?…?=`.
pub(crate) fn encode_header_value(value: &str) -> String {
    use base64::Engine as _;
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        return value.to_owned();
    }
    format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(value.as_bytes()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn annotated_arguments_are_mirrored_and_checked() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "opts": {"type": "object", "properties": {"fast": {"type": "boolean", "x-mcp-header": "Fast"}}},
            "plain": {"type": "string"}}});
        let args = json!({"region": "eu-wëst", "n": 42, "opts": {"fast": true}, "plain": "x"});
        let headers = param_headers(&schema, &args);
        assert_eq!(headers.len(), 3, "{headers:?}");
        assert!(headers.contains(&("mcp-param-n".into(), "42".into())));
        assert!(headers.contains(&("mcp-param-fast".into(), "true".into())));
        assert!(headers.contains(&("mcp-param-region".into(), encode_header_value("eu-wëst"))));
        assert_eq!(check_param_headers(&schema, &args, &headers), Ok(()));
        let mut wrong = headers.clone();
        wrong.retain(|(n, _)| n != "mcp-param-n");
        wrong.push(("mcp-param-n".into(), "42.0".into()));
        assert_eq!(check_param_headers(&schema, &args, &wrong), Ok(()), "integers compare as numbers");
        wrong.push(("mcp-param-n".into(), "42".into()));
        assert!(check_param_headers(&schema, &args, &wrong).is_err(), "twice");
        let missing: Vec<_> = headers.iter().filter(|(n, _)| n != "mcp-param-fast").cloned().collect();
        assert!(check_param_headers(&schema, &args, &missing).unwrap_err().contains("missing"));
        let mut bad = missing.clone();
        bad.push(("mcp-param-fast".into(), "=?base64?!!?=".into()));
        assert!(check_param_headers(&schema, &args, &bad).unwrap_err().contains("malformed"));
        let invalid = json!({"properties": {"x": {"type": "number", "x-mcp-header": "X"}}});
        assert!(param_headers(&invalid, &json!({"x": 1.5})).is_empty(), "an invalid annotation mirrors nothing");
        let deep = json!({"properties": {"a": {"properties": {"b": {"properties": {
            "c": {"type": "string", "x-mcp-header": "C"}}}}}, "d": {"type": "string"}}});
        let args = json!({"a": {"b": {"c": "x"}}, "d": "y"});
        assert_eq!(param_headers(&deep, &args), vec![("mcp-param-c".to_owned(), "x".to_owned())], "found at any depth");
        let none = json!({"properties": {"a": {"properties": {"b": {"type": "string"}}}}});
        assert_eq!(annotated(&none), Some(Vec::new()));
    }
}
