//! The JSON-RPC 2.0 envelope: classifying what the client sends and building what we write.
//!
//! Ids are strings, as in the reference (pydantic `id: str | None` refuses integers): an integer id makes
//! the message invalid (-32600). Outbound envelopes borrow their payload so an event is serialized once,
//! straight into the line that goes to stdout, with the reference's key order (`jsonrpc` first).

use serde::Serialize;
use serde_json::Value;

use crate::error_code::RpcError;
use crate::named::from_value_named;

/// The protocol version string of every envelope.
pub const JSONRPC_VERSION: &str = "2.0";

/// A message from the client, after the generic shape check and before params are validated.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A call with an id: must be answered.
    Request {
        /// Its id, which the answer carries back.
        id: String,
        /// The method called.
        method: String,
        /// Its params, not yet validated.
        params: Option<Value>,
    },
    /// A call without an id: never answered.
    Notification {
        /// The method called.
        method: String,
        /// Its params, not yet validated.
        params: Option<Value>,
    },
    /// The client's answer to one of our `request`s.
    Response {
        /// The id of our request it answers.
        id: String,
        /// Its result or error.
        outcome: ClientOutcome,
    },
}

/// What the client answered to a server->client request.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientOutcome {
    /// `result`: the answer itself, validated later by whoever asked.
    Result(Value),
    /// `error`: the client refused or failed.
    Error(RpcError),
}

/// Why a line is not a usable message; each maps to the error reply the reference gives (always `id: null`).
#[derive(Debug, Clone, PartialEq)]
pub enum Malformed {
    /// Not JSON at all (-32700).
    Json,
    /// JSON, but not a JSON-RPC 2.0 message (-32600 `Invalid request`).
    Request,
    /// Shaped like a response but carrying neither a valid result nor a valid error (-32600 `Invalid response`).
    Response,
}

impl Malformed {
    /// The error reply for this kind of malformed line.
    pub fn to_error(&self) -> RpcError {
        match self {
            Malformed::Json => RpcError::invalid_json(),
            Malformed::Request => RpcError::invalid_request(),
            Malformed::Response => RpcError::invalid_response(),
        }
    }
}

/// Classifies one line. `Ok(None)` means a message the reference silently ignores.
///
/// The reference first validates every message against one generic model (`jsonrpc` absent or `"2.0"`,
/// `method` and `id` strings or null, `error` a well-formed error object or null): anything else is
/// `Invalid request`, whatever its kind. A message without a method is then read as an answer; one that
/// is neither a result nor an error is ignored, except that an explicit `"method": null` makes it
/// `Invalid response` (the reference's union of inbound models then has no member left that fits).
pub fn classify(line: &str) -> Result<Option<Incoming>, Malformed> {
    let value: Value = serde_json::from_str(line).map_err(|_| Malformed::Json)?;
    let Value::Object(mut obj) = value else {
        return Err(Malformed::Request);
    };
    // Absent means "2.0" (the reference's model has that default); anything else must be exactly it.
    if obj
        .get("jsonrpc")
        .is_some_and(|v| v.as_str() != Some(JSONRPC_VERSION))
    {
        return Err(Malformed::Request);
    }
    let error = match obj.remove("error") {
        None | Some(Value::Null) => None,
        Some(error) => Some(from_value_named::<RpcError>(&error).map_err(|_| Malformed::Request)?),
    };
    let method_given = obj.contains_key("method");
    let method = match obj.remove("method") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m),
        Some(_) => return Err(Malformed::Request),
    };
    let id = match obj.remove("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(_) => return Err(Malformed::Request),
    };
    match (method, id) {
        (Some(method), Some(id)) => Ok(Some(Incoming::Request {
            id,
            method,
            params: obj.remove("params"),
        })),
        (Some(method), None) => Ok(Some(Incoming::Notification {
            method,
            params: obj.remove("params"),
        })),
        (None, Some(id)) => {
            let outcome = match (error, obj.remove("result")) {
                (Some(error), _) => ClientOutcome::Error(error),
                (None, Some(result)) => ClientOutcome::Result(result),
                (None, None) if method_given => return Err(Malformed::Response),
                (None, None) => return Ok(None),
            };
            Ok(Some(Incoming::Response { id, outcome }))
        }
        (None, None) => Ok(None),
    }
}

#[derive(Serialize)]
struct NotificationEnvelope<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct RequestEnvelope<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    id: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct ResultEnvelope<'a, R: Serialize> {
    jsonrpc: &'static str,
    id: &'a str,
    result: &'a R,
}

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    jsonrpc: &'static str,
    id: Option<&'a str>,
    error: &'a RpcError,
}

/// `{"jsonrpc":"2.0","method":..,"params":..}`.
pub fn notification_line<P: Serialize>(method: &str, params: &P) -> serde_json::Result<String> {
    serde_json::to_string(&NotificationEnvelope {
        jsonrpc: JSONRPC_VERSION,
        method,
        params,
    })
}

/// An `event` notification line, `{"jsonrpc":"2.0","method":"event","params":<message>}`, that also
/// lends out its `<message>` (`{"type":..,"payload":..}`): the event is serialized once, for the client and
/// for the session's wire.jsonl alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLine {
    line: String,
}

impl EventLine {
    /// What comes before the message in every event line.
    pub const HEAD: &'static str = r#"{"jsonrpc":"2.0","method":"event","params":"#;

    /// Serializes `event` (or any message) into its line.
    pub fn new<P: Serialize + ?Sized>(message: &P) -> serde_json::Result<Self> {
        // The envelope's fields serialize in order and compactly, so the line is HEAD, the message, `}`.
        let line = notification_line("event", &message)?;
        debug_assert!(line.starts_with(Self::HEAD) && line.ends_with('}'));
        Ok(Self { line })
    }

    /// The line around an already serialized message (replay forwards recorded messages this way).
    pub fn wrap(message: &str) -> Self {
        let mut line = String::with_capacity(Self::HEAD.len() + message.len() + 1);
        line.push_str(Self::HEAD);
        line.push_str(message);
        line.push('}');
        Self { line }
    }

    /// The message: `{"type":..,"payload":..}`.
    pub fn message(&self) -> &str {
        &self.line[Self::HEAD.len()..self.line.len() - 1]
    }

    /// The whole line, for the client.
    pub fn into_line(self) -> String {
        self.line
    }
}

/// `{"jsonrpc":"2.0","method":..,"id":..,"params":..}`.
pub fn request_line<P: Serialize>(method: &str, id: &str, params: &P) -> serde_json::Result<String> {
    serde_json::to_string(&RequestEnvelope {
        jsonrpc: JSONRPC_VERSION,
        method,
        id,
        params,
    })
}

/// `{"jsonrpc":"2.0","id":..,"result":..}`.
pub fn result_line<R: Serialize>(id: &str, result: &R) -> serde_json::Result<String> {
    serde_json::to_string(&ResultEnvelope {
        jsonrpc: JSONRPC_VERSION,
        id,
        result,
    })
}

/// `{"jsonrpc":"2.0","id":..|null,"error":{..}}`; never fails (the error object is plain data).
pub fn error_line(id: Option<&str>, error: &RpcError) -> String {
    serde_json::to_string(&ErrorEnvelope {
        jsonrpc: JSONRPC_VERSION,
        id,
        error,
    })
    .unwrap_or_else(|_| {
        // Serializing strings and integers cannot fail; keep a valid line regardless.
        String::from(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error","data":null}}"#,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn classifies_requests_notifications_and_responses() {
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":"1","method":"prompt","params":{"user_input":"hi"}}"#),
            Ok(Some(Incoming::Request {
                id: "1".into(),
                method: "prompt".into(),
                params: Some(json!({"user_input": "hi"}))
            }))
        );
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","method":"cancel"}"#),
            Ok(Some(Incoming::Notification {
                method: "cancel".into(),
                params: None
            }))
        );
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#),
            Ok(Some(Incoming::Response {
                id: "a".into(),
                outcome: ClientOutcome::Result(json!({"x":1}))
            }))
        );
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"no"}}"#),
            Ok(Some(Incoming::Response {
                id: "a".into(),
                outcome: ClientOutcome::Error(RpcError::new(-1, "no"))
            }))
        );
        assert_eq!(classify(r#"{"jsonrpc":"2.0"}"#), Ok(None));
        // `jsonrpc` may be left out.
        assert_eq!(
            classify(r#"{"id":"1","method":"cancel"}"#),
            Ok(Some(Incoming::Request {
                id: "1".into(),
                method: "cancel".into(),
                params: None
            }))
        );
    }

    #[test]
    fn rejects_what_the_reference_rejects() {
        for (line, expected) in [
            ("{not-json}", Malformed::Json),
            ("", Malformed::Json),
            (r#"{"jsonrpc":"2.1","id":"bad"}"#, Malformed::Request),
            (
                r#"[{"jsonrpc":"2.0","id":"1","method":"prompt"}]"#,
                Malformed::Request,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"prompt"}"#,
                Malformed::Request,
            ),
            (r#"{"jsonrpc":"2.0","id":"1","method":5}"#, Malformed::Request),
            (r#""just a string""#, Malformed::Request),
            (r#"{"jsonrpc":"2.0","id":"1","method":null}"#, Malformed::Response),
            // A bad `error` makes any message invalid, before its kind is looked at.
            (
                r#"{"jsonrpc":"2.0","id":"1","error":{"code":"x"}}"#,
                Malformed::Request,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"1","error":[1,"positional"]}"#,
                Malformed::Request,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"1","method":"cancel","error":5}"#,
                Malformed::Request,
            ),
            (
                r#"{"jsonrpc":null,"id":"1","method":"cancel"}"#,
                Malformed::Request,
            ),
        ] {
            assert_eq!(classify(line), Err(expected), "line: {line}");
        }
    }

    #[test]
    fn an_answer_that_is_neither_result_nor_error_is_ignored() {
        // The reference reads it as a `replay` or `cancel` with defaulted fields, then drops it as not
        // being an answer.
        for line in [
            r#"{"jsonrpc":"2.0","id":"1"}"#,
            r#"{"jsonrpc":"2.0","id":"1","error":null,"params":{"a":1}}"#,
        ] {
            assert_eq!(classify(line), Ok(None), "line: {line}");
        }
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":"1","result":null}"#),
            Ok(Some(Incoming::Response {
                id: "1".into(),
                outcome: ClientOutcome::Result(Value::Null)
            }))
        );
    }

    #[test]
    fn envelopes_keep_the_reference_key_order() {
        assert_eq!(
            notification_line("event", &json!({"type":"TurnEnd","payload":{}})).unwrap(),
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"TurnEnd","payload":{}}}"#
        );
        assert_eq!(
            request_line("request", "r1", &json!({})).unwrap(),
            r#"{"jsonrpc":"2.0","method":"request","id":"r1","params":{}}"#
        );
        assert_eq!(
            result_line("p", &json!({"status":"finished"})).unwrap(),
            r#"{"jsonrpc":"2.0","id":"p","result":{"status":"finished"}}"#
        );
        assert_eq!(
            error_line(None, &RpcError::invalid_json()),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Invalid JSON format","data":null}}"#
        );
    }
}
