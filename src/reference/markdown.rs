//! Small helpers for writing Markdown from doc comments and help texts.

/// The line under each generated page's title that says where it comes from.
pub(super) const GENERATED: &str = "<!-- Generated from the code by `seawall docs --out docs/src/reference`: \
edit the code, then run it again. -->";

/// `text` as one table cell: on one line, its pipes escaped, see [`prose`].
pub(super) fn cell(text: &str) -> String {
    prose(text).replace('|', "\\|")
}

/// `text` on one line, with `<` and `>` outside code spans escaped: help texts write
/// `/mcp/<upstream>`, which Markdown would take for an HTML tag.
pub(super) fn prose(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(joined.len());
    let mut in_code = false;
    for c in joined.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '<' if !in_code => out.push_str("&lt;"),
            '>' if !in_code => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// `text` as a sentence: with its closing period (clap drops that of a one-sentence
/// help text).
pub(super) fn sentence(text: &str) -> String {
    let text = text.trim_end();
    if text.is_empty() || text.ends_with(['.', '!', '?', ':']) { text.to_owned() } else { format!("{text}.") }
}

/// `text` as inline code (a longer fence when it holds a backtick).
pub(super) fn code(text: &str) -> String {
    if text.contains('`') { format!("`` {text} ``") } else { format!("`{text}`") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn angle_brackets_are_escaped_outside_code_only() {
        assert_eq!(
            prose("reach /mcp/<upstream>\n  or `<upstream>__<name>`"),
            "reach /mcp/&lt;upstream&gt; or `<upstream>__<name>`"
        );
        assert_eq!(cell("a | b"), "a \\| b");
    }

    #[test]
    fn a_help_text_ends_as_a_sentence() {
        assert_eq!(sentence("Run the gateway"), "Run the gateway.");
        assert_eq!(sentence("Print it."), "Print it.");
        assert_eq!(code("a`b"), "`` a`b ``");
    }
}
