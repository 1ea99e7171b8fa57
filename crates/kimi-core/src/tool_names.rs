//! The names the model's tools go by in the texts we write for it (reminders, the output budget's
//! marker, tool descriptions), so that an agent whose tools are named differently (the kimi-code
//! agent's `Read`, `Write`, `Edit`, `Bash`) is only ever told about tools it has.
//!
//! Our texts name the reference's tools; [`ToolNames`] renames them, whole words only (`ReadFile`
//! becomes `Read`, `ReadMediaFile` stays).

use std::borrow::Cow;

/// Renames of the reference's tool names (`from`, `to`), applied to whole words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolNames {
    renames: &'static [(&'static str, &'static str)],
}

impl ToolNames {
    /// The reference's names: nothing renamed.
    pub const REFERENCE: Self = Self { renames: &[] };

    /// Names with `renames` applied.
    pub const fn new(renames: &'static [(&'static str, &'static str)]) -> Self {
        Self { renames }
    }

    /// The name `reference_name` goes by.
    pub fn of<'a>(&self, reference_name: &'a str) -> &'a str {
        self.renames
            .iter()
            .find(|(from, _)| *from == reference_name)
            .map_or(reference_name, |(_, to)| to)
    }

    /// `text` with every renamed tool name replaced, where it stands as a whole word.
    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for (from, to) in self.renames {
            if text.contains(from) {
                text = Cow::Owned(replace_words(&text, from, to));
            }
        }
        text
    }
}

/// `text` with `from` replaced by `to` wherever it is not part of a longer identifier.
fn replace_words(text: &str, from: &str, to: &str) -> String {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let before = rest[..at].chars().next_back().or_else(|| out.chars().next_back());
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_word) || after.is_some_and(is_word) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const NAMES: ToolNames = ToolNames::new(&[("ReadFile", "Read"), ("Shell", "Bash")]);

    #[test]
    fn renames_whole_words_only() {
        assert_eq!(
            NAMES.apply("Use ReadFile (or `Shell`), not ReadMediaFile, MyReadFile or ReadFiles."),
            "Use Read (or `Bash`), not ReadMediaFile, MyReadFile or ReadFiles."
        );
        assert_eq!(NAMES.apply("ReadFile"), "Read");
        assert!(matches!(NAMES.apply("nothing here"), Cow::Borrowed(_)));
        assert_eq!(ToolNames::REFERENCE.apply("ReadFile"), "ReadFile");
        assert_eq!(NAMES.of("Shell"), "Bash");
        assert_eq!(NAMES.of("Grep"), "Grep");
    }
}
