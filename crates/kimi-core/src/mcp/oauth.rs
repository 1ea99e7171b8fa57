//! OAuth tokens of remote MCP servers, under `<share>/mcp-oauth/`, and the rmcp credential store that
//! reads and writes them.
//!
//! One JSON file per server URL (`<md5 of the URL without trailing slash>.json`, mode 0600 in a 0700
//! directory), not fastmcp's hashed key-value tree:
//!
//! ```json
//! {"access_token": "...", "token_type": "bearer", "refresh_token": "...", "expires_at": 1767225600,
//!  "client_id": "...", "scopes": ["..."], "issuer": "https://auth.example.com"}
//! ```
//!
//! Only `access_token` is required, so a hand-written `{"access_token": "..."}` (the only form earlier
//! versions read) still works: it is sent as is, never refreshed. `expires_at` is absolute (Unix
//! seconds), so a token read back later is known to be expired without knowing when it was received.
//! The flow that writes these files is in [`super::authorize`]; refreshing is rmcp's
//! (`AuthorizationManager::get_access_token`), through [`FileCredentialStore`].

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::OAuthTokenResponse;
use rmcp::transport::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `<share>/mcp-oauth`.
pub fn token_dir(share_dir: &Path) -> PathBuf {
    share_dir.join("mcp-oauth")
}

/// The token file of `url` (trailing `/` ignored, as the reference keys it).
pub fn token_file(share_dir: &Path, url: &str) -> PathBuf {
    let key = url.trim_end_matches('/');
    token_dir(share_dir).join(format!("{:x}.json", md5::compute(key.as_bytes())))
}

/// What one token file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTokens {
    /// Sent as the bearer token.
    pub access_token: String,
    /// As the token endpoint named it (`Bearer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type: Option<String>,
    /// Used to get a new access token once this one expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, in Unix seconds; unknown when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The OAuth client the tokens were issued to (needed to refresh them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Granted scopes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The authorization server that issued them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

/// The stored tokens of `url`, if any (an unreadable file or an empty access token counts as none).
pub fn load(share_dir: &Path, url: &str) -> Option<StoredTokens> {
    let text = std::fs::read_to_string(token_file(share_dir, url)).ok()?;
    serde_json::from_str::<StoredTokens>(&text)
        .ok()
        .filter(|t| !t.access_token.is_empty())
}

/// Whether tokens are stored for `url`.
pub fn has_tokens(share_dir: &Path, url: &str) -> bool {
    load(share_dir, url).is_some()
}

/// Stores `tokens` for `url`, readable by the owner only. The file is replaced atomically, so a
/// concurrent reader sees the old tokens or the new ones, never half of either.
pub fn save(share_dir: &Path, url: &str, tokens: &StoredTokens) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(tokens).map_err(std::io::Error::other)?;
    crate::private_files::write_secret(&token_file(share_dir, url), text.as_bytes())
}

/// Removes the stored tokens of `url`; clearing what is not there is fine.
pub fn clear_tokens(share_dir: &Path, url: &str) -> std::io::Result<()> {
    crate::private_files::remove(&token_file(share_dir, url))
}

fn now_epoch_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl StoredTokens {
    /// rmcp's view: the remaining lifetime counted from `now` (zero once expired, which makes rmcp
    /// refresh before using the token).
    fn into_credentials(self, now: u64) -> Result<StoredCredentials, AuthError> {
        let mut response = json!({
            "access_token": self.access_token,
            "token_type": self.token_type.as_deref().unwrap_or("Bearer"),
        });
        if let Some(refresh) = self.refresh_token {
            response["refresh_token"] = json!(refresh);
        }
        let received_at = self.expires_at.map(|at| {
            response["expires_in"] = json!(at.saturating_sub(now));
            now
        });
        let response: OAuthTokenResponse = serde_json::from_value(response)
            .map_err(|e| AuthError::CredentialStoreError(format!("stored token unusable: {e}")))?;
        Ok(StoredCredentials::new(
            self.client_id.unwrap_or_default(),
            Some(response),
            self.scopes,
            received_at,
        )
        .with_issuer(self.issuer))
    }

    /// Ours from rmcp's; `None` when it holds no token (rmcp keeps a bare client id when an issuer
    /// change invalidated the tokens).
    fn from_credentials(credentials: StoredCredentials) -> Result<Option<Self>, AuthError> {
        let Some(response) = &credentials.token_response else {
            return Ok(None);
        };
        let response = serde_json::to_value(response)
            .map_err(|e| AuthError::CredentialStoreError(format!("token not serializable: {e}")))?;
        let text = |key: &str| response.get(key).and_then(Value::as_str).map(str::to_owned);
        let expires_at = match (
            response.get("expires_in").and_then(Value::as_u64),
            credentials.token_received_at,
        ) {
            (Some(expires_in), Some(received_at)) => Some(received_at.saturating_add(expires_in)),
            (Some(expires_in), None) => Some(now_epoch_secs().saturating_add(expires_in)),
            (None, _) => None,
        };
        Ok(Some(Self {
            access_token: text("access_token").unwrap_or_default(),
            token_type: text("token_type"),
            refresh_token: text("refresh_token"),
            expires_at,
            client_id: Some(credentials.client_id).filter(|id| !id.is_empty()),
            scopes: credentials.granted_scopes,
            issuer: credentials.issuer,
        }))
    }
}

/// rmcp's [`CredentialStore`] over the token file of one server URL.
#[derive(Debug, Clone)]
pub struct FileCredentialStore {
    share_dir: PathBuf,
    url: String,
}

impl FileCredentialStore {
    /// The store of `url`'s tokens under `share_dir`.
    pub fn new(share_dir: &Path, url: &str) -> Self {
        Self {
            share_dir: share_dir.to_owned(),
            url: url.to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentialStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        load(&self.share_dir, &self.url)
            .map(|tokens| tokens.into_credentials(now_epoch_secs()))
            .transpose()
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        match StoredTokens::from_credentials(credentials)? {
            Some(tokens) => save(&self.share_dir, &self.url, &tokens),
            None => clear_tokens(&self.share_dir, &self.url),
        }
        .map_err(|e| AuthError::CredentialStoreError(format!("cannot store the OAuth tokens: {e}")))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        clear_tokens(&self.share_dir, &self.url)
            .map_err(|e| AuthError::CredentialStoreError(format!("cannot clear the OAuth tokens: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt;

    fn full() -> StoredTokens {
        StoredTokens {
            access_token: "a".into(),
            token_type: Some("bearer".into()),
            refresh_token: Some("r".into()),
            expires_at: Some(1_000_100),
            client_id: Some("c".into()),
            scopes: vec!["read".into()],
            issuer: Some("https://as".into()),
        }
    }

    #[test]
    fn tokens_are_keyed_by_url_without_trailing_slash() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path(), "https://h/mcp"), None);
        std::fs::create_dir_all(token_dir(dir.path())).unwrap();
        std::fs::write(
            token_file(dir.path(), "https://h/mcp/"),
            r#"{"access_token": "t"}"#,
        )
        .unwrap();
        assert_eq!(
            load(dir.path(), "https://h/mcp").map(|t| t.access_token),
            Some("t".into())
        );
        clear_tokens(dir.path(), "https://h/mcp").unwrap();
        clear_tokens(dir.path(), "https://h/mcp").unwrap();
        assert!(!has_tokens(dir.path(), "https://h/mcp"));
    }

    #[test]
    fn saved_tokens_are_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), "https://h/mcp", &full()).unwrap();
        let file = token_file(dir.path(), "https://h/mcp");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&token_dir(dir.path())), 0o700);
        assert_eq!(load(dir.path(), "https://h/mcp"), Some(full()));
        // Replacing leaves no temporary files behind.
        save(dir.path(), "https://h/mcp", &full()).unwrap();
        assert_eq!(std::fs::read_dir(token_dir(dir.path())).unwrap().count(), 1);
    }

    #[test]
    fn an_empty_access_token_is_no_token() {
        let dir = tempfile::tempdir().unwrap();
        let mut tokens = full();
        tokens.access_token.clear();
        save(dir.path(), "u", &tokens).unwrap();
        assert_eq!(load(dir.path(), "u"), None);
    }

    #[test]
    fn the_absolute_expiry_survives_the_round_trip_through_rmcp() {
        let credentials = full().into_credentials(1_000_000).unwrap();
        assert_eq!(credentials.token_received_at, Some(1_000_000));
        assert_eq!(StoredTokens::from_credentials(credentials).unwrap(), Some(full()));
    }

    #[test]
    fn an_expired_token_has_no_lifetime_left() {
        let credentials = full().into_credentials(2_000_000).unwrap();
        let response = serde_json::to_value(credentials.token_response.unwrap()).unwrap();
        assert_eq!(response["expires_in"], json!(0));
    }

    #[test]
    fn a_bare_access_token_has_no_expiry_and_no_client() {
        let bare = StoredTokens {
            access_token: "t".into(),
            token_type: None,
            refresh_token: None,
            expires_at: None,
            client_id: None,
            scopes: vec![],
            issuer: None,
        };
        let credentials = bare.clone().into_credentials(5).unwrap();
        assert_eq!(credentials.token_received_at, None);
        let back = StoredTokens::from_credentials(credentials).unwrap().unwrap();
        assert_eq!(
            back,
            StoredTokens {
                token_type: Some("bearer".into()),
                ..bare
            }
        );
    }

    #[tokio::test]
    async fn the_store_saves_what_rmcp_hands_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCredentialStore::new(dir.path(), "https://h/mcp");
        assert!(store.load().await.unwrap().is_none());
        store
            .save(full().into_credentials(1_000_000).unwrap())
            .await
            .unwrap();
        assert_eq!(load(dir.path(), "https://h/mcp"), Some(full()));
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.client_id, "c");
        store.clear().await.unwrap();
        assert_eq!(load(dir.path(), "https://h/mcp"), None);
    }
}
