//! Small text helpers shared by the modules that quote user text.

/// Collapses whitespace and clips to `width` characters, preferring a word boundary, ending in `…`.
///
/// Reference: `kimi_cli.utils.string.shorten` (not Python's `textwrap.shorten`: a long word is cut
/// rather than dropped, so text without spaces keeps its start).
pub fn shorten(text: &str, width: usize) -> String {
    const PLACEHOLDER: char = '\u{2026}';
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text;
    }
    // Reference: no room for the placeholder, so a plain cut.
    if width <= 1 {
        return chars[..width].iter().collect();
    }
    let cut = width - 1;
    // The last space at or before the cut, unless it is the very first character.
    let cut = match chars[..=cut].iter().rposition(|c| *c == ' ') {
        Some(space) if space > 0 => space,
        _ => cut,
    };
    let kept: String = chars[..cut].iter().collect();
    format!("{}{PLACEHOLDER}", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn shorten_matches_the_reference() {
        // Expected values printed by the reference's `shorten(text, width=50)`.
        assert_eq!(shorten("hi", 50), "hi");
        assert_eq!(shorten("  spaced\n\nout  text ", 50), "spaced out text");
        assert_eq!(
            shorten(
                "hello world this is a rather long prompt that goes over fifty chars",
                50
            ),
            "hello world this is a rather long prompt that\u{2026}"
        );
        assert_eq!(
            shorten(&"x".repeat(60), 50),
            format!("{}\u{2026}", "x".repeat(49))
        );
        assert_eq!(shorten(&format!("abc {}", "y".repeat(60)), 50), "abc\u{2026}");
        assert_eq!(
            shorten(&"a ".repeat(30), 50),
            format!("{}a\u{2026}", "a ".repeat(24))
        );
        assert_eq!(shorten("one two three", 9), "one two\u{2026}");
        assert_eq!(shorten("abcdefghij", 5), "abcd\u{2026}");
        assert_eq!(shorten("你好世界你好世界", 5), "你好世界\u{2026}");
        assert_eq!(shorten("abc", 1), "a");
        assert_eq!(shorten("abc", 0), "");
    }
}
