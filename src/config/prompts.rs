//! Per-prompt settings of one upstream (`upstreams[].prompts.<name>`, keyed by the
//! prompt's name on the upstream): how clients see it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::locate::{FieldPath, Problem};
use super::tools::{Seen, check_seen_names};
use super::upstream::put_schema_defaults;

/// What clients see of one prompt of one upstream, under the prompt's name on the
/// upstream: on both endpoints' `prompts/list`, `prompts/get` and the prompt references
/// of `completion/complete`. Authorisation rules see the name the client sees. Sessions
/// hear `notifications/prompts/list_changed` when a reload changes it.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
#[schemars(transform = prompt_schema_defaults)]
pub struct PromptConfig {
    /// The name clients see and get the prompt by (on `/mcp` prefixed as
    /// `<upstream><name_separator><name>`); the upstream's own name is then unknown to
    /// clients. 1 to 128 letters, digits, `_`, `-` and `.`, and no other prompt of the
    /// upstream configured here may be seen under it (one the upstream lists under it is
    /// left out of lists). Default: the upstream's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Replaces the prompt's `description`. Default: the upstream's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Leave the prompt out of `prompts/list`; getting it is answered as getting an
    /// unknown prompt. Default `false`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

/// The default of `hidden`, which serialization skips while it is `false`.
fn prompt_schema_defaults(schema: &mut schemars::Schema) {
    put_schema_defaults(schema, [("hidden", PromptConfig::default().hidden.into())]);
}

/// Checks the names clients see of the `prompts` of the upstream at `upstream`.
pub(crate) fn check_prompts(upstream: &FieldPath, prompts: &BTreeMap<String, PromptConfig>, out: &mut Vec<Problem>) {
    let entries = prompts.iter().map(|(key, p)| Seen { key, name: p.name.as_deref(), hidden: p.hidden }).collect();
    check_seen_names(upstream, "prompts", entries, out);
}
