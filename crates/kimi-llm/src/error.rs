//! The error a chat provider reports, classified the way the loop needs it.

use std::time::{Duration, SystemTime};

use kimi_wire::ErrorData;

/// Parses a retry hint the way the OpenAI SDK does: `retry-after-ms`
/// (milliseconds, fractional allowed) first, then `Retry-After` as seconds
/// (fractional allowed) or as an HTTP date, measured from `now`. Negative,
/// unparsable or absent values give `None`; a date in the past gives zero.
pub(crate) fn parse_retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = retry_after?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Why a model call failed.
///
/// The variants follow kosong's exception classes one to one, so the loop can
/// report the same class name (`error_type`) and the same text (`Display`)
/// as the reference. `Display` is exactly the message, as Python's `str(exc)`
/// prints it: `APIStatusError(401, "Token expired")` displays as
/// `Token expired`, without the status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// The API answered with an HTTP error status (`APIStatusError`).
    ///
    /// For a real HTTP answer the text follows the OpenAI SDK the reference
    /// uses: `Error code: 429 - {'error': {...}}` when the body is JSON
    /// (rendered as Python's `repr` of it), the stripped body otherwise, or
    /// `Error code: 429` for an empty body.
    #[error("{message}")]
    Status {
        /// HTTP status code.
        status: u16,
        /// Human-readable text; this alone is what `Display` shows.
        message: String,
        /// How long the server asked us to wait (`retry-after-ms` or
        /// `Retry-After`), for the loop's backoff.
        retry_after: Option<Duration>,
        /// The server's `x-request-id`, for logs.
        request_id: Option<String>,
    },
    /// The connection failed (`APIConnectionError`).
    #[error("{message}")]
    Connection {
        /// Human-readable text.
        message: String,
    },
    /// The request timed out (`APITimeoutError`).
    #[error("{message}")]
    Timeout {
        /// Human-readable text.
        message: String,
    },
    /// The API answered with nothing usable (`APIEmptyResponseError`).
    #[error("{message}")]
    EmptyResponse {
        /// Human-readable text.
        message: String,
    },
    /// Any other provider failure (plain `ChatProviderError`); never retried.
    #[error("{message}")]
    Provider {
        /// Human-readable text.
        message: String,
    },
    /// A `_cassette` provider could not answer the call from its recording: the agent asked
    /// something else (`path` names the first difference) or the cassette has no call left
    /// (`path` is `None`). Never retried: the agent's behaviour changed.
    #[error("{message}")]
    Cassette {
        /// Human-readable text naming the call and the difference.
        message: String,
        /// Which model call of this process (from 1).
        call: u64,
        /// The JSON path of the first difference in the request; `None` when no call was left.
        path: Option<String>,
    },
}

impl ChatError {
    /// A plain provider error (`ChatProviderError`) with the given text.
    pub fn provider(message: impl Into<String>) -> Self {
        Self::Provider {
            message: message.into(),
        }
    }

    /// A status error without a `Retry-After` hint or request id.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        Self::Status {
            status,
            message: message.into(),
            retry_after: None,
            request_id: None,
        }
    }

    /// How long the server asked the client to wait before retrying, when it
    /// said so (status errors only). The loop uses it in place of its own
    /// backoff when it is longer.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            Self::Connection { .. }
            | Self::Timeout { .. }
            | Self::EmptyResponse { .. }
            | Self::Provider { .. }
            | Self::Cassette { .. } => None,
        }
    }

    /// Whether the loop should retry the call: connection failures, timeouts,
    /// empty responses, and HTTP 429, 500, 502, 503 and 504 (the reference's
    /// retry predicate), plus 529, Anthropic's "overloaded", which the
    /// reference's Anthropic SDK retries beneath the loop. 408 and 409 are
    /// deliberately not retried.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connection { .. } | Self::Timeout { .. } | Self::EmptyResponse { .. } => true,
            Self::Status { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504 | 529),
            Self::Provider { .. } | Self::Cassette { .. } => false,
        }
    }

    /// The Python class name of the equivalent kosong exception, as the wire
    /// reports it (for example in `StepRetry.error_type`).
    pub fn error_type(&self) -> &'static str {
        match self {
            Self::Status { .. } => "APIStatusError",
            Self::Connection { .. } => "APIConnectionError",
            Self::Timeout { .. } => "APITimeoutError",
            Self::EmptyResponse { .. } => "APIEmptyResponseError",
            Self::Provider { .. } => "ChatProviderError",
            Self::Cassette { .. } => "CassetteError",
        }
    }

    /// The HTTP status code, for status errors only.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error's text, the same string `Display` produces.
    pub fn message(&self) -> &str {
        match self {
            Self::Status { message, .. }
            | Self::Connection { message }
            | Self::Timeout { message }
            | Self::EmptyResponse { message }
            | Self::Provider { message }
            | Self::Cassette { message, .. } => message,
        }
    }

    /// What a client that asked for errors as data is told about this failure of the provider of
    /// type `provider` (`kimi`, `anthropic`, ...).
    pub fn error_data(&self, provider: &str) -> ErrorData {
        match self {
            Self::Cassette {
                call,
                path: Some(path),
                ..
            } => ErrorData::CassetteMismatch {
                call: *call,
                path: path.clone(),
            },
            Self::Cassette { call, path: None, .. } => ErrorData::CassetteExhausted { call: *call },
            _ => ErrorData::ProviderError {
                provider: provider.to_owned(),
                error_type: self.error_type().to_owned(),
                status_code: self.status_code(),
                retryable: self.is_retryable(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn display_is_the_bare_message() {
        let status = ChatError::status(401, "Token expired");
        assert_eq!(status.to_string(), "Token expired");
        assert_eq!(status.error_type(), "APIStatusError");
        assert_eq!(status.status_code(), Some(401));
        assert!(!status.is_retryable());
        assert_eq!(status.retry_after(), None);
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(7));
        let rows: [(Option<&str>, Option<&str>, Option<Duration>); 8] = [
            (None, None, None),
            (None, Some("2"), Some(Duration::from_secs(2))),
            (None, Some(" 1.5 "), Some(Duration::from_millis(1500))),
            (Some("250"), Some("9"), Some(Duration::from_millis(250))),
            (Some("bad"), Some("3"), Some(Duration::from_secs(3))),
            (None, Some(later.as_str()), Some(Duration::from_secs(7))),
            (None, Some(earlier.as_str()), Some(Duration::ZERO)),
            (None, Some("-1"), None),
        ];
        for (ms, header, expected) in rows {
            assert_eq!(parse_retry_after(ms, header, now), expected, "{ms:?} {header:?}");
        }
    }

    #[test]
    fn retryable_classes() {
        let cases = [
            (ChatError::Connection { message: "x".into() }, true),
            (ChatError::Timeout { message: "x".into() }, true),
            (ChatError::EmptyResponse { message: "x".into() }, true),
            (ChatError::provider("x"), false),
        ];
        for (err, retryable) in cases {
            assert_eq!(err.is_retryable(), retryable, "{err:?}");
            assert_eq!(err.status_code(), None);
        }
        for status in [429, 500, 502, 503, 504, 529] {
            let err = ChatError::status(status, "");
            assert!(err.is_retryable(), "{status}");
        }
        for status in [200, 400, 401, 403, 404, 408, 409] {
            let err = ChatError::status(status, "");
            assert!(!err.is_retryable(), "{status}");
        }
    }
}
