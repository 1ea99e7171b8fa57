//! `kimi` and `openai_legacy`: OpenAI-compatible chat completions, streamed.
//!
//! One client serves both provider types; [`Flavor`] selects the differences
//! the reference has between kosong's `Kimi` and `OpenAILegacy`:
//!
//! | | Kimi | OpenAI legacy |
//! |---|---|---|
//! | reasoning read and sent back as | `reasoning_content` | the configured `reasoning_key` (default `reasoning_content`; empty: none) |
//! | thinking on / off | `thinking: {type: enabled / disabled}` | `reasoning_effort: "high"` / `null` |
//! | `max_completion_tokens` | per request, bounded by the context left | only an explicit cap |
//! | `prompt_cache_key` | the session id | not sent |
//! | blank assistant content beside tool calls | omitted | sent |
//!
//! Requests go through our own serde values rather than a typed SDK so that
//! Kimi's extras survive both ways (see shared/reference/crates.md, Q2).
//! Retries are the loop's job: every failure is classified as a [`ChatError`]
//! and returned. Dropping the returned stream drops the HTTP response and with
//! it the connection.

pub(crate) mod errors;
mod request;
pub(crate) mod stream;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt as _;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};

pub use request::estimate_request_tokens;

use crate::http::{ClientTimeouts, LazyClient, custom_header_map, from_transport, secret_header};
use crate::{ChatError, ChatProvider, ChatRequest, ChatStream};

/// Which server dialect to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Moonshot's Kimi API (provider type `kimi`).
    Kimi,
    /// Any OpenAI-compatible chat-completions server (provider type `openai_legacy`).
    OpenAiLegacy,
}

/// How `max_completion_tokens` is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompletionBudget {
    /// Kimi: whatever the context has left (minus a safety margin); others:
    /// not sent. The default, as when `KIMI_MODEL_MAX_COMPLETION_TOKENS` is unset.
    #[default]
    Auto,
    /// At most this many, and for Kimi also no more than the context has left
    /// (`KIMI_MODEL_MAX_COMPLETION_TOKENS` > 0).
    Cap(u64),
    /// Never sent (`KIMI_MODEL_MAX_COMPLETION_TOKENS` <= 0).
    Unlimited,
}

impl CompletionBudget {
    /// The budget `KIMI_MODEL_MAX_COMPLETION_TOKENS` (or its alias
    /// `KIMI_MODEL_MAX_TOKENS`) asks for; an unparsable value is ignored, as
    /// the reference does.
    pub fn from_env_value(value: Option<&str>) -> Self {
        match value
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .and_then(|v| v.parse::<i64>().ok())
        {
            None => Self::Auto,
            Some(n) if n > 0 => Self::Cap(n.unsigned_abs()),
            Some(_) => Self::Unlimited,
        }
    }

    fn cap(self) -> Option<u64> {
        match self {
            Self::Cap(n) => Some(n),
            Self::Auto | Self::Unlimited => None,
        }
    }
}

/// The `User-Agent` sent with every request, shared between the provider and
/// whoever learns the client's name later (the wire's `initialize`).
///
/// Cloning shares the value; [`UserAgent::set_client`] takes effect on the
/// next request.
#[derive(Clone)]
pub struct UserAgent(Arc<RwLock<String>>);

impl UserAgent {
    /// `kimi-agent/<version>`.
    pub fn ours() -> Self {
        Self::new(format!("kimi-agent/{}", env!("CARGO_PKG_VERSION")))
    }

    /// A fixed value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::new(RwLock::new(value.into())))
    }

    /// Appends the client that drives us, e.g. `kimi-agent/0.1.0
    /// kimi-agent-sdk/1.2.0`. Spaces in the name become `-` and control
    /// characters are dropped, so the header stays valid.
    pub fn set_client(&self, name: &str, version: Option<&str>) {
        let token = |s: &str| -> String {
            s.trim()
                .chars()
                .filter(|c| !c.is_control())
                .map(|c| if c.is_whitespace() { '-' } else { c })
                .collect()
        };
        let mut product = token(name);
        if product.is_empty() {
            return;
        }
        if let Some(version) = version.map(token).filter(|v| !v.is_empty()) {
            product = format!("{product}/{version}");
        }
        let value = format!("kimi-agent/{} {product}", env!("CARGO_PKG_VERSION"));
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = value;
    }

    /// The current value.
    pub fn get(&self) -> String {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl fmt::Debug for UserAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("UserAgent").field(&self.get()).finish()
    }
}

/// Everything needed to build a `kimi` or `openai_legacy` provider, already
/// resolved from config files and environment by the caller.
#[derive(Clone)]
pub struct OpenAiCompatConfig {
    /// Server dialect.
    pub flavor: Flavor,
    /// API root, e.g. `https://api.moonshot.ai/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// Bearer token; empty sends no `Authorization` header.
    pub api_key: String,
    /// Model name sent as `model`.
    pub model: String,
    /// Extra headers (`[providers.X] custom_headers`); they override ours, `User-Agent` included.
    pub custom_headers: BTreeMap<String, String>,
    /// `openai_legacy` only: the delta and message key holding reasoning text.
    /// `None` means `reasoning_content`; an empty string turns reasoning off.
    pub reasoning_key: Option<String>,
    /// `temperature` (`KIMI_MODEL_TEMPERATURE`).
    pub temperature: Option<f64>,
    /// `top_p` (`KIMI_MODEL_TOP_P`).
    pub top_p: Option<f64>,
    /// How `max_completion_tokens` is chosen.
    pub max_completion_tokens: CompletionBudget,
    /// The model's context window (`[models.Y] max_context_size`); 0 means unknown.
    pub max_context_size: u64,
    /// Completion budget used when the context window is unknown
    /// (`loop_control.reserved_context_size`).
    pub reserved_context_size: u64,
    /// Thinking on (`Some(true)`), off (`Some(false)`), or not said (`None`).
    /// The caller decides from `--thinking` and the model's capabilities.
    pub thinking: Option<bool>,
    /// Kimi only, with thinking on: `thinking.keep` (`KIMI_MODEL_THINKING_KEEP`).
    pub thinking_keep: Option<String>,
    /// Kimi only: sent as `prompt_cache_key`.
    pub session_id: Option<String>,
    /// The `User-Agent` header.
    pub user_agent: UserAgent,
    /// Time allowed to open the connection.
    pub connect_timeout: Duration,
    /// Time allowed between two reads of the response (the stream may take
    /// longer overall).
    pub read_timeout: Duration,
}

impl OpenAiCompatConfig {
    /// A config with the reference's defaults for everything else: no extra
    /// headers, automatic completion budget, unknown context window, thinking
    /// not set, our own `User-Agent`, 5 s to connect and 600 s between reads
    /// (the OpenAI SDK's defaults).
    pub fn new(
        flavor: Flavor,
        base_url: impl Into<String>,
        api_key: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        Self {
            flavor,
            base_url: base_url.into(),
            api_key: api_key.into(),
            model: model.into(),
            custom_headers: BTreeMap::new(),
            reasoning_key: None,
            temperature: None,
            top_p: None,
            max_completion_tokens: CompletionBudget::Auto,
            max_context_size: 0,
            reserved_context_size: 50_000,
            thinking: None,
            thinking_keep: None,
            session_id: None,
            user_agent: UserAgent::ours(),
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(600),
        }
    }

    /// The key reasoning text travels under, or `None` when it is ignored.
    fn reasoning_key(&self) -> Option<&str> {
        match self.flavor {
            Flavor::Kimi => Some("reasoning_content"),
            Flavor::OpenAiLegacy => match self.reasoning_key.as_deref() {
                None => Some("reasoning_content"),
                Some("") => None,
                Some(key) => Some(key),
            },
        }
    }

    #[cfg(test)]
    fn for_tests(flavor: Flavor) -> Self {
        Self::new(flavor, "http://127.0.0.1:9", "k", "m")
    }
}

impl fmt::Debug for OpenAiCompatConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The API key and header values may be secrets: never print them.
        f.debug_struct("OpenAiCompatConfig")
            .field("flavor", &self.flavor)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("custom_headers", &self.custom_headers.keys().collect::<Vec<_>>())
            .field("reasoning_key", &self.reasoning_key)
            .field("temperature", &self.temperature)
            .field("top_p", &self.top_p)
            .field("max_completion_tokens", &self.max_completion_tokens)
            .field("max_context_size", &self.max_context_size)
            .field("thinking", &self.thinking)
            .field("session_id", &self.session_id)
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}

/// Installs ring as the process's TLS crypto provider unless one is already
/// installed. [`create`] calls it; a binary that builds other `reqwest`
/// clients (MCP over HTTP, web fetch) before any provider should call it at
/// startup, since our `reqwest` carries no provider of its own.
pub fn install_tls_provider() {
    // An error only means a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Builds a `kimi` or `openai_legacy` provider.
///
/// Fails, with a plain [`ChatError::Provider`], on an empty base URL or
/// model, or a header that is not valid HTTP. A client that cannot be built
/// fails the first request instead.
pub fn create(config: OpenAiCompatConfig) -> Result<Arc<dyn ChatProvider>, ChatError> {
    Ok(Arc::new(OpenAiCompatProvider::new(config)?))
}

/// The chat-completions provider; see the module docs.
pub struct OpenAiCompatProvider {
    config: OpenAiCompatConfig,
    /// Built by the first request, not at start-up (see [`crate::http`]).
    client: LazyClient,
    url: String,
    /// `custom_headers`, validated once.
    custom_headers: HeaderMap,
}

impl fmt::Debug for OpenAiCompatProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatProvider")
            .field("config", &self.config)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatProvider {
    /// See [`create`].
    pub fn new(config: OpenAiCompatConfig) -> Result<Self, ChatError> {
        if config.base_url.trim().is_empty() || config.model.trim().is_empty() {
            return Err(ChatError::provider(
                "Cannot create LLM: missing base_url or model",
            ));
        }
        let custom_headers = custom_header_map(&config.custom_headers, &config.model)?;
        let client = LazyClient::new(ClientTimeouts {
            connect: Some(config.connect_timeout),
            read: Some(config.read_timeout),
            total: None,
        });
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Ok(Self {
            config,
            client,
            url,
            custom_headers,
        })
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let agent = self.config.user_agent.get();
        if let Ok(value) = HeaderValue::from_str(&agent) {
            headers.insert(USER_AGENT, value);
        }
        if !self.config.api_key.is_empty()
            && let Some(value) = secret_header(&format!("Bearer {}", self.config.api_key))
        {
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in &self.custom_headers {
            headers.insert(name.clone(), value.clone());
        }
        headers
    }
}

#[async_trait::async_trait]
impl ChatProvider for OpenAiCompatProvider {
    fn model_name(&self) -> &str {
        &self.config.model
    }

    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let built = request::build(&self.config, &request);
        let body = serde_json::to_vec(&built.body)
            .map_err(|e| ChatError::provider(format!("Cannot encode the request: {e}")))?;
        tracing::debug!(url = %self.url, model = %self.config.model, bytes = body.len(), "chat completion request");
        let response = crate::http::post(&self.client, &self.url, self.headers(), body)
            .await?
            .map_err(errors::from_failure)?;
        let decoder = stream::Decoder::new(
            self.config.reasoning_key().map(str::to_owned),
            self.config.flavor == Flavor::Kimi,
            built.names,
        );
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            // A server that ignored `stream: true` and answered in one piece.
            let text = response.text().await.map_err(|e| from_transport(&e))?;
            let events = decoder.whole(&text)?;
            return Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed());
        }
        Ok(crate::sse::events(response, decoder))
    }
}
