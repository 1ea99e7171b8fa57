//! The error a chat provider reports, classified the way the loop needs it.

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
    #[error("{message}")]
    Status {
        /// HTTP status code.
        status: u16,
        /// Human-readable text; this alone is what `Display` shows.
        message: String,
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
}

impl ChatError {
    /// A plain provider error (`ChatProviderError`) with the given text.
    pub fn provider(message: impl Into<String>) -> Self {
        Self::Provider {
            message: message.into(),
        }
    }

    /// Whether the loop should retry the call: connection failures, timeouts,
    /// empty responses, and HTTP 429, 500, 502, 503 and 504 (the reference's
    /// retry predicate; 408/409/529 are deliberately not retried).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connection { .. } | Self::Timeout { .. } | Self::EmptyResponse { .. } => true,
            Self::Status { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504),
            Self::Provider { .. } => false,
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
            | Self::Provider { message } => message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn display_is_the_bare_message() {
        let status = ChatError::Status {
            status: 401,
            message: "Token expired".into(),
        };
        assert_eq!(status.to_string(), "Token expired");
        assert_eq!(status.error_type(), "APIStatusError");
        assert_eq!(status.status_code(), Some(401));
        assert!(!status.is_retryable());
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
        for status in [429, 500, 502, 503, 504] {
            let err = ChatError::Status {
                status,
                message: String::new(),
            };
            assert!(err.is_retryable(), "{status}");
        }
        for status in [400, 401, 403, 404, 408, 409, 529] {
            let err = ChatError::Status {
                status,
                message: String::new(),
            };
            assert!(!err.is_retryable(), "{status}");
        }
    }
}
