//! The account's tokens on disk: `<share>/credentials/<name>.json` (mode 0600), where `<name>` is the
//! last part of the provider's `oauth.key` (`oauth/kimi-code` → `kimi-code.json`), in the reference's
//! format, so the two implementations share a login:
//!
//! ```json
//! {"access_token": "...", "refresh_token": "...", "expires_at": 1767225600.5, "scope": "...",
//!  "token_type": "Bearer", "expires_in": 900.0}
//! ```
//!
//! `expires_at` is absolute (Unix seconds). The OS keyring, which older reference versions used, is not
//! read: the reference itself moves keyring tokens to this file on its first start.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AuthError;

/// Refresh at the latest this long before expiry (reference `MIN_REFRESH_THRESHOLD_SECONDS`).
const MIN_REFRESH_THRESHOLD_S: f64 = 300.0;
/// ... or once this share of the token's lifetime is left (reference `REFRESH_THRESHOLD_RATIO`).
const REFRESH_THRESHOLD_RATIO: f64 = 0.5;

/// One stored login.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OAuthToken {
    /// Sent as the bearer token.
    #[serde(default)]
    pub access_token: String,
    /// Exchanged for a new access token.
    #[serde(default)]
    pub refresh_token: String,
    /// When the access token expires (Unix seconds); 0 when unknown.
    #[serde(default)]
    pub expires_at: f64,
    /// Granted scope.
    #[serde(default)]
    pub scope: String,
    /// `Bearer`.
    #[serde(default)]
    pub token_type: String,
    /// The lifetime the server gave the access token, in seconds.
    #[serde(default)]
    pub expires_in: f64,
}

impl OAuthToken {
    /// The token in a token endpoint's answer, received at `now` (Unix seconds). Reference: every field
    /// is required.
    pub fn from_response(body: &Value, now: f64) -> Result<Self, AuthError> {
        let text = |key: &str| match body.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) if !other.is_null() => Ok(other.to_string()),
            _ => Err(AuthError::Failed(format!("Token response is missing {key:?}."))),
        };
        let expires_in = match body.get("expires_in") {
            Some(Value::Number(n)) => n.as_f64(),
            Some(Value::String(s)) => s.trim().parse().ok(),
            _ => None,
        }
        .ok_or_else(|| AuthError::Failed("Token response is missing \"expires_in\".".into()))?;
        Ok(Self {
            access_token: text("access_token")?,
            refresh_token: text("refresh_token")?,
            expires_at: now + expires_in,
            scope: text("scope")?,
            token_type: text("token_type")?,
            expires_in,
        })
    }

    /// Whether the access token should be replaced before use at `now` (reference: less than
    /// max(300 s, half its lifetime) left, already expired, or no expiry known).
    pub fn needs_refresh(&self, now: f64) -> bool {
        let threshold = if self.expires_in > 0.0 {
            MIN_REFRESH_THRESHOLD_S.max(self.expires_in * REFRESH_THRESHOLD_RATIO)
        } else {
            MIN_REFRESH_THRESHOLD_S
        };
        !(self.expires_at > now && self.expires_at - now >= threshold)
    }
}

/// The current time in Unix seconds.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// `<share>/credentials`.
pub fn credentials_dir(share_dir: &Path) -> PathBuf {
    share_dir.join("credentials")
}

/// The file name stem of `key` (reference: the last `/` part after dropping `oauth/`).
fn stem(key: &str) -> &str {
    let name = key.strip_prefix("oauth/").unwrap_or(key);
    match name.rsplit('/').next() {
        Some(last) if !last.is_empty() => last,
        _ => key,
    }
}

/// Where the tokens of `key` are stored.
pub fn token_path(share_dir: &Path, key: &str) -> PathBuf {
    credentials_dir(share_dir).join(format!("{}.json", stem(key)))
}

/// The lock file that serializes refreshes of `key` across processes.
fn lock_path(share_dir: &Path, key: &str) -> PathBuf {
    credentials_dir(share_dir).join(format!("{}.lock", stem(key)))
}

/// The stored tokens of `key`; `None` when there is no readable file.
pub fn load(share_dir: &Path, key: &str) -> Option<OAuthToken> {
    let bytes = std::fs::read(token_path(share_dir, key)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Stores `token` for `key` (private, replaced atomically).
pub fn save(share_dir: &Path, key: &str, token: &OAuthToken) -> std::io::Result<()> {
    let value = serde_json::to_value(token).map_err(std::io::Error::other)?;
    let text = kimi_llm::dumps(&value, kimi_llm::Dumps::DEFAULT);
    crate::private_files::write_secret(&token_path(share_dir, key), text.as_bytes())
}

/// Removes the stored tokens of `key`. The lock file stays: another process may hold it.
pub fn delete(share_dir: &Path, key: &str) -> std::io::Result<()> {
    crate::private_files::remove(&token_path(share_dir, key))
}

/// How often, and how long apart, a refresh waits for another process holding the lock (reference:
/// five tries a second or two apart, then it refreshes anyway).
const LOCK_TRIES: u32 = 5;
const LOCK_WAIT: Duration = Duration::from_secs(1);

/// An exclusive hold on the refresh lock of one key, released on drop. Another kimi-agent or reference
/// process refreshing the same tokens waits for it, then finds the tokens already rotated.
#[derive(Debug)]
pub struct RefreshLock(#[allow(dead_code, reason = "held for its Drop")] nix::fcntl::Flock<std::fs::File>);

impl RefreshLock {
    /// Takes the lock, waiting a few seconds for another holder; `None` when it cannot be had (then the
    /// caller refreshes unlocked, as the reference does).
    pub async fn acquire(share_dir: &Path, key: &str) -> Option<Self> {
        let path = lock_path(share_dir, key);
        for attempt in 0..=LOCK_TRIES {
            match try_lock(&path) {
                Ok(Some(lock)) => return Some(lock),
                Ok(None) if attempt < LOCK_TRIES => tokio::time::sleep(LOCK_WAIT).await,
                Ok(None) => return None,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "token lock file unusable");
                    return None;
                }
            }
        }
        None
    }
}

/// One non-blocking try; `Ok(None)` when another process holds the lock.
fn try_lock(path: &Path) -> std::io::Result<Option<RefreshLock>> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        // The directory holds the tokens: private, as `private_files::write_secret` makes it.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(RefreshLock(lock))),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, errno)) => Err(std::io::Error::from(errno)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn token(expires_at: f64, expires_in: f64) -> OAuthToken {
        OAuthToken {
            access_token: "a".into(),
            refresh_token: "r".into(),
            expires_at,
            scope: "s".into(),
            token_type: "Bearer".into(),
            expires_in,
        }
    }

    #[test]
    fn a_token_is_refreshed_when_little_of_it_is_left() {
        let now = 1_000_000.0;
        assert!(!token(now + 3600.0, 3600.0).needs_refresh(now), "a fresh hour");
        assert!(
            token(now + 1700.0, 3600.0).needs_refresh(now),
            "less than half left"
        );
        assert!(
            !token(now + 400.0, 600.0).needs_refresh(now),
            "over the 300 s floor"
        );
        assert!(token(now + 299.0, 0.0).needs_refresh(now), "under the floor");
        assert!(token(now - 1.0, 3600.0).needs_refresh(now), "expired");
        assert!(token(0.0, 0.0).needs_refresh(now), "no expiry known");
    }

    #[test]
    fn responses_and_files_use_the_reference_fields() {
        let body = json!({"access_token": "at", "refresh_token": "rt", "expires_in": 900,
                          "scope": "kimi-code", "token_type": "Bearer", "extra": 1});
        let token = OAuthToken::from_response(&body, 100.0).unwrap();
        assert_eq!(token.expires_at, 1000.0);
        assert!(OAuthToken::from_response(&json!({"access_token": "at"}), 0.0).is_err());

        let share = tempfile::tempdir().unwrap();
        save(share.path(), "oauth/kimi-code", &token).unwrap();
        let path = share.path().join("credentials/kimi-code.json");
        assert_eq!(token_path(share.path(), "oauth/kimi-code"), path);
        let written: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            written,
            json!({"access_token": "at", "refresh_token": "rt", "expires_at": 1000.0,
                   "scope": "kimi-code", "token_type": "Bearer", "expires_in": 900.0})
        );
        assert_eq!(load(share.path(), "oauth/kimi-code"), Some(token));
        delete(share.path(), "oauth/kimi-code").unwrap();
        assert_eq!(load(share.path(), "oauth/kimi-code"), None);
    }

    #[test]
    fn keys_name_their_files_as_the_reference_does() {
        assert_eq!(stem("oauth/kimi-code"), "kimi-code");
        assert_eq!(stem("oauth/a/b"), "b");
        assert_eq!(stem("plain"), "plain");
        assert_eq!(stem("oauth/"), "oauth/");
    }

    #[tokio::test]
    async fn the_refresh_lock_is_exclusive_until_dropped() {
        let share = tempfile::tempdir().unwrap();
        let held = RefreshLock::acquire(share.path(), super::super::OAUTH_KEY)
            .await
            .unwrap();
        let path = lock_path(share.path(), super::super::OAUTH_KEY);
        assert!(try_lock(&path).unwrap().is_none(), "a second holder is refused");
        drop(held);
        assert!(try_lock(&path).unwrap().is_some());
    }
}
