//! Signing in to a Kimi account and using its tokens (reference: `auth/oauth.py`, `auth/platforms.py`).
//!
//! `login` runs the OAuth 2.0 device flow (RFC 8628) against the Kimi account server, stores the
//! tokens under `<share>/credentials/`, asks the coding API which models the account has, and writes
//! them to `config.toml` as a managed provider (`managed:kimi-code`) with its models
//! (`kimi-code/<id>`) and the web services; `logout` removes exactly that. A session whose provider
//! refers to the tokens (`oauth = {storage, key}`) sends the current access token, refreshing it
//! before it expires and once more after a 401.
//!
//! Layout:
//! - [`token`]: the stored tokens, their freshness, the lock that keeps processes from refreshing at once.
//! - [`client`]: the account server and the models endpoint over HTTP.
//! - [`account`]: `login` and `logout`, and what they change in the configuration.
//! - [`provider`]: [`provider::AccountTokens`] and the chat provider that always sends a fresh token.

pub mod account;
pub mod client;
pub mod provider;
pub mod token;

use std::path::Path;

use crate::config::{Env, OAuthRef, Secret};

/// The platform of the Kimi Code account (reference `KIMI_CODE_PLATFORM_ID`).
pub const PLATFORM_ID: &str = "kimi-code";
/// The configuration key of the provider `login` manages.
pub const MANAGED_PROVIDER: &str = "managed:kimi-code";
/// The key the tokens are stored under (`<share>/credentials/kimi-code.json`).
pub const OAUTH_KEY: &str = "oauth/kimi-code";
/// The OAuth client the Kimi Code CLI is registered as.
pub const CLIENT_ID: &str = "17e5f671-d194-4dfb-9706-5516cb48c098";

/// The bearer key of a Moonshot web service (`[services.moonshot_search]`, `moonshot_fetch`): the
/// stored access token its `oauth` reference names (what `login` sets up, with no `api_key`), else the
/// configured `api_key`, as the reference's `resolve_api_key`. Read at each call: the chat provider
/// refreshes the stored token, so a long session keeps sending a current one.
pub fn service_key(api_key: &Secret, oauth: Option<&OAuthRef>, share_dir: &Path) -> String {
    if let Some(oauth) = oauth {
        match token::load(share_dir, &oauth.key) {
            Some(stored) if !stored.access_token.is_empty() => return stored.access_token,
            _ => tracing::warn!(
                key = %oauth.key,
                "a web service names a login but no access token is stored; using its api_key"
            ),
        }
    }
    api_key.expose().to_owned()
}

/// The account server when no variable names another.
const DEFAULT_OAUTH_HOST: &str = "https://auth.kimi.com";
/// The coding API when no variable names another.
const DEFAULT_BASE_URL: &str = "https://api.kimi.com/coding/v1";

/// Where the account server and the coding API are. Reference: `KIMI_CODE_OAUTH_HOST` (or the older
/// `KIMI_OAUTH_HOST`) moves the account server, `KIMI_CODE_BASE_URL` the API (tests point both at a
/// local mock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// The account server, without a trailing `/`.
    pub oauth_host: String,
    /// The coding API root (`/models`, `/chat/completions`, `/search`, `/fetch` hang off it).
    pub base_url: String,
}

impl Endpoints {
    /// The endpoints the environment selects.
    pub fn from_env(env: &Env) -> Self {
        let set = |name: &str| env.get(name).filter(|v| !v.is_empty()).cloned();
        let oauth_host = set("KIMI_CODE_OAUTH_HOST")
            .or_else(|| set("KIMI_OAUTH_HOST"))
            .unwrap_or_else(|| DEFAULT_OAUTH_HOST.to_owned());
        Self {
            oauth_host: oauth_host.trim_end_matches('/').to_owned(),
            base_url: set("KIMI_CODE_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
        }
    }
}

/// Why talking to the account server failed. `Display` is the reference's text.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The server refused the credentials (HTTP 401/403 on refresh): a new login is needed.
    #[error("{0}")]
    Unauthorized(String),
    /// The device code expired before the user approved it; the flow starts over.
    #[error("Device code expired.")]
    DeviceExpired,
    /// Any other failure of the flow, with the reference's message.
    #[error("{0}")]
    Failed(String),
    /// A transient failure (network, 429, 5xx) worth another try.
    #[error("{0}")]
    Retryable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_service_key_is_the_logins_token_else_the_configured_key() {
        let share = tempfile::tempdir().unwrap();
        let login = OAuthRef {
            storage: crate::config::OAuthStorage::default(),
            key: OAUTH_KEY.into(),
        };
        let key = Secret::new("configured");
        // No login named, or none stored: the configured key (empty when there is none).
        assert_eq!(service_key(&key, None, share.path()), "configured");
        assert_eq!(service_key(&key, Some(&login), share.path()), "configured");
        assert_eq!(service_key(&Secret::new(""), Some(&login), share.path()), "");
        // A stored login wins over the key; an empty stored token does not.
        let stored = |access: &str| token::OAuthToken {
            access_token: access.into(),
            refresh_token: "r".into(),
            expires_at: 0.0,
            scope: String::new(),
            token_type: "Bearer".into(),
            expires_in: 0.0,
        };
        token::save(share.path(), OAUTH_KEY, &stored("")).unwrap();
        assert_eq!(service_key(&key, Some(&login), share.path()), "configured");
        token::save(share.path(), OAUTH_KEY, &stored("account-token")).unwrap();
        assert_eq!(service_key(&key, Some(&login), share.path()), "account-token");
        assert_eq!(service_key(&key, None, share.path()), "configured");
    }

    #[test]
    fn endpoints_follow_the_reference_variables() {
        assert_eq!(
            Endpoints::from_env(&Env::new()),
            Endpoints {
                oauth_host: "https://auth.kimi.com".into(),
                base_url: "https://api.kimi.com/coding/v1".into()
            }
        );
        let moved = Endpoints::from_env(&env(&[
            ("KIMI_OAUTH_HOST", "http://old"),
            ("KIMI_CODE_OAUTH_HOST", "http://127.0.0.1:9/"),
            ("KIMI_CODE_BASE_URL", "http://127.0.0.1:9/coding/v1"),
        ]));
        assert_eq!(moved.oauth_host, "http://127.0.0.1:9");
        assert_eq!(moved.base_url, "http://127.0.0.1:9/coding/v1");
        assert_eq!(
            Endpoints::from_env(&env(&[("KIMI_OAUTH_HOST", "http://old")])).oauth_host,
            "http://old"
        );
    }
}
