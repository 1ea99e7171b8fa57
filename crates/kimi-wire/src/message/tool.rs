//! Tool calls requested by the model and the results that answer them.
//!
//! Reference: kosong's `ToolCall`, `ToolCallPart`, `ToolReturnValue` (with its `ToolOk` and
//! `ToolError` constructors) and `ToolResult`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

use super::content::ContentPart;
use super::display::DisplayBlock;

/// A tool call the model asked for. When the model streams its arguments, the first `ToolCall`
/// event has `arguments: null` and the text arrives in [`ToolCallPart`] events that follow it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ToolCall {
    /// Always `"function"`.
    #[serde(rename = "type", default = "function_type")]
    pub r#type: String,
    /// The id the model gave this call; the matching [`ToolResult`] carries it back.
    pub id: String,
    /// Which tool and with what arguments.
    pub function: FunctionBody,
    /// Provider-specific extra data; `null` when there is none.
    #[serde(default)]
    pub extras: Option<Map<String, Value>>,
}

fn function_type() -> String {
    "function".to_owned()
}

impl ToolCall {
    /// A function call with no extras.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Option<String>) -> Self {
        Self {
            r#type: function_type(),
            id: id.into(),
            function: FunctionBody {
                name: name.into(),
                arguments,
            },
            extras: None,
        }
    }
}

/// The function part of a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct FunctionBody {
    /// The tool name.
    pub name: String,
    /// The arguments as a JSON text, exactly as the model produced it; `null` until streamed.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// A streamed fragment of the arguments of the most recent [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct ToolCallPart {
    /// The next piece of the arguments text.
    #[serde(default)]
    pub arguments_part: Option<String>,
}

/// The outcome of one tool call, sent as an event and used as the client's answer to a
/// `ToolCallRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ToolResult {
    /// The id of the [`ToolCall`] this answers.
    pub tool_call_id: String,
    /// What the tool returned.
    pub return_value: ToolReturnValue,
}

/// What a tool returns: output for the model, a message explaining it, and blocks for the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ToolReturnValue {
    /// Whether the call failed.
    pub is_error: bool,
    /// The content the model receives.
    pub output: ToolOutput,
    /// A note for the model about the result (may be empty).
    pub message: String,
    /// Blocks shown to the user, not to the model.
    #[serde(default)]
    pub display: Vec<DisplayBlock>,
    /// Extra data for debugging and tests; `null` when there is none.
    #[serde(default)]
    pub extras: Option<Map<String, Value>>,
}

impl ToolReturnValue {
    /// A successful result without a brief (the reference's `ToolOk(output=.., message=..)`).
    pub fn ok(output: impl Into<ToolOutput>, message: impl Into<String>) -> Self {
        Self {
            is_error: false,
            output: output.into(),
            message: message.into(),
            display: Vec::new(),
            extras: None,
        }
    }

    /// A successful result with a brief block, when `brief` is not empty.
    pub fn ok_with_brief(
        output: impl Into<ToolOutput>,
        message: impl Into<String>,
        brief: impl Into<String>,
    ) -> Self {
        Self {
            display: brief_display(brief.into()),
            ..Self::ok(output, message)
        }
    }

    /// A failed result (the reference's `ToolError`): the brief becomes a brief display block,
    /// unless it is empty.
    pub fn error(
        output: impl Into<ToolOutput>,
        message: impl Into<String>,
        brief: impl Into<String>,
    ) -> Self {
        Self {
            is_error: true,
            output: output.into(),
            message: message.into(),
            display: brief_display(brief.into()),
            extras: None,
        }
    }

    /// The text of the first brief block, or `""`.
    pub fn brief(&self) -> &str {
        self.display
            .iter()
            .find_map(|block| match block {
                DisplayBlock::Brief { text } => Some(text.as_str()),
                _ => None,
            })
            .unwrap_or("")
    }
}

fn brief_display(brief: String) -> Vec<DisplayBlock> {
    if brief.is_empty() {
        Vec::new()
    } else {
        vec![DisplayBlock::Brief { text: brief }]
    }
}

/// The model-facing output of a tool: a string or a list of content parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(untagged)]
pub enum ToolOutput {
    /// Text output.
    Text(String),
    /// Multi-part output (text mixed with media).
    Parts(Vec<ContentPart>),
}

impl Default for ToolOutput {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<Vec<ContentPart>> for ToolOutput {
    fn from(parts: Vec<ContentPart>) -> Self {
        Self::Parts(parts)
    }
}

/// A single part becomes a one-element list, as the reference's `ToolOk`/`ToolError` do.
impl From<ContentPart> for ToolOutput {
    fn from(part: ContentPart) -> Self {
        Self::Parts(vec![part])
    }
}
