//! HTTP failures mapped to [`ChatError`] with the texts the reference's OpenAI SDK produces (`str(e)` is
//! what reaches the client in a -32003 error). The Anthropic SDK words them the same way.

use crate::ChatError;
use crate::http::HttpFailure;
use crate::py::repr_json;

/// A non-2xx answer, as `APIStatusError`: `Error code: N - <repr of the JSON body>`, else the stripped
/// body text, else `Error code: N`.
pub(crate) fn from_failure(failure: HttpFailure) -> ChatError {
    let message = status_message(failure.status, &failure.body);
    failure.into_error(message)
}

/// The OpenAI (and Anthropic) SDK's `APIStatusError` message for `status` and `body`.
pub(crate) fn status_message(status: u16, body: &str) -> String {
    let text = body.trim();
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(json) => format!("Error code: {status} - {}", repr_json(&json)),
        Err(_) if text.is_empty() => format!("Error code: {status}"),
        Err(_) => text.to_owned(),
    }
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
