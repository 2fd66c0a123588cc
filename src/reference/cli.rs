//! reference/cli.md: every subcommand with its arguments and options, from the clap
//! definition the binary parses its command line with.

use std::fmt::Write as _;

use super::markdown::{GENERATED, cell, code, prose, sentence};

/// The page for the command line `cli`.
pub(super) fn page(cli: &clap::Command) -> String {
    let mut cli = cli.clone();
    cli.build();
    let name = cli.get_name().to_owned();
    let mut out = format!("# Command line\n\n{GENERATED}\n\n");
    if let Some(about) = cli.get_long_about().or_else(|| cli.get_about()) {
        about_text(&mut out, &about.to_string());
    }
    let _ = writeln!(
        out,
        "Usage: `{name} <COMMAND>`. Every command takes `-h`/`--help` (`--help` prints \
         what this page says), and `{name} --version` prints the version.\n"
    );
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        subcommand(&mut out, sub);
    }
    out
}

/// One subcommand's section.
fn subcommand(out: &mut String, sub: &clap::Command) {
    let _ = writeln!(out, "## {}\n", sub.get_name());
    if let Some(about) = sub.get_long_about().or_else(|| sub.get_about()) {
        about_text(out, &about.to_string());
    }
    let usage = sub.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    let arguments: Vec<&clap::Arg> = sub
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if arguments.is_empty() {
        return;
    }
    out.push_str("| argument | meaning | default |\n|---|---|---|\n");
    for arg in arguments {
        let help = arg.get_long_help().or_else(|| arg.get_help()).map(ToString::to_string).unwrap_or_default();
        let _ = writeln!(out, "| {} | {} | {} |", code(&spelling(arg)), cell(&meaning(arg, &help)), default(arg));
    }
    out.push('\n');
}

/// A command's description, paragraph by paragraph.
fn about_text(out: &mut String, about: &str) {
    for paragraph in about.split("\n\n") {
        let _ = writeln!(out, "{}\n", sentence(&prose(paragraph)));
    }
}

/// How an argument is written: `<FILE>`, `-c, --config <CONFIG>`, `--stdio`.
fn spelling(arg: &clap::Arg) -> String {
    let value = value_name(arg);
    if arg.is_positional() {
        return value;
    }
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    if takes_value { format!("{} {value}", names.join(", ")) } else { names.join(", ") }
}

fn value_name(arg: &clap::Arg) -> String {
    match arg.get_value_names() {
        Some(names) if !names.is_empty() => names.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" "),
        _ => format!("<{}>", arg.get_id().as_str().to_uppercase()),
    }
}

/// The help text, with the values it takes and the variable it may come from.
fn meaning(arg: &clap::Arg, help: &str) -> String {
    let mut text = sentence(help);
    let values: Vec<String> =
        arg.get_possible_values().iter().filter(|v| !v.is_hide_set()).map(|v| format!("`{}`", v.get_name())).collect();
    if !values.is_empty() && arg.get_num_args().is_some_and(|n| n.takes_values()) {
        let _ = write!(text, " One of {}.", values.join(", "));
    }
    if let Some(env) = arg.get_env() {
        let _ = write!(text, " Also read from `{}`.", env.to_string_lossy());
    }
    if arg.is_required_set() {
        text.push_str(" Required.");
    }
    text
}

/// The default value of an option that takes one (a flag's `false` says nothing).
fn default(arg: &clap::Arg) -> String {
    if !arg.get_num_args().is_some_and(|n| n.takes_values()) {
        return "—".to_owned();
    }
    let defaults: Vec<String> = arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    if defaults.is_empty() { "—".to_owned() } else { code(&defaults.join(" ")) }
}
