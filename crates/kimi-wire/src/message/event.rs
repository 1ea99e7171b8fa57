//! Events: everything the server streams in `event` notifications, and their payloads.
//!
//! Reference: `kimi_cli/wire/types.py`. The envelope is `{"type": <Name>, "payload": {..}}`; the
//! payload lists every field, with `null` for absent optional values.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

use super::approval::ApprovalResponse;
use super::content::{ContentPart, UserInput};
use super::hook::{HookResolved, HookTriggered};
use super::status::StatusUpdate;
use super::tool::{ToolCall, ToolCallPart, ToolResult};

/// Everything the agent streams to the client in an `event` notification, in the specification's
/// order. Each variant is named after its wire type and carries the payload of the same name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(tag = "type", content = "payload")]
pub enum Event {
    /// A turn started.
    TurnBegin(TurnBegin),
    /// Steering input was added to the running turn.
    SteerInput(SteerInput),
    /// The turn ended.
    TurnEnd(TurnEnd),
    /// A step (one LLM call and its tool calls) started.
    StepBegin(StepBegin),
    /// The step was interrupted (cancelled or failed).
    StepInterrupted(StepInterrupted),
    /// The step's LLM call failed and will be retried.
    StepRetry(StepRetry),
    /// Hooks started running.
    HookTriggered(HookTriggered),
    /// Hooks finished.
    HookResolved(HookResolved),
    /// Context compaction started.
    CompactionBegin(CompactionBegin),
    /// Context compaction finished.
    CompactionEnd(CompactionEnd),
    /// MCP tools started loading.
    MCPLoadingBegin(MCPLoadingBegin),
    /// MCP tools finished loading.
    MCPLoadingEnd(MCPLoadingEnd),
    /// The agent's status changed.
    StatusUpdate(StatusUpdate),
    /// A system notification.
    Notification(Notification),
    /// A piece of assistant content (text, thinking, media).
    ContentPart(ContentPart),
    /// The model called a tool.
    ToolCall(ToolCall),
    /// More of the last tool call's arguments.
    ToolCallPart(ToolCallPart),
    /// A tool call finished.
    ToolResult(ToolResult),
    /// An approval request was resolved.
    #[serde(alias = "ApprovalRequestResolved")]
    ApprovalResponse(ApprovalResponse),
    /// An event from a subagent, wrapped.
    SubagentEvent(SubagentEvent),
    /// A plan to show inline.
    PlanDisplay(PlanDisplay),
    /// A side question (`/btw`) started.
    BtwBegin(BtwBegin),
    /// A side question finished.
    BtwEnd(BtwEnd),
}

impl Event {
    /// The wire type name (the envelope's `type`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::TurnBegin(_) => "TurnBegin",
            Self::SteerInput(_) => "SteerInput",
            Self::TurnEnd(_) => "TurnEnd",
            Self::StepBegin(_) => "StepBegin",
            Self::StepInterrupted(_) => "StepInterrupted",
            Self::StepRetry(_) => "StepRetry",
            Self::HookTriggered(_) => "HookTriggered",
            Self::HookResolved(_) => "HookResolved",
            Self::CompactionBegin(_) => "CompactionBegin",
            Self::CompactionEnd(_) => "CompactionEnd",
            Self::MCPLoadingBegin(_) => "MCPLoadingBegin",
            Self::MCPLoadingEnd(_) => "MCPLoadingEnd",
            Self::StatusUpdate(_) => "StatusUpdate",
            Self::Notification(_) => "Notification",
            Self::ContentPart(_) => "ContentPart",
            Self::ToolCall(_) => "ToolCall",
            Self::ToolCallPart(_) => "ToolCallPart",
            Self::ToolResult(_) => "ToolResult",
            Self::ApprovalResponse(_) => "ApprovalResponse",
            Self::SubagentEvent(_) => "SubagentEvent",
            Self::PlanDisplay(_) => "PlanDisplay",
            Self::BtwBegin(_) => "BtwBegin",
            Self::BtwEnd(_) => "BtwEnd",
        }
    }
}

/// A turn started. Sent before any other event of the turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct TurnBegin {
    /// The user input that started the turn, as the client sent it.
    pub user_input: UserInput,
}

/// Follow-up input sent with `steer` was added to the context, after the step that was running
/// and before the next one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct SteerInput {
    /// The steering input, as the client sent it.
    pub user_input: UserInput,
}

/// The turn ended. Sent after every other event of the turn; may be missing after an interruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct TurnEnd {}

/// A step started. Sent before any other event of the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct StepBegin {
    /// The step number within the turn, from 1.
    pub n: u32,
}

/// The step was interrupted, by cancellation or by an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct StepInterrupted {}

/// The step's LLM call failed with a retryable error and will be tried again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct StepRetry {
    /// The step number.
    pub n: u32,
    /// The attempt about to be made, from 1.
    pub next_attempt: u32,
    /// How many attempts the step gets in all.
    pub max_attempts: u32,
    /// Seconds to wait before the next attempt.
    pub wait_s: f64,
    /// Name of the error that caused the retry.
    pub error_type: String,
    /// HTTP status of the failed call, when there was one.
    #[serde(default)]
    pub status_code: Option<u16>,
}

/// Context compaction started. Sent within a step and followed directly by [`CompactionEnd`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct CompactionBegin {}

/// Context compaction finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct CompactionEnd {}

/// MCP tools started loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct MCPLoadingBegin {}

/// MCP tools finished loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct MCPLoadingEnd {}

/// A system notification for the client to show (for example a background task that finished).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct Notification {
    /// The notification id.
    pub id: String,
    /// A broad grouping, such as `task`.
    pub category: String,
    /// The specific kind within the category.
    #[serde(rename = "type")]
    pub r#type: String,
    /// What kind of thing raised it.
    pub source_kind: String,
    /// Id of the thing that raised it.
    pub source_id: String,
    /// A short title.
    pub title: String,
    /// The message text.
    pub body: String,
    /// How important it is (for example `info`, `warning`, `error`).
    pub severity: String,
    /// When it was raised, in seconds since the Unix epoch.
    pub created_at: f64,
    /// Extra structured data; `{}` when none.
    #[serde(default)]
    pub payload: Map<String, Value>,
}

/// An event that happened inside a subagent, forwarded with the identity of that subagent.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema, TS)]
pub struct SubagentEvent {
    /// The id of the parent's tool call that runs the subagent. Read also from the legacy key
    /// `task_tool_call_id`.
    #[serde(default)]
    pub parent_tool_call_id: Option<String>,
    /// The subagent instance id.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The built-in subagent type.
    #[serde(default)]
    pub subagent_type: Option<String>,
    /// The wrapped event, in its own `{type, payload}` envelope. Requests are never wrapped.
    pub event: Box<Event>,
}

/// The reference copies `task_tool_call_id` into `parent_tool_call_id` only when the new key is
/// absent (not when it is `null`), so presence is tracked apart from the value.
#[derive(Deserialize)]
struct SubagentEventRaw {
    #[serde(default, deserialize_with = "present")]
    parent_tool_call_id: Option<Option<String>>,
    #[serde(default)]
    task_tool_call_id: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    subagent_type: Option<String>,
    event: Box<Event>,
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

impl<'de> Deserialize<'de> for SubagentEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = SubagentEventRaw::deserialize(deserializer)?;
        Ok(Self {
            parent_tool_call_id: raw.parent_tool_call_id.unwrap_or(raw.task_tool_call_id),
            agent_id: raw.agent_id,
            subagent_type: raw.subagent_type,
            event: raw.event,
        })
    }
}

/// A plan shown inline in the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct PlanDisplay {
    /// The plan, in Markdown.
    pub content: String,
    /// The plan file it was read from.
    pub file_path: String,
}

/// A side question (`/btw`) started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct BtwBegin {
    /// Pairs this event with its [`BtwEnd`].
    pub id: String,
    /// The question as the user typed it.
    pub question: String,
}

/// A side question finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct BtwEnd {
    /// The id of the matching [`BtwBegin`].
    pub id: String,
    /// The answer; `null` if it failed.
    #[serde(default)]
    pub response: Option<String>,
    /// What went wrong; `null` on success.
    #[serde(default)]
    pub error: Option<String>,
}

macro_rules! impl_from_payload {
    ($($payload:ident),* $(,)?) => {
        $(impl From<$payload> for Event {
            fn from(payload: $payload) -> Self {
                Self::$payload(payload)
            }
        })*
    };
}

impl_from_payload!(
    TurnBegin,
    SteerInput,
    TurnEnd,
    StepBegin,
    StepInterrupted,
    StepRetry,
    HookTriggered,
    HookResolved,
    CompactionBegin,
    CompactionEnd,
    MCPLoadingBegin,
    MCPLoadingEnd,
    StatusUpdate,
    Notification,
    ContentPart,
    ToolCall,
    ToolCallPart,
    ToolResult,
    ApprovalResponse,
    SubagentEvent,
    PlanDisplay,
    BtwBegin,
    BtwEnd,
);
