//! Side questions: a `prompt` whose text is `/btw <question>` (protocol 1.9, `BtwBegin`/`BtwEnd`).
//!
//! The reference answers them only in its terminal UI; its wire server calls `/btw` an unknown slash
//! command. Here the server recognises them before the turn slot is claimed, so a side question is
//! answered whether or not a turn runs (it is the one `prompt` a running turn does not refuse with
//! -32000), and never becomes a turn itself: the agent answers it through
//! [`crate::WireAgent::side_question`].

use crate::message::UserInput;

/// The command, as a slash command name (`/btw`).
pub const COMMAND: &str = "btw";

/// The question when `input` is a side question: plain text `/btw` followed by whitespace or the end,
/// leading whitespace allowed, as the reference's slash-command parser reads it. The question is
/// trimmed and may be empty (`/btw` alone), which the agent answers with its usage.
pub fn parse(input: &UserInput) -> Option<String> {
    let UserInput::Text(text) = input else {
        return None;
    };
    let rest = text.trim().strip_prefix('/')?.strip_prefix(COMMAND)?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    Some(rest.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ContentPart;

    #[test]
    fn only_btw_itself_is_a_side_question() {
        let text = |s: &str| UserInput::Text(s.to_owned());
        assert_eq!(parse(&text("/btw what is x?")), Some("what is x?".into()));
        assert_eq!(
            parse(&text("  /btw \n what\nis x?  ")),
            Some("what\nis x?".into())
        );
        assert_eq!(parse(&text("/btw")), Some(String::new()));
        assert_eq!(parse(&text("/btwx y")), None);
        assert_eq!(parse(&text("/btw:x y")), None);
        assert_eq!(parse(&text("btw y")), None);
        assert_eq!(parse(&text("/clear")), None);
        assert_eq!(parse(&UserInput::Parts(vec![ContentPart::text("/btw y")])), None);
    }
}
