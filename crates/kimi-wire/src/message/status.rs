//! `StatusUpdate` and what it carries: token usage and MCP startup progress.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// A change in the agent's status. Every key is always present; `null` means "unchanged since the
/// previous update".
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct StatusUpdate {
    /// Share of the context window in use, from 0 to 1.
    #[serde(default)]
    pub context_usage: Option<f64>,
    /// Tokens currently in the context.
    #[serde(default)]
    pub context_tokens: Option<u64>,
    /// Size of the context window in tokens.
    #[serde(default)]
    pub max_context_tokens: Option<u64>,
    /// Token usage of the step that just finished.
    #[serde(default)]
    pub token_usage: Option<TokenUsage>,
    /// Provider message id of the step that just finished.
    #[serde(default)]
    pub message_id: Option<String>,
    /// Whether plan mode (read-only tools) is on.
    #[serde(default)]
    pub plan_mode: Option<bool>,
    /// Progress of MCP server startup.
    #[serde(default)]
    pub mcp_status: Option<McpStatus>,
}

/// Token counts reported by the provider for one LLM call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
pub struct TokenUsage {
    /// Input tokens that were neither read from nor written to the provider's cache.
    pub input_other: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
    /// Input tokens served from the provider's cache.
    #[serde(default)]
    pub input_cache_read: u64,
    /// Input tokens written to the provider's cache.
    #[serde(default)]
    pub input_cache_creation: u64,
}

impl TokenUsage {
    /// All input tokens: uncached, cache reads and cache writes.
    pub fn input(&self) -> u64 {
        self.input_other + self.input_cache_read + self.input_cache_creation
    }

    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input() + self.output
    }
}

/// A snapshot of MCP server startup (the reference's `MCPStatusSnapshot`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct McpStatus {
    /// True while servers are still being connected.
    pub loading: bool,
    /// How many servers are connected.
    pub connected: u32,
    /// How many servers are configured.
    pub total: u32,
    /// How many tools the connected servers provide in all.
    pub tools: u32,
    /// One entry per configured server.
    #[serde(default)]
    pub servers: Vec<McpServerStatus>,
}

/// The state of one MCP server during startup (the reference's `MCPServerSnapshot`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct McpServerStatus {
    /// The server's name in the MCP configuration.
    pub name: String,
    /// Where its connection stands.
    pub status: McpServerState,
    /// Names of the tools it provides (empty until connected).
    #[serde(default)]
    pub tools: Vec<String>,
}

/// Connection state of an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
pub enum McpServerState {
    /// Not started yet.
    Pending,
    /// Starting or handshaking.
    Connecting,
    /// Ready; its tools are available.
    Connected,
    /// Could not be started or connected.
    Failed,
    /// Needs authorization (OAuth) before it can connect.
    Unauthorized,
}
