//! `anthropic`: Anthropic's Messages API, streamed.
//!
//! Reference: kosong's `Anthropic` provider as kimi-cli's `llm.py` builds it (`default_max_tokens` 50000,
//! `metadata.user_id` = the session id, `custom_headers` as default headers). Requests go to
//! `<base_url>/v1/messages` with `x-api-key` and `anthropic-version: 2023-06-01`; `request.rs` builds the
//! body, `thinking.rs` the thinking switch, `stream.rs` reads the events. Status errors carry the
//! Anthropic SDK's text (`Error code: 529 - {...}`), the same as the OpenAI SDK's.

mod request;
mod stream;
mod thinking;

use std::fmt;
use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::http::{LazyClient, secret_header};
use crate::openai::errors::from_failure;
use crate::{ChatError, ChatProvider, ChatRequest, ChatStream, ProviderSettings};
use thinking::Thinking;

/// The API version every request declares.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// What starts `ThinkPart.encrypted` for a `redacted_thinking` block: the block's opaque `data` follows.
/// The API wants such a block back unchanged, as `redacted_thinking`, and its data is base64 like a
/// thinking block's signature, so the part says which it is; `:` is never part of base64, so no
/// signature can look like this. The session files keep the reference's shape (a think part with empty
/// text); only the `encrypted` text differs from what the reference stores.
const REDACTED_THINKING: &str = "redacted_thinking:";

/// `ThinkPart.encrypted` for a `redacted_thinking` block's `data`.
fn redacted_thinking(data: &str) -> String {
    format!("{REDACTED_THINKING}{data}")
}

/// The `data` of a redacted block, if `encrypted` holds one (see [`REDACTED_THINKING`]).
fn redacted_data(encrypted: &str) -> Option<&str> {
    encrypted.strip_prefix(REDACTED_THINKING)
}

/// Builds an `anthropic` provider; see [`AnthropicProvider::new`].
pub fn create(settings: ProviderSettings) -> Result<Arc<dyn ChatProvider>, ChatError> {
    Ok(Arc::new(AnthropicProvider::new(settings)?))
}

/// The Messages API provider; see the module docs.
pub struct AnthropicProvider {
    settings: ProviderSettings,
    thinking: Thinking,
    client: LazyClient,
    url: String,
    custom_headers: HeaderMap,
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("settings", &self.settings)
            .field("thinking", &self.thinking)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// Fails, with a plain [`ChatError::Provider`], on an empty base URL or model, or a custom header
    /// that is not valid HTTP.
    pub fn new(settings: ProviderSettings) -> Result<Self, ChatError> {
        let custom_headers = settings.validate()?;
        let thinking = Thinking::for_model(&settings.model, settings.thinking);
        Ok(Self {
            client: settings.client(),
            url: format!("{}/v1/messages", settings.base()),
            thinking,
            settings,
            custom_headers,
        })
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = self.settings.json_headers();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(beta) = self.thinking.beta_header() {
            headers.insert(
                HeaderName::from_static("anthropic-beta"),
                HeaderValue::from_static(beta),
            );
        }
        if !self.settings.api_key.is_empty()
            && let Some(key) = secret_header(&self.settings.api_key)
        {
            headers.insert(HeaderName::from_static("x-api-key"), key);
        }
        for (name, value) in &self.custom_headers {
            headers.insert(name.clone(), value.clone());
        }
        headers
    }
}

#[async_trait::async_trait]
impl ChatProvider for AnthropicProvider {
    fn model_name(&self) -> &str {
        &self.settings.model
    }

    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let built = request::build(
            &self.settings.model,
            &self.thinking,
            self.settings.session_id.as_deref(),
            &request,
        )?;
        let body = serde_json::to_vec(&built.body)
            .map_err(|e| ChatError::provider(format!("Cannot encode the request: {e}")))?;
        tracing::debug!(url = %self.url, model = %self.settings.model, bytes = body.len(), "anthropic messages request");
        let response = crate::http::post(&self.client, &self.url, self.headers(), body)
            .await?
            .map_err(from_failure)?;
        Ok(crate::sse::events(response, stream::Decoder::new(built.names)))
    }
}
