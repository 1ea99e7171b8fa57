//! One line of a cassette: a model call, what was asked and what came back.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Answer, ChatError, ChatRequest, Message, ToolSpec};

/// The format version written in each line.
pub const VERSION: u32 = 1;

/// Where the recording ran: the paths a request may mention, matched against this run's own when
/// the cassette is played elsewhere. Empty when unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPaths {
    /// The work dir.
    #[serde(default)]
    pub work_dir: String,
    /// The share directory (`~/.kimi`, `KIMI_SHARE_DIR`).
    #[serde(default)]
    pub share_dir: String,
    /// The user's home.
    #[serde(default)]
    pub home: String,
}

/// What the agent asked: everything a provider turns into its request body. A field left `null`
/// (a cassette written from a session, which does not keep the tools) is not compared on replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// The system prompt.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The tools offered, as sent.
    #[serde(default)]
    pub tools: Option<Vec<ToolSpec>>,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
}

impl RecordedRequest {
    /// The request as a provider received it.
    pub fn of(request: &ChatRequest<'_>) -> Self {
        Self {
            system_prompt: Some(request.system_prompt.to_owned()),
            tools: Some(request.tools.to_vec()),
            messages: request.history.to_vec(),
        }
    }
}

/// A failed call, as the loop saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedError {
    /// The failure's class (`APIStatusError`, `APIConnectionError`, `APITimeoutError`,
    /// `APIEmptyResponseError`, `ChatProviderError`, `CassetteError`).
    #[serde(rename = "type")]
    pub error_type: String,
    /// The HTTP status of an `APIStatusError`.
    #[serde(default)]
    pub status_code: Option<u16>,
    /// The error's text.
    pub message: String,
    /// Whether the loop retries it.
    #[serde(default)]
    pub retryable: bool,
    /// How long the server asked the client to wait, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl From<&ChatError> for RecordedError {
    fn from(error: &ChatError) -> Self {
        Self {
            error_type: error.error_type().to_owned(),
            status_code: error.status_code(),
            message: error.message().to_owned(),
            retryable: error.is_retryable(),
            retry_after_ms: error
                .retry_after()
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

impl RecordedError {
    /// The same failure again, for the loop to handle as it did when it was recorded.
    pub fn to_chat_error(&self) -> ChatError {
        let message = self.message.clone();
        match (self.error_type.as_str(), self.status_code) {
            ("APIStatusError", Some(status)) => ChatError::Status {
                status,
                message,
                retry_after: self.retry_after_ms.map(Duration::from_millis),
                request_id: None,
            },
            ("APIConnectionError", _) => ChatError::Connection { message },
            ("APITimeoutError", _) => ChatError::Timeout { message },
            ("APIEmptyResponseError", _) => ChatError::EmptyResponse { message },
            _ => ChatError::Provider { message },
        }
    }
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The format version ([`VERSION`]).
    pub cassette: u32,
    /// The type of the provider that answered (`kimi`, `anthropic`, ...; `session` for a call
    /// rebuilt from a session's files).
    pub provider: String,
    /// The model it was asked of.
    pub model: String,
    /// The generation parameters configured for that model (thinking, temperature, ...), for the
    /// reader; not compared on replay.
    #[serde(default)]
    pub parameters: Value,
    /// Where the recording ran.
    #[serde(default)]
    pub paths: RunPaths,
    /// What was asked.
    pub request: RecordedRequest,
    /// What came back: the whole answer, or what arrived before an error or before the agent
    /// stopped reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// How the call failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
    /// The agent stopped reading the answer before it ended (a cancelled turn).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abandoned: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn errors_survive_a_recording() {
        let errors = [
            ChatError::Status {
                status: 429,
                message: "slow down".into(),
                retry_after: Some(Duration::from_millis(1500)),
                request_id: Some("req-1".into()),
            },
            ChatError::Connection {
                message: "Connection error.".into(),
            },
            ChatError::Timeout {
                message: "Request timed out.".into(),
            },
            ChatError::EmptyResponse {
                message: "empty".into(),
            },
            ChatError::provider("bad"),
        ];
        for error in errors {
            let recorded = RecordedError::from(&error);
            let again = recorded.to_chat_error();
            assert_eq!(again.error_type(), error.error_type());
            assert_eq!(again.message(), error.message());
            assert_eq!(again.status_code(), error.status_code());
            assert_eq!(again.retry_after(), error.retry_after());
            assert_eq!(again.is_retryable(), error.is_retryable());
        }
    }

    #[test]
    fn a_line_reads_back_and_leaves_empty_fields_out() {
        let record = CallRecord {
            cassette: VERSION,
            provider: "kimi".into(),
            model: "k2".into(),
            parameters: Value::Null,
            paths: RunPaths::default(),
            request: RecordedRequest {
                system_prompt: Some("sys".into()),
                tools: None,
                messages: vec![Message::user_text("hi")],
            },
            answer: Some(Answer {
                content: vec![kimi_wire::message::ContentPart::text("hello")],
                ..Answer::default()
            }),
            error: None,
            abandoned: false,
        };
        let value = serde_json::to_value(&record).unwrap();
        assert_eq!(
            value["request"]["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
        );
        assert!(value.get("error").is_none() && value.get("abandoned").is_none());
        assert_eq!(serde_json::from_value::<CallRecord>(value).unwrap(), record);
    }
}
