//! The provider trait and what flows through it.

use futures::stream::BoxStream;
use kimi_wire::message::{ContentPart, TokenUsage, ToolCall, ToolCallPart};

use crate::{ChatError, Message};

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolSpec {
    /// Name the model calls it by.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// Everything one model call needs, borrowed from the loop.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// The system prompt.
    pub system_prompt: &'a str,
    /// Tools the model may call.
    pub tools: &'a [ToolSpec],
    /// The conversation so far, oldest first.
    pub history: &'a [Message],
}

/// One item of a streamed model answer.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A content part (text, thinking, media).
    Part(ContentPart),
    /// The start of a tool call; later `ToolCallPart`s extend its arguments.
    ToolCall(ToolCall),
    /// A fragment of the arguments of the most recent tool call.
    ToolCallPart(ToolCallPart),
    /// The provider's id for this message.
    MessageId(String),
    /// Token usage of this call.
    Usage(TokenUsage),
    /// Why the model stopped (`stop`, `tool_calls`, `end_turn`, `STOP`, `completed`, ...), as the
    /// provider said it; at most once, at the end.
    Finish(String),
}

/// The stream of one model answer.
pub type ChatStream = BoxStream<'static, Result<StreamEvent, ChatError>>;

/// A chat model backend.
///
/// Providers classify failures ([`ChatError::is_retryable`]) but never retry:
/// the loop does, so it can report each attempt.
#[async_trait::async_trait]
pub trait ChatProvider: Send + Sync + std::fmt::Debug {
    /// Model name as the reference reports it (e.g. `"scripted_echo"`).
    fn model_name(&self) -> &str;

    /// Starts one model call; parts stream one by one, in order.
    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError>;
}
