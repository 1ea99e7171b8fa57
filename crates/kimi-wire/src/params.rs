//! Params and results of the six client methods: `initialize`, `prompt`, `steer`, `cancel`,
//! `set_plan_mode` and `replay`. `cancel` and `replay` take no params (anything is accepted).
//!
//! Reference: the `JSONRPC*Message.Params` models in `kimi_cli/wire/jsonrpc.py` and the result
//! dicts built in `kimi_cli/wire/server.py`, whose key order the results below keep.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::message::UserInput;

/// Params of `initialize`. Every key but `protocol_version` may be left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(optional_fields = nullable)]
pub struct InitializeParams {
    /// The protocol version the client speaks. Not checked: the server always answers with its own.
    pub protocol_version: String,
    /// Who the client is; appended to the provider User-Agent.
    #[serde(default)]
    pub client: Option<ClientInfo>,
    /// Tools the client implements; the model may call them and the server forwards each call as a
    /// `ToolCallRequest`.
    #[serde(default)]
    pub external_tools: Option<Vec<ExternalTool>>,
    /// Hook events the client wants to handle itself, through `HookRequest`s.
    #[serde(default)]
    pub hooks: Option<Vec<WireHookSubscription>>,
    /// What the client can do.
    #[serde(default)]
    pub capabilities: Option<ClientCapabilities>,
}

/// The client's name and version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(optional_fields = nullable)]
pub struct ClientInfo {
    /// The client's name.
    pub name: String,
    /// The client's version.
    #[serde(default)]
    pub version: Option<String>,
}

/// A tool the client implements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ExternalTool {
    /// The tool name; it must not clash with a built-in tool.
    pub name: String,
    /// What the tool does, for the model. An empty description is replaced by a placeholder.
    #[serde(default)]
    pub description: String,
    /// JSON Schema (draft 2020-12) of the tool's arguments.
    pub parameters: Map<String, Value>,
}

/// Capabilities the client declares in `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[ts(optional_fields = nullable)]
pub struct ClientCapabilities {
    /// The client can answer `QuestionRequest`s; otherwise the question tool is hidden and fails.
    #[serde(default)]
    pub supports_question: bool,
    /// The client supports plan mode; otherwise the plan-mode tools are hidden and fail.
    #[serde(default)]
    pub supports_plan_mode: bool,
    /// Extension (kimi-agent): the event types the client can parse; the server sends no other
    /// `event`s on this connection (requests are always sent). `"*"` stands for every type, including
    /// types added later; names the server does not know are ignored. When absent, the official
    /// TypeScript SDK 0.1.x (`client.name` starting with `kimi-agent-sdk/`, protocol below 1.10) gets
    /// the types its schema parses and every other client gets every type.
    #[serde(default)]
    pub events: Option<Vec<String>>,
    /// Extension (kimi-agent): every error response on this connection carries an
    /// `ErrorData` object as its `data` (`kind` plus what the client needs to act),
    /// instead of the reference's `data` (mostly `null`). Off unless the client sets it.
    #[serde(default)]
    pub error_data: bool,
}

/// The wildcard of `capabilities.events`.
pub(crate) const ANY_EVENT: &str = "*";

impl ClientCapabilities {
    /// Whether the client asked for every event type (`"*"` among `events`).
    pub fn wants_every_event(&self) -> bool {
        self.events
            .as_ref()
            .is_some_and(|events| events.iter().any(|e| e == ANY_EVENT))
    }
}

/// A client subscription to a hook event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct WireHookSubscription {
    /// The subscription id, repeated in each `HookRequest`.
    pub id: String,
    /// The hook event to handle (one of the server's `supported_events`; others are ignored).
    pub event: String,
    /// A regular expression the target must match; empty matches everything.
    #[serde(default)]
    pub matcher: String,
    /// Seconds to wait for the client's answer before allowing.
    #[serde(default = "default_hook_timeout")]
    pub timeout: u64,
}

fn default_hook_timeout() -> u64 {
    30
}

/// Result of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct InitializeResult {
    /// The server's protocol version (`"1.10"`).
    pub protocol_version: String,
    /// The server's name and version.
    pub server: ServerInfo,
    /// Slash commands the client may send as prompts.
    pub slash_commands: Vec<SlashCommandInfo>,
    /// The fate of the submitted external tools. The key is absent when no tools were processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub external_tools: Option<ExternalToolsResult>,
    /// Hook events the server knows and how many hooks are configured for each.
    pub hooks: HooksInfo,
    /// What the server can do.
    pub capabilities: ServerCapabilities,
    /// Extension (kimi-agent, docs/sandbox.md): how the model's commands are confined. Always sent by
    /// kimi-agent; absent from the reference's answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub sandbox: Option<SandboxInfo>,
    /// Extension: present when another kimi-agent process holds the session. This process then serves
    /// what only reads (`initialize`, `replay`) and refuses what would write until the holder exits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub session_held_by: Option<SessionHolderInfo>,
}

/// How the model's commands are confined (`initialize` extension; docs/sandbox.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct SandboxInfo {
    /// `read-only`, `workspace-write` or `danger-full-access` (the default: no confinement of files).
    pub mode: String,
    /// Whether commands may use the network (loopback included).
    pub network: bool,
    /// Whether the kernel enforces the mode; `false` with `error` set means every command is refused.
    /// `false` without `error` means there is nothing to enforce.
    pub enforced: bool,
    /// The kernel's Landlock ABI, when files are confined.
    pub landlock_abi: Option<u32>,
    /// Where commands may write, symlinks resolved; `null` when files are not confined.
    pub writable_roots: Option<Vec<String>>,
    /// Why the mode cannot be enforced on this machine.
    pub error: Option<String>,
}

/// Extension: the process that holds the session, in the `initialize` result of another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct SessionHolderInfo {
    /// The holder's pid; `null` when it could not be read.
    pub pid: Option<u32>,
}

/// The server's name and version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ServerInfo {
    /// The server's name.
    pub name: String,
    /// The server's version.
    pub version: String,
}

/// A slash command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct SlashCommandInfo {
    /// The command name, without the slash.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Other names it answers to.
    pub aliases: Vec<String>,
}

/// Which external tools were registered and which were refused.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct ExternalToolsResult {
    /// Names of the registered tools.
    pub accepted: Vec<String>,
    /// The refused tools, with the reason.
    pub rejected: Vec<RejectedTool>,
}

/// An external tool that was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct RejectedTool {
    /// The tool name.
    pub name: String,
    /// Why it was refused (for example a clash with a built-in tool or an invalid schema).
    pub reason: String,
}

/// Hook support of the server.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct HooksInfo {
    /// Every hook event name the server can raise.
    pub supported_events: Vec<String>,
    /// For each event with hooks configured, how many there are.
    pub configured: IndexMap<String, u32>,
}

/// Capabilities of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ServerCapabilities {
    /// The server may send `QuestionRequest`s (always true).
    pub supports_question: bool,
}

impl Default for ServerCapabilities {
    fn default() -> Self {
        Self {
            supports_question: true,
        }
    }
}

/// Params of `prompt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct PromptParams {
    /// What the user says.
    pub user_input: UserInput,
}

/// Result of `prompt`, sent when the turn is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct PromptResult {
    /// How the turn ended.
    pub status: PromptStatus,
    /// The step limit that was hit; present only with `max_steps_reached`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub steps: Option<u32>,
}

impl PromptResult {
    /// The turn finished normally.
    pub fn finished() -> Self {
        Self {
            status: PromptStatus::Finished,
            steps: None,
        }
    }

    /// The turn was cancelled.
    pub fn cancelled() -> Self {
        Self {
            status: PromptStatus::Cancelled,
            steps: None,
        }
    }

    /// The turn stopped at the step limit `steps`.
    pub fn max_steps_reached(steps: u32) -> Self {
        Self {
            status: PromptStatus::MaxStepsReached,
            steps: Some(steps),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
pub enum PromptStatus {
    /// The model finished answering.
    Finished,
    /// The client cancelled the turn (or closed the connection).
    Cancelled,
    /// The turn used its maximum number of steps.
    MaxStepsReached,
}

/// Params of `steer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
pub struct SteerParams {
    /// Input to add to the running turn.
    pub user_input: UserInput,
}

/// Result of `steer`: the input was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct SteerResult {
    /// Always `steered`.
    pub status: SteerStatus,
}

/// The only status of `steer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
pub enum SteerStatus {
    /// The input was queued for the running turn.
    #[default]
    Steered,
}

/// Params of `set_plan_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct SetPlanModeParams {
    /// Whether plan mode should be on.
    pub enabled: bool,
}

/// Result of `set_plan_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct SetPlanModeResult {
    /// Always `ok`.
    pub status: OkStatus,
    /// Whether plan mode is now on.
    pub plan_mode: bool,
}

impl SetPlanModeResult {
    /// The result reporting the new plan mode state.
    pub fn new(plan_mode: bool) -> Self {
        Self {
            status: OkStatus::Ok,
            plan_mode,
        }
    }
}

/// The only status of `set_plan_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
pub enum OkStatus {
    /// Done.
    #[default]
    Ok,
}

/// Result of `replay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ReplayResult {
    /// Whether every record was re-sent.
    pub status: ReplayStatus,
    /// How many events were re-sent.
    pub events: u64,
    /// How many requests were re-sent.
    pub requests: u64,
}

/// How a replay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
pub enum ReplayStatus {
    /// Every record was re-sent.
    Finished,
    /// The client cancelled part way; the counts are partial.
    Cancelled,
}

/// Result of `cancel`: `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct CancelResult {}
