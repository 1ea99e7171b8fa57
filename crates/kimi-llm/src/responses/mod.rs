//! `openai_responses`: OpenAI's Responses API, streamed and stateless.
//!
//! Reference: kosong's `OpenAIResponses` as kimi-cli's `llm.py` builds it. Requests go to
//! `<base_url>/responses` with a bearer token, `store: false` and the whole history each time;
//! `request.rs` builds the body (reasoning carried between turns as encrypted items), `stream.rs` reads
//! the events. Status errors carry the OpenAI SDK's text.

mod request;
mod stream;

use std::fmt;
use std::sync::Arc;

use reqwest::header::{AUTHORIZATION, HeaderMap};

use crate::http::{LazyClient, secret_header};
use crate::openai::errors::from_failure;
use crate::{ChatError, ChatProvider, ChatRequest, ChatStream, ProviderSettings};

/// Builds an `openai_responses` provider; see [`ResponsesProvider::new`].
pub fn create(settings: ProviderSettings) -> Result<Arc<dyn ChatProvider>, ChatError> {
    Ok(Arc::new(ResponsesProvider::new(settings)?))
}

/// The Responses API provider; see the module docs.
pub struct ResponsesProvider {
    settings: ProviderSettings,
    client: LazyClient,
    url: String,
    custom_headers: HeaderMap,
}

impl fmt::Debug for ResponsesProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponsesProvider")
            .field("settings", &self.settings)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl ResponsesProvider {
    /// Fails, with a plain [`ChatError::Provider`], on an empty base URL or model, or a custom header
    /// that is not valid HTTP.
    pub fn new(settings: ProviderSettings) -> Result<Self, ChatError> {
        let custom_headers = settings.validate()?;
        Ok(Self {
            client: settings.client(),
            url: format!("{}/responses", settings.base()),
            settings,
            custom_headers,
        })
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = self.settings.json_headers();
        if !self.settings.api_key.is_empty()
            && let Some(value) = secret_header(&format!("Bearer {}", self.settings.api_key))
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
impl ChatProvider for ResponsesProvider {
    fn model_name(&self) -> &str {
        &self.settings.model
    }

    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let built = request::build(&self.settings.model, self.settings.thinking, &request);
        let body = serde_json::to_vec(&built.body)
            .map_err(|e| ChatError::provider(format!("Cannot encode the request: {e}")))?;
        tracing::debug!(url = %self.url, model = %self.settings.model, bytes = body.len(), "responses request");
        let response = crate::http::post(&self.client, &self.url, self.headers(), body)
            .await?
            .map_err(from_failure)?;
        Ok(crate::sse::events(response, stream::Decoder::new(built.names)))
    }
}
