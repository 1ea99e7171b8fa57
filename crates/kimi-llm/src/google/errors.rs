//! Gemini and Vertex AI failures with the texts the reference gives them.
//!
//! The google-genai SDK raises `APIError(code, response_json)` whose text is
//! `<code> <status>. <repr of the JSON>`; kosong prefixes it by class: `Authentication failed: ` (401),
//! `Permission denied: ` (403), `Rate limit exceeded: ` (429), `Server error: ` (5xx). The same applies
//! to an error object arriving inside the stream.

use std::time::Duration;

use serde_json::{Value, json};

use crate::ChatError;
use crate::http::HttpFailure;
use crate::py::repr_json;

/// A non-2xx answer as the reference reports it; a wait hint in the body (`RetryInfo.retryDelay`) is
/// used when the headers gave none.
pub(crate) fn from_failure(mut failure: HttpFailure) -> ChatError {
    let json = body_json(failure.status, &failure.body);
    if failure.retry_after.is_none() {
        failure.retry_after = retry_delay(&json);
    }
    let message = status_message(failure.status, &json);
    failure.into_error(message)
}

/// An `{"error": {...}}` object in the stream, with the code it names.
pub(crate) fn from_stream_error(value: &Value) -> ChatError {
    let code = value["error"]["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(500);
    tracing::warn!(body = %value, "error object in the response stream");
    ChatError::Status {
        status: code,
        message: status_message(code, value),
        retry_after: retry_delay(value),
        request_id: None,
    }
}

/// The body as the SDK reads it: JSON (a one-element list unwrapped), else the text and the status's
/// reason phrase.
fn body_json(status: u16, body: &str) -> Value {
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Array(mut items)) if items.len() == 1 => items.remove(0),
        Ok(value) => value,
        Err(_) => {
            let reason = reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or_default();
            json!({"message": body, "status": reason})
        }
    }
}

fn status_message(code: u16, json: &Value) -> String {
    let status = json
        .get("status")
        .or_else(|| json.get("error").and_then(|e| e.get("status")))
        .map_or_else(
            || "None".to_owned(),
            |s| s.as_str().map_or_else(|| repr_json(s), str::to_owned),
        );
    let text = format!("{code} {status}. {}", repr_json(json));
    match code {
        401 => format!("Authentication failed: {text}"),
        403 => format!("Permission denied: {text}"),
        429 => format!("Rate limit exceeded: {text}"),
        500..=599 => format!("Server error: {text}"),
        _ => text,
    }
}

/// `error.details[].retryDelay` of a `google.rpc.RetryInfo` (`"17s"`, `"1.5s"`).
fn retry_delay(json: &Value) -> Option<Duration> {
    json["error"]["details"].as_array()?.iter().find_map(|detail| {
        let text = detail["retryDelay"].as_str()?;
        let seconds: f64 = text.strip_suffix('s')?.parse().ok()?;
        (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn failure(status: u16, body: &str) -> HttpFailure {
        HttpFailure {
            status,
            body: body.to_owned(),
            retry_after: None,
            request_id: None,
        }
    }

    #[test]
    fn messages_follow_the_sdk_and_kosong() {
        let quota = r#"{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"17s"}]}}"#;
        let error = from_failure(failure(429, quota));
        assert_eq!(
            error.to_string(),
            "Rate limit exceeded: 429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'Quota exceeded.', \
             'status': 'RESOURCE_EXHAUSTED', 'details': [{'@type': 'type.googleapis.com/google.rpc.RetryInfo', \
             'retryDelay': '17s'}]}}"
        );
        assert_eq!(error.retry_after(), Some(Duration::from_secs(17)));
        let rows = [
            (
                400,
                r#"[{"error":{"code":400,"message":"Bad.","status":"INVALID_ARGUMENT"}}]"#,
                "400 INVALID_ARGUMENT. {'error': {'code': 400, 'message': 'Bad.', 'status': 'INVALID_ARGUMENT'}}",
            ),
            (
                401,
                r#"{"error":{"code":401,"message":"No.","status":"UNAUTHENTICATED"}}"#,
                "Authentication failed: 401 UNAUTHENTICATED. {'error': {'code': 401, 'message': 'No.', 'status': 'UNAUTHENTICATED'}}",
            ),
            (
                503,
                "upstream down",
                "Server error: 503 Service Unavailable. {'message': 'upstream down', 'status': 'Service Unavailable'}",
            ),
        ];
        for (status, body, expected) in rows {
            assert_eq!(from_failure(failure(status, body)).to_string(), expected);
        }
    }

    #[test]
    fn an_error_in_the_stream_uses_its_own_code() {
        let value = json!({"error": {"code": 503, "message": "Overloaded.", "status": "UNAVAILABLE"}});
        let error = from_stream_error(&value);
        assert_eq!(error.status_code(), Some(503));
        assert!(error.is_retryable());
        assert_eq!(
            error.to_string(),
            "Server error: 503 UNAVAILABLE. {'error': {'code': 503, 'message': 'Overloaded.', 'status': 'UNAVAILABLE'}}"
        );
    }
}
