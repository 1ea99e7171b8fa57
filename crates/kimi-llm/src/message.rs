//! Conversation messages as the loop keeps them and providers read them.

use kimi_wire::message::{ContentPart, TextPart, ToolCall};
use serde::{Deserialize, Serialize};

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the host (the system prompt, or a mid-conversation note).
    System,
    /// The user, or text injected on the user's behalf.
    User,
    /// The model.
    Assistant,
    /// The result of one tool call.
    Tool,
}

impl Role {
    /// The lower-case name the reference uses (`"user"`, `"tool"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

/// One message of the history sent to a provider.
///
/// Mirrors kosong's `Message` without its serialisation rules: how a message
/// is written to `context.jsonl` belongs to the session code, not here. The
/// serde form (content always a list of parts, empty fields left out) is
/// what cassettes record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who sent it.
    pub role: Role,
    /// Content parts, in order; empty means no content.
    #[serde(default)]
    pub content: Vec<ContentPart>,
    /// Tool calls the assistant asked for (assistant messages only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call this message answers (tool messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Optional sender name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    /// A message with the given role and content and nothing else.
    pub fn new(role: Role, content: Vec<ContentPart>) -> Self {
        Self {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// A user message.
    pub fn user(content: Vec<ContentPart>) -> Self {
        Self::new(Role::User, content)
    }

    /// A user message holding a single text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::user(vec![ContentPart::Text(TextPart { text: text.into() })])
    }

    /// A system message.
    pub fn system(content: Vec<ContentPart>) -> Self {
        Self::new(Role::System, content)
    }

    /// An assistant message with its tool calls.
    pub fn assistant(content: Vec<ContentPart>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            ..Self::new(Role::Assistant, content)
        }
    }

    /// A tool message answering the call `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, content: Vec<ContentPart>) -> Self {
        Self {
            tool_call_id: Some(tool_call_id.into()),
            ..Self::new(Role::Tool, content)
        }
    }

    /// The text parts joined with nothing in between (kosong's
    /// `extract_text()`); other parts are ignored.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text(TextPart { text }) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A tool call's arguments as the JSON object the native APIs (Anthropic, Gemini) want back.
///
/// Missing or empty arguments are `{}`. Arguments that are not a JSON object can only come from a
/// history another provider wrote (these APIs stream valid objects); they are sent as `{}` too, with a
/// warning, rather than failing every later request of the session as the reference does.
pub(crate) fn call_arguments(call: &ToolCall) -> serde_json::Map<String, serde_json::Value> {
    match call.function.arguments.as_deref().map(str::trim) {
        None | Some("") => serde_json::Map::new(),
        Some(text) => match serde_json::from_str(text) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => {
                tracing::warn!(id = %call.id, "tool call arguments are not a JSON object; sent as {{}}");
                serde_json::Map::new()
            }
        },
    }
}
