//! Which hooks apply to a trigger: a hook's `matcher` is a regular expression searched for (not
//! anchored) in the trigger's subject, such as the tool name.

use regex::Regex;

/// A compiled hook matcher.
///
/// Reference: `re.search(pattern, value)`; an empty pattern matches everything and a pattern that
/// does not compile matches nothing. We compile once, when the hook is registered, instead of on
/// every trigger. Patterns using syntax Rust's `regex` lacks (look-around, back-references) count as
/// invalid here, whereas Python would accept them.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    /// Empty pattern.
    Everything,
    /// A valid pattern.
    Pattern(Regex),
    /// A pattern that failed to compile; never matches.
    Invalid,
}

impl Matcher {
    /// Compiles `pattern`, logging (once) when it is invalid.
    pub(crate) fn new(pattern: &str) -> Self {
        if pattern.is_empty() {
            return Self::Everything;
        }
        match Regex::new(pattern) {
            Ok(regex) => Self::Pattern(regex),
            Err(error) => {
                tracing::warn!(pattern, %error, "invalid regex in hook matcher; the hook will never run");
                Self::Invalid
            }
        }
    }

    /// Whether the hook applies to `value`.
    pub(crate) fn is_match(&self, value: &str) -> bool {
        match self {
            Self::Everything => true,
            Self::Pattern(regex) => regex.is_match(value),
            Self::Invalid => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_pattern_matches_everything_including_empty_values() {
        let m = Matcher::new("");
        assert!(m.is_match("Shell"));
        assert!(m.is_match(""));
    }

    #[test]
    fn patterns_are_searched_not_anchored() {
        let m = Matcher::new("Shell");
        assert!(m.is_match("Shell"));
        assert!(m.is_match("MyShellTool"));
        assert!(!m.is_match("ReadFile"));
        assert!(!m.is_match("shell"), "matching is case-sensitive");
    }

    #[test]
    fn anchors_and_alternation_work_as_in_python() {
        let m = Matcher::new("^(Read|Write)File$");
        assert!(m.is_match("ReadFile"));
        assert!(m.is_match("WriteFile"));
        assert!(!m.is_match("ReadFileX"));
        let any_mcp = Matcher::new(r"mcp__\w+");
        assert!(any_mcp.is_match("mcp__github__search"));
        assert!(!any_mcp.is_match("Glob"));
    }

    #[test]
    fn an_invalid_pattern_matches_nothing() {
        for pattern in ["(", "[a-", "*Shell"] {
            let m = Matcher::new(pattern);
            assert!(!m.is_match("Shell"), "{pattern}");
            assert!(!m.is_match(""), "{pattern}");
        }
    }
}
