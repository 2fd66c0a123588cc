//! JSON with comments and trailing commas (VS Code's `mcp.json` and settings), made
//! plain JSON by blanking them out, so lines and columns stay where they were.

/// `text` with `//` and `/* */` comments and trailing commas replaced by spaces
/// (newlines kept). Strings are left alone.
pub(super) fn strip(text: &str) -> String {
    let mut out: Vec<char> = Vec::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    // The index in `out` of a comma that may turn out to be trailing.
    let mut comma: Option<usize> = None;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                comma = None;
                out.push(c);
                let mut escaped = false;
                for c in chars.by_ref() {
                    out.push(c);
                    match c {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => break,
                        _ => escaped = false,
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                out.push(' ');
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                    out.push(' ');
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                out.push(' ');
                let mut star = false;
                for c in chars.by_ref() {
                    out.push(if c == '\n' { '\n' } else { ' ' });
                    if star && c == '/' {
                        break;
                    }
                    star = c == '*';
                }
            }
            ',' => {
                comma = Some(out.len());
                out.push(c);
            }
            '}' | ']' => {
                if let Some(at) = comma.take() {
                    out[at] = ' ';
                }
                out.push(c);
            }
            c if c.is_whitespace() => out.push(c),
            c => {
                comma = None;
                out.push(c);
            }
        }
    }
    out.into_iter().collect()
}
