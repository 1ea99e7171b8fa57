//! How thinking is switched on and off for a Claude model, and the beta header that goes with it.
//!
//! Reference: kosong's `Anthropic.with_thinking` with effort "high" (what `--thinking` asks for):
//! models from Opus/Sonnet 4.6 on (and Mythos) take adaptive thinking with `output_config.effort`;
//! older ones a token budget, with the effort only where Anthropic documents it (Opus 4.5). Unless
//! adaptive thinking is on, requests carry the interleaved-thinking beta.

use serde_json::{Map, Value, json};

/// The beta that lets older models think between tool calls.
pub(crate) const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

/// The thinking budget for effort "high" on models without adaptive thinking.
const HIGH_BUDGET_TOKENS: u64 = 32_000;

/// What a request says about thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Thinking {
    /// Nothing: the API's default.
    Unset,
    /// `thinking: {type: disabled}`.
    Off,
    /// Adaptive thinking at effort "high" (4.6-family and newer).
    Adaptive,
    /// A thinking budget; `with_effort` adds `output_config.effort` (Opus 4.5).
    Budget {
        /// Whether the model takes `output_config.effort`.
        with_effort: bool,
    },
}

impl Thinking {
    /// The setting for `model` when thinking is on, off, or not said.
    pub(crate) fn for_model(model: &str, on: Option<bool>) -> Self {
        match on {
            None => Self::Unset,
            Some(false) => Self::Off,
            Some(true) if supports_adaptive(model) => Self::Adaptive,
            Some(true) => Self::Budget {
                with_effort: takes_effort_without_adaptive(model),
            },
        }
    }

    /// The `anthropic-beta` header value, if any.
    pub(crate) fn beta_header(self) -> Option<&'static str> {
        match self {
            Self::Adaptive => None,
            Self::Unset | Self::Off | Self::Budget { .. } => Some(INTERLEAVED_THINKING_BETA),
        }
    }

    /// Adds `thinking` (and `output_config`) to a request body.
    pub(crate) fn insert_into(self, body: &mut Map<String, Value>) {
        let effort = || json!({"effort": "high"});
        match self {
            Self::Unset => {}
            Self::Off => {
                body.insert("thinking".into(), json!({"type": "disabled"}));
            }
            Self::Adaptive => {
                // `display: summarized` keeps the thinking text visible on models whose default hides it.
                body.insert(
                    "thinking".into(),
                    json!({"type": "adaptive", "display": "summarized"}),
                );
                body.insert("output_config".into(), effort());
            }
            Self::Budget { with_effort } => {
                body.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": HIGH_BUDGET_TOKENS}),
                );
                if with_effort {
                    body.insert("output_config".into(), effort());
                }
            }
        }
    }
}

/// Whether `model` takes `thinking: {type: adaptive}`: Mythos, and the Claude families from 4.6 on.
fn supports_adaptive(model: &str) -> bool {
    let model = model.to_lowercase();
    model.contains("mythos")
        || family_version(&model, &["opus", "sonnet", "haiku"]).is_some_and(|v| v >= (4, 6))
}

/// Opus 4.5 is the one model without adaptive thinking that Anthropic lists as taking the effort.
fn takes_effort_without_adaptive(model: &str) -> bool {
    let model = model.to_lowercase();
    model.contains("opus-4-5") || model.contains("opus-4.5")
}

/// The first `<family>[.-]<major>[.-]<minor>` in `model`, where the minor has one or two digits not
/// followed by another (so the date in `sonnet-4-20250514` is not read as a minor version).
fn family_version(model: &str, families: &[&str]) -> Option<(u32, u32)> {
    let bytes = model.as_bytes();
    (0..bytes.len()).find_map(|start| {
        let family = families.iter().find(|f| model[start..].starts_with(*f))?;
        let rest = &bytes[start + family.len()..];
        let (sep, rest) = rest.split_first()?;
        if !matches!(sep, b'.' | b'-') {
            return None;
        }
        let major_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if major_len == 0 {
            return None;
        }
        let (major, rest) = rest.split_at(major_len);
        let (sep, rest) = rest.split_first()?;
        if !matches!(sep, b'.' | b'-') {
            return None;
        }
        let minor_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if !(1..=2).contains(&minor_len) {
            return None;
        }
        let number = |digits: &[u8]| std::str::from_utf8(digits).ok()?.parse::<u32>().ok();
        Some((number(major)?, number(&rest[..minor_len])?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn model_families_and_versions() {
        let rows = [
            ("claude-opus-4-6", Thinking::Adaptive),
            ("claude-sonnet-4.6", Thinking::Adaptive),
            ("claude-opus-4-7-20260101", Thinking::Adaptive),
            ("claude-mythos-preview", Thinking::Adaptive),
            ("claude-opus-4-5", Thinking::Budget { with_effort: true }),
            ("claude-sonnet-4-5", Thinking::Budget { with_effort: false }),
            (
                "claude-sonnet-4-20250514",
                Thinking::Budget { with_effort: false },
            ),
            (
                "claude-3-7-sonnet-latest",
                Thinking::Budget { with_effort: false },
            ),
            ("Claude-Haiku-5-0", Thinking::Adaptive),
        ];
        for (model, expected) in rows {
            assert_eq!(Thinking::for_model(model, Some(true)), expected, "{model}");
        }
        assert_eq!(Thinking::for_model("claude-opus-4-6", Some(false)), Thinking::Off);
        assert_eq!(Thinking::for_model("claude-opus-4-6", None), Thinking::Unset);
    }

    #[test]
    fn request_fields_and_beta_header() {
        let body = |t: Thinking| {
            let mut map = Map::new();
            t.insert_into(&mut map);
            Value::Object(map)
        };
        assert_eq!(
            body(Thinking::Adaptive),
            json!({"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "high"}})
        );
        assert_eq!(
            body(Thinking::Budget { with_effort: false }),
            json!({"thinking": {"type": "enabled", "budget_tokens": 32000}})
        );
        assert_eq!(body(Thinking::Off), json!({"thinking": {"type": "disabled"}}));
        assert_eq!(body(Thinking::Unset), json!({}));
        assert_eq!(Thinking::Adaptive.beta_header(), None);
        assert_eq!(Thinking::Off.beta_header(), Some(INTERLEAVED_THINKING_BETA));
    }
}
