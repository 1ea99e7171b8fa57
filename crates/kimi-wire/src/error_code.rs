//! JSON-RPC error codes and the reference's exact messages.
//!
//! Clients match on these strings, so every message here is byte-identical to the Python reference
//! (`kimi_cli/wire/jsonrpc.py` and `wire/server.py`). One constructor per kind keeps the strings in one place.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error_data::ErrorData;

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
///
/// An error the server builds also carries its [`ErrorData`] (`detail`), which replaces `data` for a
/// client that asked for errors as data (see [`crate::error_data`]); [`RpcError::for_client`] makes
/// that choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// One of the codes above.
    pub code: i64,
    /// Human-readable message; for the standard cases exactly the reference's text.
    pub message: String,
    /// Extra structured detail, `null` when there is none: what every client is sent.
    #[serde(default)]
    pub data: Option<Value>,
    /// What the error is, for clients that asked for errors as data; `None` for errors a client sent
    /// us (answers to our requests).
    #[serde(skip)]
    pub detail: Option<ErrorData>,
}

impl RpcError {
    /// An error with no data and no detail (a client's answer, or a test double's).
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
            detail: None,
        }
    }

    /// An error of `kind`, with no data for clients that did not ask for it.
    fn of(code: i64, message: impl Into<String>, detail: ErrorData) -> Self {
        Self {
            detail: Some(detail),
            ..Self::new(code, message)
        }
    }

    /// Attaches structured detail every client is sent.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// Sets what the error is for clients that asked for errors as data.
    #[must_use]
    pub fn with_detail(mut self, detail: ErrorData) -> Self {
        self.detail = Some(detail);
        self
    }

    /// The error as a client is sent it: with `detail` as its `data` when the client asked for errors
    /// as data (`error_data`) and there is a detail, else unchanged.
    pub fn for_client(&self, error_data: bool) -> std::borrow::Cow<'_, Self> {
        match &self.detail {
            Some(detail) if error_data => match serde_json::to_value(detail) {
                Ok(data) => std::borrow::Cow::Owned(Self {
                    data: Some(data),
                    ..self.clone()
                }),
                Err(_) => std::borrow::Cow::Borrowed(self),
            },
            _ => std::borrow::Cow::Borrowed(self),
        }
    }

    /// -32700 `Invalid JSON format`.
    pub fn invalid_json() -> Self {
        Self::of(PARSE_ERROR, "Invalid JSON format", ErrorData::InvalidJson)
    }

    /// -32700 `Invalid JSON format` for a line of `length` bytes over the `limit`, with
    /// `data: {"reason": "line too long", "length", "limit"}` for every client.
    pub fn line_too_long(length: usize, limit: usize) -> Self {
        let reason = "line too long";
        Self::of(
            PARSE_ERROR,
            "Invalid JSON format",
            ErrorData::LineTooLong {
                reason: reason.to_owned(),
                length: length as u64,
                limit: limit as u64,
            },
        )
        .with_data(serde_json::json!({"reason": reason, "length": length, "limit": limit}))
    }

    /// -32600 `Invalid request`.
    pub fn invalid_request() -> Self {
        Self::of(INVALID_REQUEST, "Invalid request", ErrorData::InvalidRequest)
    }

    /// -32600 `Invalid response`: a client answer that is neither a result nor an error.
    pub fn invalid_response() -> Self {
        Self::of(INVALID_REQUEST, "Invalid response", ErrorData::InvalidResponse)
    }

    /// -32601 `Unexpected method received: {method}`.
    pub fn method_not_found(method: &str) -> Self {
        Self::of(
            METHOD_NOT_FOUND,
            format!("Unexpected method received: {method}"),
            ErrorData::MethodNotFound {
                method: method.to_owned(),
            },
        )
    }

    /// -32602 ``Invalid parameters for method `{method}` ``; `path` is the JSON path of the first field
    /// that does not fit and `reason` why.
    pub fn invalid_params(method: &str, path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::of(
            INVALID_PARAMS,
            format!("Invalid parameters for method `{method}`"),
            ErrorData::InvalidParams {
                method: method.to_owned(),
                path: path.into(),
                reason: reason.into(),
            },
        )
    }

    /// -32603 with the given message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::of(INTERNAL_ERROR, message, ErrorData::InternalError)
    }

    /// -32000 `An agent turn is already in progress`.
    pub fn turn_in_progress() -> Self {
        Self::of(
            INVALID_STATE,
            "An agent turn is already in progress",
            ErrorData::TurnInProgress,
        )
    }

    /// -32000 `No agent turn is in progress`.
    pub fn no_turn_in_progress() -> Self {
        Self::of(INVALID_STATE, "No agent turn is in progress", ErrorData::NoTurn)
    }

    /// -32000 `Session {id} is in use by another kimi-agent process (pid {pid})`: a method that would
    /// write the session's files, refused because another process holds the session. `data` carries
    /// the same facts for programs: `{"session_id", "pid"}` (`pid` is `null`, and the message says
    /// `unknown`, when the holder's pid could not be read).
    pub fn session_in_use(session_id: &str, pid: Option<u32>) -> Self {
        let shown = pid.map_or_else(|| "unknown".to_owned(), |pid| pid.to_string());
        Self::of(
            INVALID_STATE,
            format!("Session {session_id} is in use by another kimi-agent process (pid {shown})"),
            ErrorData::SessionInUse {
                session_id: session_id.to_owned(),
                pid,
            },
        )
        .with_data(serde_json::json!({"session_id": session_id, "pid": pid}))
    }

    /// -32001 `LLM is not set`.
    pub fn llm_not_set() -> Self {
        Self::of(LLM_NOT_SET, "LLM is not set", ErrorData::LlmNotSet)
    }

    /// -32002 with the capability message built by the core; `model` lacks `capabilities`.
    pub fn llm_not_supported(message: impl Into<String>, model: &str, capabilities: Vec<String>) -> Self {
        Self::of(
            LLM_NOT_SUPPORTED,
            message,
            ErrorData::LlmNotSupported {
                model: model.to_owned(),
                capabilities,
            },
        )
    }

    /// -32003 with the provider's message; `detail` says what failed (a [`ErrorData::ProviderError`]
    /// or a cassette's).
    pub fn chat_provider(message: impl Into<String>, detail: ErrorData) -> Self {
        Self::of(CHAT_PROVIDER_ERROR, message, detail)
    }

    /// -32004: the account's login expired (a 401 from a provider that signs in with `login`).
    pub fn auth_expired() -> Self {
        Self::of(
            AUTH_EXPIRED,
            "Authentication failed. Your login session may have expired. Please run \"/login\" to sign in again.",
            ErrorData::AuthExpired,
        )
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn wire(error: &RpcError, error_data: bool) -> Value {
        serde_json::to_value(error.for_client(error_data).as_ref()).unwrap()
    }

    #[test]
    fn clients_that_did_not_ask_get_the_references_data() {
        let error = RpcError::no_turn_in_progress();
        assert_eq!(
            wire(&error, false),
            json!({"code": -32000, "message": "No agent turn is in progress", "data": null})
        );
        assert_eq!(
            wire(&error, true),
            json!({"code": -32000, "message": "No agent turn is in progress", "data": {"kind": "no_turn"}})
        );
    }

    #[test]
    fn data_everyone_gets_keeps_its_fields_and_gains_a_kind() {
        let error = RpcError::line_too_long(10, 4);
        assert_eq!(
            wire(&error, false)["data"],
            json!({"reason": "line too long", "length": 10, "limit": 4})
        );
        assert_eq!(
            wire(&error, true)["data"],
            json!({"kind": "line_too_long", "reason": "line too long", "length": 10, "limit": 4})
        );
        let error = RpcError::session_in_use("s1", None);
        assert_eq!(
            wire(&error, false)["data"],
            json!({"session_id": "s1", "pid": null})
        );
        assert_eq!(
            wire(&error, true)["data"],
            json!({"kind": "session_in_use", "session_id": "s1", "pid": null})
        );
    }

    #[test]
    fn a_clients_own_error_has_no_detail() {
        let error: RpcError = serde_json::from_value(json!({"code": -1, "message": "no"})).unwrap();
        assert_eq!(error, RpcError::new(-1, "no"));
        assert_eq!(wire(&error, true)["data"], Value::Null);
    }
}
