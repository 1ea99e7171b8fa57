//! The HTTP side every provider shares: clients built on first use, custom headers, sending a request
//! and classifying what went wrong on the way.
//!
//! Building a `reqwest::Client` loads and parses the system's root certificates, which was the largest
//! single cost of starting a session (about half of the time to answer `initialize`). Most sessions
//! start far more often than they go online through a given client, so each client is built when it
//! is first needed and kept for the session.
//!
//! Failures keep the texts the reference's SDKs give (`Connection error.`, `Request timed out.`): they
//! reach the client in -32003 errors. A non-2xx answer is handed back as an `HttpFailure` so each
//! provider can word it the way its own SDK does.

use std::collections::BTreeMap;
use std::error::Error as _;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::error::parse_retry_after;
use crate::{ChatError, install_tls_provider};

/// The OpenAI and Anthropic SDKs' text for a request that could not be sent.
pub(crate) const CONNECTION_ERROR: &str = "Connection error.";
/// The OpenAI and Anthropic SDKs' text for a request that timed out.
pub(crate) const TIMEOUT_ERROR: &str = "Request timed out.";

/// The timeouts of one client; `None` leaves reqwest's default (none).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientTimeouts {
    /// Establishing the connection.
    pub connect: Option<Duration>,
    /// Between two reads of the response.
    pub read: Option<Duration>,
    /// The whole request.
    pub total: Option<Duration>,
}

/// A `reqwest::Client` with fixed settings, built by the first [`LazyClient::get`].
#[derive(Debug)]
pub struct LazyClient {
    timeouts: ClientTimeouts,
    client: OnceLock<reqwest::Client>,
}

impl LazyClient {
    /// A client with `timeouts`, not built yet.
    pub const fn new(timeouts: ClientTimeouts) -> Self {
        Self {
            timeouts,
            client: OnceLock::new(),
        }
    }

    /// The client, built now if this is the first call. A failed build is not kept: the next call
    /// tries again.
    pub fn get(&self) -> Result<&reqwest::Client, reqwest::Error> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        install_tls_provider();
        let ClientTimeouts { connect, read, total } = self.timeouts;
        let mut builder = reqwest::Client::builder();
        if let Some(connect) = connect {
            builder = builder.connect_timeout(connect);
        }
        if let Some(read) = read {
            builder = builder.read_timeout(read);
        }
        if let Some(total) = total {
            builder = builder.timeout(total);
        }
        let built = builder.build()?;
        // Two first calls racing both build; one client is kept, the other dropped.
        Ok(self.client.get_or_init(|| built))
    }
}

/// `custom_headers` from the config as a header map; a name or value that is not valid HTTP is refused
/// with an error naming the model's provider.
pub(crate) fn custom_header_map(
    headers: &BTreeMap<String, String>,
    model: &str,
) -> Result<HeaderMap, ChatError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) else {
            return Err(ChatError::provider(format!(
                "Invalid custom header {name:?} for provider of model {model}"
            )));
        };
        map.insert(name, value);
    }
    Ok(map)
}

/// A header value holding a secret (an API key, a token): never shown in debug output.
pub(crate) fn secret_header(value: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// A non-2xx answer, read whole: what every provider needs to word its `APIStatusError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpFailure {
    /// The HTTP status.
    pub status: u16,
    /// The body as text (empty when it could not be read).
    pub body: String,
    /// The server's wait hint (`retry-after-ms`, then `Retry-After`).
    pub retry_after: Option<Duration>,
    /// The server's request id (`x-request-id`, or Anthropic's `request-id`), for logs.
    pub request_id: Option<String>,
}

impl HttpFailure {
    /// Reads the status, the hint headers and the body of `response`.
    pub(crate) async fn read(response: reqwest::Response) -> Self {
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
        let request_id = header("x-request-id").or_else(|| header("request-id"));
        let body = response.text().await.unwrap_or_default();
        Self {
            status,
            body,
            retry_after,
            request_id,
        }
    }

    /// The `APIStatusError` with `message` and this answer's status and hints.
    pub(crate) fn into_error(self, message: String) -> ChatError {
        tracing::warn!(status = self.status, request_id = ?self.request_id, %message, "model request failed");
        ChatError::Status {
            status: self.status,
            message,
            retry_after: self.retry_after,
            request_id: self.request_id,
        }
    }
}

/// Posts `body` to `url` and returns the response when its status is 2xx; a transport failure is
/// classified by [`from_transport`], an error status is read into an [`HttpFailure`].
pub(crate) async fn post(
    client: &LazyClient,
    url: &str,
    headers: HeaderMap,
    body: Vec<u8>,
) -> Result<Result<reqwest::Response, HttpFailure>, ChatError> {
    let client = client
        .get()
        .map_err(|e| ChatError::provider(format!("Cannot create the HTTP client: {e}")))?;
    let response = client
        .post(url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .map_err(|e| from_transport(&e))?;
    if response.status().is_success() {
        Ok(Ok(response))
    } else {
        Ok(Err(HttpFailure::read(response).await))
    }
}

/// A failure to send the request or to read its answer.
pub(crate) fn from_transport(error: &reqwest::Error) -> ChatError {
    tracing::warn!(error = %chain(error), "model request transport error");
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
    tracing::warn!(error = %detail, "model response stream interrupted");
    ChatError::Connection {
        message: format!("Connection error: the response stream was interrupted ({detail})."),
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

    #[test]
    fn custom_headers_must_be_valid_http() {
        let good = BTreeMap::from([("X-Extra".to_owned(), "1".to_owned())]);
        assert_eq!(custom_header_map(&good, "m").unwrap()["x-extra"], "1");
        let bad = BTreeMap::from([("X Bad".to_owned(), "1".to_owned())]);
        assert_eq!(
            custom_header_map(&bad, "m").unwrap_err(),
            ChatError::provider("Invalid custom header \"X Bad\" for provider of model m")
        );
    }

    #[test]
    fn the_client_is_built_once_on_first_use() {
        let lazy = LazyClient::new(ClientTimeouts::default());
        assert!(lazy.client.get().is_none());
        let first: *const reqwest::Client = lazy.get().unwrap();
        let second: *const reqwest::Client = lazy.get().unwrap();
        assert_eq!(first, second);
    }
}
