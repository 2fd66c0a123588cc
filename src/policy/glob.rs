//! Glob patterns on names and URIs, shared by the policies that select by name.

/// Whether `name` matches `pattern`, where `*` is any run of characters (also none) and
/// `?` exactly one character.
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    // Where the last `*` was, and the name position it currently stands for up to.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more character and try again.
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    p = sp + 1;
                    n = sn + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_stars_and_question_marks() {
        for (pattern, name) in [
            ("*", ""),
            ("*", "demo__echo"),
            ("demo__*", "demo__echo"),
            ("*__echo", "demo__echo"),
            ("d?mo__e*o", "demo__echo"),
            ("*e*c*", "demo__echo"),
            ("a*b*c", "aXbYbZc"),
            ("exact", "exact"),
            ("**", "x"),
        ] {
            assert!(glob(pattern, name), "{pattern} should match {name}");
        }
        for (pattern, name) in
            [("demo__*", "other__echo"), ("?", ""), ("?", "ab"), ("exact", "exact2"), ("a*c", "abd"), ("", "x")]
        {
            assert!(!glob(pattern, name), "{pattern} should not match {name}");
        }
    }
}
