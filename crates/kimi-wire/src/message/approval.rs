//! Approval requests (server to client), the client's answer, and the `ApprovalResponse` event
//! that reports how a request was resolved.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::display::DisplayBlock;

/// How an approval request was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Allow this one action.
    Approve,
    /// Allow this action and every later action of the same kind in this session.
    ApproveForSession,
    /// Refuse the action.
    Reject,
}

/// Who is asking for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalSourceKind {
    /// The turn the client started with `prompt`.
    ForegroundTurn,
    /// An agent running in the background, possibly outside any turn.
    BackgroundAgent,
}

/// A request for the user to allow an action before a tool performs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ApprovalRequest {
    /// The request id; it is also the JSON-RPC id of the `request` message.
    pub id: String,
    /// The tool call that wants to act.
    pub tool_call_id: String,
    /// The tool asking (for example `Shell` or `WriteFile`).
    pub sender: String,
    /// The kind of action; `approve_for_session` covers later requests with the same action.
    pub action: String,
    /// A human description of what will happen.
    pub description: String,
    /// Whether a foreground turn or a background agent is asking.
    #[serde(default)]
    pub source_kind: Option<ApprovalSourceKind>,
    /// Id of the asking turn or agent run.
    #[serde(default)]
    pub source_id: Option<String>,
    /// Id of the subagent instance, when a subagent is asking.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// Type of that subagent.
    #[serde(default)]
    pub subagent_type: Option<String>,
    /// Human description of the source; unused so far.
    #[serde(default)]
    pub source_description: Option<String>,
    /// Blocks that show the action (a diff, a shell command, ...).
    #[serde(default)]
    pub display: Vec<DisplayBlock>,
}

/// Event: an approval request was resolved (by the client, by cancellation, or automatically by an
/// earlier `approve_for_session`). Read also under its v1 name `ApprovalRequestResolved`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ApprovalResponse {
    /// The id of the resolved [`ApprovalRequest`].
    pub request_id: String,
    /// The decision.
    pub response: ApprovalDecision,
    /// What the user wrote when rejecting (instructions for the model); `""` when none.
    #[serde(default)]
    pub feedback: String,
}

/// The client's answer to an [`ApprovalRequest`] (the `result` of its JSON-RPC response). It has
/// the same shape as the [`ApprovalResponse`] event.
pub type ApprovalAnswer = ApprovalResponse;
