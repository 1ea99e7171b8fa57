//! Errors as data: what `error.data` holds for a client that asked for it.
//!
//! The reference answers every error with a code, a message and `data: null`, so a client that wants to
//! act on an error must parse its text. A client that sets `capabilities.error_data` in `initialize`
//! gets instead, in every error response from then on, an object whose `kind` is a stable snake_case
//! name and whose other fields are what it needs to act (the provider's HTTP status and whether a
//! retry may help, the JSON path of the first bad parameter, ...). Codes and messages stay the
//! reference's. Other clients keep the reference's `data` (the reference's own suite compares it), and
//! so does every client before its `initialize`.
//!
//! Where kimi-agent already sent `data` to everyone (a line over the size cap, a session held by
//! another process), those fields keep their names and `kind` joins them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// `error.data` for clients that set `capabilities.error_data`; `kind` names the case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ErrorData {
    /// -32700: the line is not JSON (also a blank line, `NaN`, nesting deeper than 128 levels).
    InvalidJson,
    /// -32700: the line is longer than the server reads; it was skipped.
    LineTooLong {
        /// Always `"line too long"` (the field predates `kind`).
        reason: String,
        /// The line's length in bytes.
        length: u64,
        /// The cap in bytes (`KIMI_AGENT_MAX_LINE_BYTES`).
        limit: u64,
    },
    /// -32600: JSON, but not a JSON-RPC 2.0 message.
    InvalidRequest,
    /// -32600: an answer to a server request that is neither a result nor an error.
    InvalidResponse,
    /// -32601: a method the server does not have.
    MethodNotFound {
        /// The method as sent.
        method: String,
    },
    /// -32602: the params do not fit the method.
    InvalidParams {
        /// The method.
        method: String,
        /// The JSON path (`$.user_input[0].type`) of the first field that does not fit; `$` for the
        /// params themselves.
        path: String,
        /// Why it does not fit, in the JSON reader's words.
        reason: String,
    },
    /// -32000: a `prompt`, `replay` or `initialize` while a turn runs.
    TurnInProgress,
    /// -32000: a `steer` or `cancel` while no turn runs.
    NoTurn,
    /// -32000: a method that writes the session, while another process holds it.
    SessionInUse {
        /// The session.
        session_id: String,
        /// The holder's pid; `null` when it could not be read.
        pid: Option<u32>,
    },
    /// -32001: no model is configured.
    LlmNotSet,
    /// -32002: the input needs a capability the model lacks.
    LlmNotSupported {
        /// The model's name.
        model: String,
        /// The capabilities the input needs and the model lacks (`image_in`, `video_in`, `thinking`).
        capabilities: Vec<String>,
    },
    /// -32003: the model provider failed, after the retries the loop makes.
    ProviderError {
        /// The configured provider's type (`kimi`, `openai_legacy`, `anthropic`, ...).
        provider: String,
        /// The failure's class, as `StepRetry.error_type` names it (`APIStatusError`,
        /// `APIConnectionError`, `APITimeoutError`, `APIEmptyResponseError`, `ChatProviderError`).
        error_type: String,
        /// The HTTP status of an `APIStatusError`, `null` otherwise.
        status_code: Option<u16>,
        /// Whether the same request may succeed later (the loop retries such errors itself before it
        /// gives up, so this says "try again later", not "try again now").
        retryable: bool,
    },
    /// -32003: a `_cassette` provider was asked something other than what it recorded.
    CassetteMismatch {
        /// Which model call of this process (from 1).
        call: u64,
        /// The JSON path of the first difference in the request (`$.messages[3].content[0].text`).
        path: String,
    },
    /// -32003: a `_cassette` provider has no recorded call left.
    CassetteExhausted {
        /// Which model call of this process (from 1).
        call: u64,
    },
    /// -32004: the Kimi account's login expired; sign in again (`kimi-agent login`).
    AuthExpired,
    /// -32603: a session file could not be written (disk full, directory unwritable); the session is
    /// not being saved.
    SessionFileError,
    /// -32603: `replay` could not read `wire.jsonl`.
    ReplayFailed,
    /// -32603: the server shut down before it answered the request.
    ServerShuttingDown,
    /// -32603: anything else that went wrong inside the server.
    InternalError,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn kind_is_the_tag_and_fields_sit_beside_it() {
        let rows = [
            (ErrorData::NoTurn, json!({"kind": "no_turn"})),
            (
                ErrorData::InvalidParams {
                    method: "prompt".into(),
                    path: "$.user_input".into(),
                    reason: "missing field `user_input`".into(),
                },
                json!({"kind": "invalid_params", "method": "prompt", "path": "$.user_input",
                       "reason": "missing field `user_input`"}),
            ),
            (
                ErrorData::ProviderError {
                    provider: "kimi".into(),
                    error_type: "APIStatusError".into(),
                    status_code: Some(429),
                    retryable: true,
                },
                json!({"kind": "provider_error", "provider": "kimi", "error_type": "APIStatusError",
                       "status_code": 429, "retryable": true}),
            ),
        ];
        for (data, expected) in rows {
            let value = serde_json::to_value(&data).unwrap();
            assert_eq!(value, expected);
            assert_eq!(serde_json::from_value::<ErrorData>(value).unwrap(), data);
        }
    }

    /// The kinds docs/protocol.md lists ("Errors as data" table) are the enum's, in its order.
    #[test]
    fn the_documented_kinds_are_the_enums() {
        let schema = serde_json::to_value(schemars::schema_for!(ErrorData)).unwrap();
        let kinds: Vec<String> = schema["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|variant| {
                let kind = &variant["properties"]["kind"];
                kind["const"]
                    .as_str()
                    .or_else(|| kind["enum"][0].as_str())
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/protocol.md")).unwrap();
        let table = docs
            .split("| `kind` | code |")
            .nth(1)
            .expect("docs/protocol.md has the table of kinds");
        let documented: Vec<String> = table
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .map(|line| line.split('`').nth(1).unwrap_or_default().to_owned())
            .collect();
        assert_eq!(documented, kinds);
    }
}
