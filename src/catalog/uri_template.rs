//! Matching a concrete URI against an RFC 6570 URI template, enough to route
//! `resources/read` to the upstream that declared the template.

/// One piece of a parsed template.
#[derive(Debug, PartialEq, Eq)]
enum Part<'a> {
    Literal(&'a str),
    /// An expression; the char is its operator (`'\0'` for a simple one).
    Expr(char),
}

/// Longest URI this matcher will try (backtracking is polynomial in the length).
const MAX_URI: usize = 2048;

fn parse(template: &str) -> Option<Vec<Part<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let end = rest.find('}')?;
                let body = &rest[1..end];
                let op = body.chars().next().filter(|c| "+#./;?&".contains(*c)).unwrap_or('\0');
                parts.push(Part::Expr(op));
                rest = &rest[end + 1..];
            }
            Some(i) => {
                parts.push(Part::Literal(&rest[..i]));
                rest = &rest[i..];
            }
            None => {
                parts.push(Part::Literal(rest));
                rest = "";
            }
        }
    }
    Some(parts)
}

/// Whether `uri` is an expansion of `template`.
pub(super) fn matches(template: &str, uri: &str) -> bool {
    if uri.len() > MAX_URI {
        return false;
    }
    match parse(template) {
        Some(parts) => match_parts(&parts, uri),
        None => false,
    }
}

fn match_parts(parts: &[Part<'_>], s: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return s.is_empty();
    };
    match first {
        Part::Literal(l) => s.strip_prefix(l).is_some_and(|tail| match_parts(rest, tail)),
        Part::Expr(op) => {
            // Try every split point where the consumed piece is a valid expansion.
            let mut ends: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
            ends.push(s.len());
            ends.into_iter().any(|end| {
                let piece = &s[..end];
                piece_fits(*op, piece) && match_parts(rest, &s[end..])
            })
        }
    }
}

fn piece_fits(op: char, piece: &str) -> bool {
    match op {
        '+' | '#' => true,
        '?' | '&' => piece.is_empty() || piece.starts_with(op),
        '/' | '.' | ';' => piece.is_empty() || piece.starts_with(op),
        _ => !piece.contains(['/', '?', '#']),
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn simple_and_reserved_expansions() {
        assert!(matches("demo://echo/{text}", "demo://echo/hello"));
        assert!(!matches("demo://echo/{text}", "demo://echo/a/b"));
        assert!(matches("file:///{+path}", "file:///etc/hosts"));
        assert!(matches("test://static/resource/{id}", "test://static/resource/12"));
        assert!(!matches("test://static/resource/{id}", "test://other/12"));
        assert!(matches("api://items{?page,size}", "api://items?page=2&size=3"));
        assert!(matches("api://items{?page}", "api://items"));
        assert!(matches("x://{a}/{b}", "x://1/2"));
        assert!(!matches("x://{a}/{b}", "x://1"));
        assert!(!matches("x://{a", "x://1"));
    }
}
