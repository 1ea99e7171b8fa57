//! A session's side of a login: the access token its provider sends, kept fresh.
//!
//! Reference (`OAuthManager`): the token is refreshed before each turn when little of its life is left,
//! every minute in the background, and once more after a 401 (then the step is retried). Here the
//! check runs before every model call instead of on a timer, which covers both: a call never starts
//! with a token about to expire, and an idle session makes no requests. Refreshes are serialized in the
//! process (a mutex) and across processes (a lock file), and the stored tokens are re-read at each
//! stage, so a refresh token that another process already rotated is never used twice.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use kimi_llm::{ChatError, ChatProvider, ChatRequest, ChatStream};

use super::client::AccountClient;
use super::token::{self, OAuthToken, RefreshLock, now};
use super::{AuthError, Endpoints};

/// The stored tokens of one `oauth.key`, as a session uses them.
#[derive(Debug)]
pub struct AccountTokens {
    share_dir: PathBuf,
    key: String,
    client: AccountClient,
    /// One refresh at a time in this process (held across the refresh request, hence Tokio's).
    refreshing: tokio::sync::Mutex<()>,
    /// A refresh token the server refused: not offered again until the stored one changes (a new login
    /// or another process's refresh). A std lock: never held across an await.
    rejected: Mutex<Option<String>>,
}

impl AccountTokens {
    /// The tokens stored under `key` in `share_dir`, refreshed through the account server at `endpoints`.
    pub fn new(share_dir: PathBuf, key: &str, endpoints: Endpoints) -> Self {
        let client = AccountClient::new(endpoints, &share_dir);
        Self {
            share_dir,
            key: key.to_owned(),
            client,
            refreshing: tokio::sync::Mutex::new(()),
            rejected: Mutex::new(None),
        }
    }

    /// The access token stored now, as it is (no refresh).
    pub fn stored(&self) -> Option<String> {
        self.load().and_then(|t| self.usable(t))
    }

    /// The access token to send now: refreshed first when it is about to expire or, with `force` (after
    /// a 401), in any case. `None` when no usable token is stored (the provider's own `api_key` is sent
    /// instead, as in the reference).
    pub async fn access_token(&self, force: bool) -> Option<String> {
        let seen = self.load()?;
        if !force && !seen.needs_refresh(now()) {
            return self.usable(seen);
        }
        let _one_at_a_time = self.refreshing.lock().await;
        let current = self.load()?;
        if let Some(token) = self.refreshed_meanwhile(&seen, &current, force) {
            return self.usable(token);
        }
        if current.refresh_token.is_empty() || self.is_rejected(&current.refresh_token) {
            return self.usable(current);
        }
        let _lock = RefreshLock::acquire(&self.share_dir, &self.key).await;
        // Another process may have refreshed while we waited for the lock.
        if let Some(locked) = self.load()
            && let Some(token) = self.refreshed_meanwhile(&current, &locked, force)
        {
            return self.usable(token);
        }
        match self.client.refresh(&current.refresh_token).await {
            Ok(fresh) => {
                if let Err(e) = token::save(&self.share_dir, &self.key, &fresh) {
                    tracing::error!(error = %e, "refreshed tokens not saved");
                }
                self.set_rejected(None);
                tracing::info!("access token refreshed");
                self.usable(fresh)
            }
            Err(AuthError::Unauthorized(reason)) => {
                tracing::warn!(%reason, "the account server refused the refresh token; a new login is needed");
                self.set_rejected(Some(current.refresh_token));
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "token refresh failed; sending the current token");
                self.usable(current)
            }
        }
    }

    /// `now_stored` when it replaced `before` (a new refresh token) and is fresh, or when it is simply
    /// fresh and no refresh is forced.
    fn refreshed_meanwhile(
        &self,
        before: &OAuthToken,
        now_stored: &OAuthToken,
        force: bool,
    ) -> Option<OAuthToken> {
        let rotated = now_stored.refresh_token != before.refresh_token;
        ((rotated || !force) && !now_stored.needs_refresh(now())).then(|| now_stored.clone())
    }

    fn load(&self) -> Option<OAuthToken> {
        token::load(&self.share_dir, &self.key)
    }

    /// The access token of `token`, unless empty or its refresh token was refused.
    fn usable(&self, token: OAuthToken) -> Option<String> {
        if token.access_token.is_empty() || self.is_rejected(&token.refresh_token) {
            return None;
        }
        Some(token.access_token)
    }

    fn is_rejected(&self, refresh_token: &str) -> bool {
        let rejected = crate::sync::lock(&self.rejected);
        rejected
            .as_deref()
            .is_some_and(|r| !r.is_empty() && r == refresh_token)
    }

    fn set_rejected(&self, refresh_token: Option<String>) {
        *crate::sync::lock(&self.rejected) = refresh_token;
    }
}

/// Builds the real provider for one API key.
pub type BuildProvider = Box<dyn Fn(&str) -> Result<Arc<dyn ChatProvider>, ChatError> + Send + Sync>;

/// A chat provider that sends the account's current access token (see the module docs): the real
/// provider is rebuilt whenever the token changes, and a 401 is answered by one forced refresh and one
/// more try.
pub struct AccountChatProvider {
    tokens: Arc<AccountTokens>,
    /// The provider's configured `api_key`, sent when no token is stored.
    fallback_key: String,
    model: String,
    build: BuildProvider,
    /// The provider for the key it was built with. A std lock: never held across an await.
    built: Mutex<(String, Arc<dyn ChatProvider>)>,
}

impl std::fmt::Debug for AccountChatProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountChatProvider")
            .field("tokens", &self.tokens)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl AccountChatProvider {
    /// A provider sending `tokens`' access token (or `fallback_key`), built by `build`.
    pub fn new(
        tokens: Arc<AccountTokens>,
        fallback_key: String,
        build: BuildProvider,
    ) -> Result<Self, ChatError> {
        let key = tokens.stored().unwrap_or_else(|| fallback_key.clone());
        let first = build(&key)?;
        Ok(Self {
            model: first.model_name().to_owned(),
            tokens,
            fallback_key,
            build,
            built: Mutex::new((key, first)),
        })
    }

    async fn key(&self, force: bool) -> String {
        self.tokens
            .access_token(force)
            .await
            .unwrap_or_else(|| self.fallback_key.clone())
    }

    /// The provider for `key`, built anew when the key changed.
    fn provider_for(&self, key: &str) -> Result<Arc<dyn ChatProvider>, ChatError> {
        let mut built = crate::sync::lock(&self.built);
        if built.0 != key {
            *built = (key.to_owned(), (self.build)(key)?);
        }
        Ok(Arc::clone(&built.1))
    }
}

#[async_trait::async_trait]
impl ChatProvider for AccountChatProvider {
    fn model_name(&self) -> &str {
        &self.model
    }

    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let key = self.key(false).await;
        let first = self.provider_for(&key)?.generate(request).await;
        match first {
            Err(error) if error.status_code() == Some(401) => {
                let fresh = self.key(true).await;
                if fresh == key {
                    return Err(error);
                }
                tracing::info!("401 from the provider; trying once more with a refreshed token");
                self.provider_for(&fresh)?.generate(request).await
            }
            other => other,
        }
    }
}
