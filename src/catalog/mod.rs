//! What seawall knows of what its upstreams serve: each upstream's tools (annotations and
//! schemas, shared by every session) and, per session, which upstream serves which
//! resource URI or URI template.

pub(crate) mod overrides;
pub(crate) mod pages;
mod resources;
mod tools;
mod uri_template;

pub(crate) use resources::ResourceCatalog;
pub(crate) use tools::{ToolCatalog, ToolInfo};
