//! JSON-RPC error codes and the reference's exact messages.
//!
//! Clients match on these strings, so every message here is byte-identical to the Python reference
//! (`kimi_cli/wire/jsonrpc.py` and `wire/server.py`). One constructor per kind keeps the strings in one place.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The line could not be parsed as JSON (also: a blank line, an oversized line).
pub const PARSE_ERROR: i64 = -32700;
/// The JSON is not a valid JSON-RPC 2.0 message.
pub const INVALID_REQUEST: i64 = -32600;
/// The method is not one of the six the server knows.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The params do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;
/// Anything unexpected inside the server.
pub const INTERNAL_ERROR: i64 = -32603;
/// The request is not allowed in the server's current state (a turn is or is not running).
pub const INVALID_STATE: i64 = -32000;
/// No chat model is configured.
pub const LLM_NOT_SET: i64 = -32001;
/// The model lacks a capability the input needs.
pub const LLM_NOT_SUPPORTED: i64 = -32002;
/// The chat provider failed (after retries).
pub const CHAT_PROVIDER_ERROR: i64 = -32003;
/// An OAuth provider rejected our credentials.
pub const AUTH_EXPIRED: i64 = -32004;

/// A JSON-RPC error object. `data` is always serialized (as `null` when empty), as the reference does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// One of the codes above.
    pub code: i64,
    /// Human-readable message; for the standard cases exactly the reference's text.
    pub message: String,
    /// Extra structured detail, `null` when there is none.
    #[serde(default)]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches structured detail.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32700 `Invalid JSON format`.
    pub fn invalid_json() -> Self {
        Self::new(PARSE_ERROR, "Invalid JSON format")
    }

    /// -32600 `Invalid request`.
    pub fn invalid_request() -> Self {
        Self::new(INVALID_REQUEST, "Invalid request")
    }

    /// -32600 `Invalid response`: a client answer that is neither a result nor an error.
    pub fn invalid_response() -> Self {
        Self::new(INVALID_REQUEST, "Invalid response")
    }

    /// -32601 `Unexpected method received: {method}`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Unexpected method received: {method}"))
    }

    /// -32602 ``Invalid parameters for method `{method}` ``.
    pub fn invalid_params(method: &str) -> Self {
        Self::new(
            INVALID_PARAMS,
            format!("Invalid parameters for method `{method}`"),
        )
    }

    /// -32603 with the given message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// -32000 `An agent turn is already in progress`.
    pub fn turn_in_progress() -> Self {
        Self::new(INVALID_STATE, "An agent turn is already in progress")
    }

    /// -32000 `No agent turn is in progress`.
    pub fn no_turn_in_progress() -> Self {
        Self::new(INVALID_STATE, "No agent turn is in progress")
    }

    /// -32000 `Session {id} is in use by another kimi-agent process (pid {pid})`: a method that would
    /// write the session's files, refused because another process holds the session. `data` carries
    /// the same facts for programs: `{"session_id", "pid"}` (`pid` is `null`, and the message says
    /// `unknown`, when the holder's pid could not be read).
    pub fn session_in_use(session_id: &str, pid: Option<u32>) -> Self {
        let shown = pid.map_or_else(|| "unknown".to_owned(), |pid| pid.to_string());
        Self::new(
            INVALID_STATE,
            format!("Session {session_id} is in use by another kimi-agent process (pid {shown})"),
        )
        .with_data(serde_json::json!({"session_id": session_id, "pid": pid}))
    }

    /// -32001 `LLM is not set`.
    pub fn llm_not_set() -> Self {
        Self::new(LLM_NOT_SET, "LLM is not set")
    }

    /// -32002 with the capability message built by the core.
    pub fn llm_not_supported(message: impl Into<String>) -> Self {
        Self::new(LLM_NOT_SUPPORTED, message)
    }

    /// -32003 with the provider's message.
    pub fn chat_provider(message: impl Into<String>) -> Self {
        Self::new(CHAT_PROVIDER_ERROR, message)
    }

    /// -32004: the account's login expired (a 401 from a provider that signs in with `login`).
    pub fn auth_expired() -> Self {
        Self::new(
            AUTH_EXPIRED,
            "Authentication failed. Your login session may have expired. Please run \"/login\" to sign in again.",
        )
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}
