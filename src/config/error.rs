//! Configuration errors: each problem carries the line and field it concerns, so
//! `seawall check-config` can print `FILE:LINE: FIELD: message` lines an editor follows.

use std::fmt::{self, Write as _};

/// One problem found in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// 1-based line of the offending field; `None` when the problem has no position
    /// (e.g. a configuration built in code, or an empty document).
    pub line: Option<usize>,
    /// Path of the offending field, like `upstreams[1].url`; empty for the document root.
    pub field: String,
    /// What is wrong, without position or field.
    pub message: String,
}

impl ConfigIssue {
    /// Renders the issue as `ORIGIN:LINE: FIELD: message`, leaving out missing parts.
    pub fn display<'a>(&'a self, origin: &'a str) -> impl fmt::Display + 'a {
        DisplayIssue { origin, issue: self }
    }

    /// Converts a yaml_serde syntax or type error in `document`. Its message starts with the
    /// path of the enclosing value (`upstreams[0]: unknown field ...`) and ends with ` at
    /// line L column C`; both are split out. libyaml puts the end of a text without a
    /// final line break on a line of its own, past the last; that is reported as the
    /// last line.
    pub(crate) fn from_yaml(err: &yaml_serde::Error, document: &str) -> Self {
        let mut text = err.to_string();
        let location = err.location();
        if let Some(loc) = &location {
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            if let Some(at) = text.find(&suffix) {
                text.replace_range(at..at + suffix.len(), "");
            }
        }
        let (field, message) = split_path(&text);
        let line = location.map(|l| l.line().min(last_line(document)));
        ConfigIssue { line, field: field.to_owned(), message: message.to_owned() }
    }
}

/// The number of the last line of `text`, counted as libyaml counts: a line ends at
/// `\n`, `\r\n`, `\r`, NEL, LS or PS.
fn last_line(text: &str) -> usize {
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}' => line += 1,
            _ => {}
        }
    }
    line
}

/// Splits `path: message` where `path` looks like a field path (no spaces or quotes);
/// messages of root-level errors (`invalid type: ...`) are left whole.
fn split_path(text: &str) -> (&str, &str) {
    match text.split_once(": ") {
        Some((path, message))
            if !path.is_empty() && !path.chars().any(|c| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | ',')) =>
        {
            (path, message)
        }
        _ => ("", text),
    }
}

struct DisplayIssue<'a> {
    origin: &'a str,
    issue: &'a ConfigIssue,
}

impl fmt::Display for DisplayIssue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.origin)?;
        if let Some(line) = self.issue.line {
            write!(f, ":{line}")?;
        }
        if !self.issue.field.is_empty() {
            write!(f, ": {}", OneLine(&self.issue.field))?;
        }
        write!(f, ": {}", OneLine(&self.issue.message))
    }
}

/// Text quoted from the document (a key, a value) with its control characters and line
/// separators escaped (`\n`, `\u{85}`), so that an issue stays on one line.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if (c.is_control() && c != '\t') || matches!(c, '\u{2028}' | '\u{2029}') {
                write!(f, "{}", c.escape_debug())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{origin}: cannot read: {source}")]
    Read {
        /// The path as given.
        origin: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The text is not a valid configuration; one issue per problem found, in line order.
    #[error("{}", DisplayIssues { origin, issues })]
    Invalid {
        /// The file name (or other label) the text came from.
        origin: String,
        /// Every problem found, at least one.
        issues: Vec<ConfigIssue>,
    },
}

impl ConfigError {
    /// Every problem found, in line order; empty for a read error.
    pub fn errors(&self) -> &[ConfigIssue] {
        match self {
            ConfigError::Read { .. } => &[],
            ConfigError::Invalid { issues, .. } => issues,
        }
    }
}

/// One issue per line.
struct DisplayIssues<'a> {
    origin: &'a str,
    issues: &'a [ConfigIssue],
}

impl fmt::Display for DisplayIssues<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}", issue.display(self.origin))?;
        }
        Ok(())
    }
}
