//! HTTP and transport failures mapped to [`ChatError`] with the texts the
//! reference's OpenAI SDK produces (`str(e)` is what reaches the client in a
//! -32003 error).

use std::error::Error as _;
use std::time::SystemTime;

use crate::ChatError;
use crate::error::parse_retry_after;
use crate::py::repr_json;

/// The OpenAI SDK's text for a request that could not be sent.
pub(crate) const CONNECTION_ERROR: &str = "Connection error.";
/// The OpenAI SDK's text for a request that timed out.
pub(crate) const TIMEOUT_ERROR: &str = "Request timed out.";

/// A failure to send the request or to read its answer.
pub(crate) fn from_transport(error: &reqwest::Error) -> ChatError {
    tracing::warn!(error = %chain(error), "chat completion transport error");
    if error.is_timeout() {
        ChatError::Timeout {
            message: TIMEOUT_ERROR.to_owned(),
        }
    } else {
        ChatError::Connection {
            message: CONNECTION_ERROR.to_owned(),
        }
    }
}

/// A failure while the answer was streaming in.
pub(crate) fn from_stream_transport(error: &reqwest::Error) -> ChatError {
    if error.is_timeout() {
        return from_transport(error);
    }
    let detail = chain(error);
    tracing::warn!(error = %detail, "chat completion stream interrupted");
    ChatError::Connection {
        message: format!("Connection error: the response stream was interrupted ({detail})."),
    }
}

/// A non-2xx answer, as `APIStatusError`: `Error code: N - <repr of the JSON
/// body>`, else the stripped body text, else `Error code: N`.
pub(crate) async fn from_response(response: reqwest::Response) -> ChatError {
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let retry_after = parse_retry_after(
        header("retry-after-ms").as_deref(),
        header("retry-after").as_deref(),
        SystemTime::now(),
    );
    let request_id = header("x-request-id");
    let body = response.text().await.unwrap_or_default();
    let message = status_message(status, &body);
    tracing::warn!(status, request_id = ?request_id, %message, "chat completion failed");
    ChatError::Status {
        status,
        message,
        retry_after,
        request_id,
    }
}

/// The OpenAI SDK's `APIStatusError` message for `status` and `body`.
pub(crate) fn status_message(status: u16, body: &str) -> String {
    let text = body.trim();
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(json) => format!("Error code: {status} - {}", repr_json(&json)),
        Err(_) if text.is_empty() => format!("Error code: {status}"),
        Err(_) => text.to_owned(),
    }
}

/// An HTTP error with every cause after it (`error sending request ...: ...: Connection refused`): the
/// top-level text alone rarely says what went wrong. Also used by the web tools.
pub fn chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn status_messages_follow_the_openai_sdk() {
        let rows = [
            (
                429,
                r#"{"error":{"message":"Rate limit","type":"rate_limit_error","param":null}}"#,
                "Error code: 429 - {'error': {'message': 'Rate limit', 'type': 'rate_limit_error', 'param': None}}",
            ),
            (502, "  Bad Gateway\n", "Bad Gateway"),
            (503, "", "Error code: 503"),
            (400, "\"plain\"", "Error code: 400 - 'plain'"),
        ];
        for (status, body, expected) in rows {
            assert_eq!(status_message(status, body), expected);
        }
    }
}
