//! What the Anthropic, OpenAI Responses and Google providers are built from.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};

use crate::http::{ClientTimeouts, LazyClient, custom_header_map};
use crate::{ChatError, UserAgent};

/// The settings every HTTP provider shares, already resolved from the config file and the environment
/// by the caller.
#[derive(Clone)]
pub struct ProviderSettings {
    /// API root from the config (`base_url`); each provider appends its own path.
    pub base_url: String,
    /// The API key (`api_key`); empty sends none.
    pub api_key: String,
    /// Model name as the API knows it.
    pub model: String,
    /// Extra headers (`custom_headers`); they override ours, `User-Agent` included.
    pub custom_headers: BTreeMap<String, String>,
    /// Thinking on (`Some(true)`, effort "high"), off (`Some(false)`), or left to the API (`None`).
    pub thinking: Option<bool>,
    /// The session id, for APIs that take a user or cache key.
    pub session_id: Option<String>,
    /// The `User-Agent` header.
    pub user_agent: UserAgent,
    /// Time allowed to open the connection.
    pub connect_timeout: Duration,
    /// Time allowed between two reads of the response.
    pub read_timeout: Duration,
}

impl ProviderSettings {
    /// Settings with the reference's defaults for everything else: no extra headers, thinking not set,
    /// our own `User-Agent`, 5 s to connect and 600 s between reads.
    pub fn new(base_url: impl Into<String>, api_key: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: api_key.into(),
            model: model.into(),
            custom_headers: BTreeMap::new(),
            thinking: None,
            session_id: None,
            user_agent: UserAgent::ours(),
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(600),
        }
    }

    /// Refuses what no request could be made from: an empty base URL or model (the reference's own
    /// check), or a custom header that is not valid HTTP. Returns the validated custom headers.
    pub(crate) fn validate(&self) -> Result<HeaderMap, ChatError> {
        if self.base_url.trim().is_empty() || self.model.trim().is_empty() {
            return Err(ChatError::provider(
                "Cannot create LLM: missing base_url or model",
            ));
        }
        custom_header_map(&self.custom_headers, &self.model)
    }

    /// The model client with these timeouts, built on first use.
    pub(crate) fn client(&self) -> LazyClient {
        LazyClient::new(ClientTimeouts {
            connect: Some(self.connect_timeout),
            read: Some(self.read_timeout),
            total: None,
        })
    }

    /// `base_url` without trailing slashes, for appending a path.
    pub(crate) fn base(&self) -> &str {
        self.base_url.trim_end_matches('/')
    }

    /// The headers every JSON request carries: content type and `User-Agent`.
    pub(crate) fn json_headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Ok(value) = HeaderValue::from_str(&self.user_agent.get()) {
            headers.insert(USER_AGENT, value);
        }
        headers
    }
}

impl fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The API key and header values may be secrets: never print them.
        f.debug_struct("ProviderSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("custom_headers", &self.custom_headers.keys().collect::<Vec<_>>())
            .field("thinking", &self.thinking)
            .field("session_id", &self.session_id)
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}
