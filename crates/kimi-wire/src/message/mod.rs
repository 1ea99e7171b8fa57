//! Protocol messages: every event, request, content part and display block of Wire 1.10, and the
//! client's answers to requests, with the reference's exact JSON.
//!
//! Serialization rules (reference: pydantic `model_dump(mode="json")`):
//! - fields in declaration order, every field always written, absent optionals as `null`;
//! - on read, optional and defaulted fields may be missing and unknown keys are ignored;
//! - events and requests travel as `{"type": <Name>, "payload": {..}}`.
//!
//! Layout: [`content`] (content parts, user input), [`display`] (display blocks), [`tool`] (tool
//! calls and results), [`status`] (`StatusUpdate`), [`approval`], [`question`], [`hook`],
//! [`event`] ([`Event`] and its payloads), [`request`] ([`Request`]). Everything is re-exported here.

pub mod approval;
pub mod content;
pub mod display;
pub mod event;
pub mod hook;
pub mod question;
pub mod request;
pub mod status;
pub mod tool;

pub use approval::{ApprovalAnswer, ApprovalDecision, ApprovalRequest, ApprovalResponse, ApprovalSourceKind};
pub use content::{
    AudioUrlPart, ContentPart, ImageUrlPart, MediaUrl, TextPart, ThinkPart, UserInput, VideoUrlPart,
};
pub use display::{DisplayBlock, TodoDisplayItem, TodoStatus};
pub use event::{
    BtwBegin, BtwEnd, CompactionBegin, CompactionEnd, Event, MCPLoadingBegin, MCPLoadingEnd, Notification,
    PlanDisplay, SteerInput, StepBegin, StepInterrupted, StepRetry, SubagentEvent, TurnBegin, TurnEnd,
};
pub use hook::{HookAction, HookAnswer, HookRequest, HookResolved, HookTriggered};
/// The ordered map used where the reference keeps a dict's insertion order.
pub use indexmap::IndexMap;
pub use question::{QuestionAnswer, QuestionItem, QuestionOption, QuestionRequest};
pub use request::{ClientRequest, Request, ToolCallRequest};
pub use status::{McpServerState, McpServerStatus, McpStatus, StatusUpdate, TokenUsage};
pub use tool::{FunctionBody, ToolCall, ToolCallPart, ToolOutput, ToolResult, ToolReturnValue};

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, de::Error as _};
use serde_json::Value;
use ts_rs::TS;

/// Any message on the agent's wire: what `wire.jsonl` records hold under `message`, and what
/// `replay` re-sends.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema, TS)]
#[serde(untagged)]
pub enum WireMessage {
    /// An event.
    Event(Event),
    /// A request.
    Request(Request),
}

impl WireMessage {
    /// The wire type name (the envelope's `type`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Event(event) => event.type_name(),
            Self::Request(request) => request.type_name(),
        }
    }
}

impl From<Event> for WireMessage {
    fn from(event: Event) -> Self {
        Self::Event(event)
    }
}

impl From<Request> for WireMessage {
    fn from(request: Request) -> Self {
        Self::Request(request)
    }
}

const REQUEST_TYPES: [&str; 4] = [
    "ApprovalRequest",
    "ToolCallRequest",
    "QuestionRequest",
    "HookRequest",
];

/// Dispatches on the envelope's `type` so a bad payload reports its own error instead of serde's
/// "did not match any variant".
impl<'de> Deserialize<'de> for WireMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let is_request = value
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|name| REQUEST_TYPES.contains(&name));
        if is_request {
            serde_json::from_value(value)
                .map(Self::Request)
                .map_err(D::Error::custom)
        } else {
            serde_json::from_value(value)
                .map(Self::Event)
                .map_err(D::Error::custom)
        }
    }
}
