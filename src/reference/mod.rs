//! The reference pages of the book that are generated from the code, so that they cannot
//! drift from it: every configuration key from the schema's types, the command line from
//! its clap definition, every metric from [`crate::telemetry::metrics`]'s table, and the
//! answer to every kind of failure from what the rewrite layer makes of it.
//! `seawall docs --out docs/src/reference` writes them; a test regenerates them and
//! fails when the committed pages differ.

mod cli;
mod configuration;
mod errors;
mod markdown;
mod metrics;

/// One generated page: its file name in the reference folder and its Markdown.
#[derive(Debug, Clone)]
pub struct Page {
    /// The file name, e.g. `configuration.md`.
    pub file: &'static str,
    /// The page's Markdown.
    pub text: String,
}

/// Every generated page; `cli` is the command line's definition (the binary's).
pub fn pages(cli: &clap::Command) -> Vec<Page> {
    vec![
        Page { file: "configuration.md", text: configuration::page() },
        Page { file: "cli.md", text: cli::page(cli) },
        Page { file: "metrics.md", text: metrics::page() },
        Page { file: "errors.md", text: errors::page() },
    ]
}
