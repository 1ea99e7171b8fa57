//! Hook events and client-side hook requests.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

/// A hook's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
pub enum HookAction {
    /// Let the action go ahead.
    #[default]
    Allow,
    /// Stop the action.
    Block,
}

/// Event: a batch of matching hooks started running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct HookTriggered {
    /// The hook event, such as `PreToolUse` or `Stop`.
    pub event: String,
    /// What the hooks are about: a tool name, an agent name, ...; may be empty.
    #[serde(default)]
    pub target: String,
    /// How many hooks run in parallel.
    #[serde(default = "one")]
    pub hook_count: u32,
}

fn one() -> u32 {
    1
}

/// Event: a batch of hooks finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct HookResolved {
    /// The hook event.
    pub event: String,
    /// Same as in [`HookTriggered`].
    #[serde(default)]
    pub target: String,
    /// `block` if any hook blocked, `allow` otherwise.
    #[serde(default)]
    pub action: HookAction,
    /// Why it was blocked; empty when allowed.
    #[serde(default)]
    pub reason: String,
    /// Wall-clock time of the whole batch, in milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
}

/// A request for the client to run its own hook logic for an event it subscribed to in
/// `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct HookRequest {
    /// The request id; it is also the JSON-RPC id of the `request` message.
    pub id: String,
    /// The subscription that matched.
    #[serde(default)]
    pub subscription_id: String,
    /// The hook event.
    pub event: String,
    /// What triggered it: a tool name, an agent name, ...
    #[serde(default)]
    pub target: String,
    /// The full event payload, the same object command hooks read on stdin.
    #[serde(default)]
    pub input_data: Map<String, Value>,
}

/// The client's answer to a [`HookRequest`] (the reference's `HookResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct HookAnswer {
    /// The id of the answered request.
    pub request_id: String,
    /// The verdict; `allow` when absent.
    #[serde(default)]
    pub action: HookAction,
    /// Why it blocks; empty when allowed.
    #[serde(default)]
    pub reason: String,
}
