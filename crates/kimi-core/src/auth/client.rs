//! The Kimi account server (device authorization, token polling, refresh) and the coding API's model
//! list, over HTTP. Requests carry the reference's client id and device headers (`X-Msh-*`); the
//! device id is kept in `<share>/device_id` as the reference keeps it. Errors read as the reference's.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use kimi_llm::http::{ClientTimeouts, LazyClient};
use kimi_llm::truthy;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::token::{OAuthToken, now};
use super::{AuthError, CLIENT_ID, Endpoints};
use crate::config::Capability;

/// The grant type of a device-code token request (RFC 8628).
const DEVICE_CODE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// Refresh answers worth another try (reference `_RETRYABLE_REFRESH_STATUSES`).
const RETRYABLE_REFRESH_STATUSES: [u16; 5] = [429, 500, 502, 503, 504];
/// Tries of one refresh (reference `max_retries`), waiting 1 s, then 2 s between them.
const REFRESH_TRIES: u32 = 3;

/// What `device_authorization` hands out: the code the user confirms and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAuthorization {
    /// The code shown to the user.
    pub user_code: String,
    /// The code this client polls with.
    pub device_code: String,
    /// The page where the user enters the code.
    pub verification_uri: String,
    /// The page with the code filled in.
    pub verification_uri_complete: String,
    /// Seconds between two polls (at least 1).
    pub interval: u64,
}

/// One answer to a token poll.
#[derive(Debug, Clone, PartialEq)]
pub enum Poll {
    /// The user approved: the tokens.
    Token(OAuthToken),
    /// Not yet: the server's `error` and `error_description`.
    Pending {
        /// `authorization_pending`, `slow_down`, ...
        error: String,
        /// The server's explanation.
        description: String,
    },
}

/// A model of the account, as `/models` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The model id sent to the API.
    pub id: String,
    /// Its context window.
    pub context_length: u64,
    /// It can reason.
    pub supports_reasoning: bool,
    /// It accepts images.
    pub supports_image_in: bool,
    /// It accepts videos.
    pub supports_video_in: bool,
    /// A human name.
    pub display_name: Option<String>,
}

impl ModelInfo {
    /// The capabilities configured for it (reference `ModelInfo.capabilities`).
    pub fn capabilities(&self) -> BTreeSet<Capability> {
        let mut caps = BTreeSet::new();
        let id = self.id.to_lowercase();
        if self.supports_reasoning {
            caps.insert(Capability::Thinking);
        }
        if id.contains("thinking") {
            caps.extend([Capability::Thinking, Capability::AlwaysThinking]);
        }
        if self.supports_image_in {
            caps.insert(Capability::ImageIn);
        }
        if self.supports_video_in {
            caps.insert(Capability::VideoIn);
        }
        if id.starts_with("kimi-k2") {
            caps.extend([Capability::Thinking, Capability::ImageIn, Capability::VideoIn]);
        }
        caps
    }
}

/// Talks to the account server and the coding API.
#[derive(Debug)]
pub struct AccountClient {
    endpoints: Endpoints,
    http: LazyClient,
    share_dir: PathBuf,
    /// Made by the first request to the account server (reading or creating the device id).
    headers: OnceLock<HeaderMap>,
}

impl AccountClient {
    /// A client for `endpoints`; the device id is read from (or first written to) `share_dir` when the
    /// account server is first asked something.
    pub fn new(endpoints: Endpoints, share_dir: &Path) -> Self {
        Self {
            endpoints,
            http: LazyClient::new(ClientTimeouts {
                connect: Some(Duration::from_secs(10)),
                read: Some(Duration::from_secs(60)),
                total: Some(Duration::from_secs(120)),
            }),
            share_dir: share_dir.to_owned(),
            headers: OnceLock::new(),
        }
    }

    /// Where this client sends its requests.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// Starts a device login.
    pub async fn device_authorization(&self) -> Result<DeviceAuthorization, AuthError> {
        let url = format!("{}/api/oauth/device_authorization", self.endpoints.oauth_host);
        let (status, body) = self
            .post_form(&url, &[("client_id", CLIENT_ID)])
            .await
            .map_err(|e| AuthError::Failed(e.to_string()))?;
        if status != 200 {
            return Err(AuthError::Failed(format!("Device authorization failed: {body}")));
        }
        // Reference: a missing required key fails with Python's `KeyError` text, the key quoted.
        let required = |key: &str| {
            body.get(key)
                .filter(|v| !v.is_null())
                .map(text_of)
                .ok_or_else(|| AuthError::Failed(format!("'{key}'")))
        };
        Ok(DeviceAuthorization {
            user_code: required("user_code")?,
            device_code: required("device_code")?,
            verification_uri: body.get("verification_uri").map(text_of).unwrap_or_default(),
            verification_uri_complete: required("verification_uri_complete")?,
            interval: body
                .get("interval")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .unwrap_or(5)
                .max(1),
        })
    }

    /// Asks once whether the user approved `auth`.
    pub async fn poll(&self, auth: &DeviceAuthorization) -> Result<Poll, AuthError> {
        let url = format!("{}/api/oauth/token", self.endpoints.oauth_host);
        let form = [
            ("client_id", CLIENT_ID),
            ("device_code", auth.device_code.as_str()),
            ("grant_type", DEVICE_CODE_GRANT),
        ];
        let (status, body) = self
            .post_form(&url, &form)
            .await
            .map_err(|_| AuthError::Failed("Token polling request failed.".into()))?;
        if !body.is_object() {
            return Err(AuthError::Failed("Unexpected token polling response.".into()));
        }
        if status >= 500 {
            return Err(AuthError::Failed(format!(
                "Token polling server error: {status}."
            )));
        }
        if status == 200 && body.get("access_token").is_some() {
            return OAuthToken::from_response(&body, now()).map(Poll::Token);
        }
        let error = body
            .get("error")
            .filter(|v| !v.is_null())
            .map(text_of)
            .unwrap_or_else(|| "unknown_error".into());
        if error == "expired_token" {
            return Err(AuthError::DeviceExpired);
        }
        let description = body.get("error_description").map(text_of).unwrap_or_default();
        Ok(Poll::Pending { error, description })
    }

    /// Exchanges `refresh_token` for new tokens, trying again on network errors, 429 and 5xx.
    pub async fn refresh(&self, refresh_token: &str) -> Result<OAuthToken, AuthError> {
        let mut last = String::new();
        for attempt in 0..REFRESH_TRIES {
            match self.refresh_once(refresh_token).await {
                Err(AuthError::Retryable(message)) => {
                    tracing::warn!(attempt = attempt + 1, error = %message, "token refresh failed");
                    last = message;
                    if attempt + 1 < REFRESH_TRIES {
                        tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                    }
                }
                other => return other,
            }
        }
        tracing::warn!(error = %last, "token refresh gave up");
        Err(AuthError::Failed("Token refresh failed after retries.".into()))
    }

    async fn refresh_once(&self, refresh_token: &str) -> Result<OAuthToken, AuthError> {
        let url = format!("{}/api/oauth/token", self.endpoints.oauth_host);
        let form = [
            ("client_id", CLIENT_ID),
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
        ];
        let (status, body) = self
            .post_form(&url, &form)
            .await
            .map_err(|e| AuthError::Retryable(e.to_string()))?;
        let description = body
            .get("error_description")
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        match status {
            200 => OAuthToken::from_response(&body, now()),
            401 | 403 => Err(AuthError::Unauthorized(
                description.unwrap_or_else(|| "Token refresh unauthorized.".into()),
            )),
            status => {
                let message = description.unwrap_or_else(|| format!("Token refresh failed (HTTP {status})."));
                if RETRYABLE_REFRESH_STATUSES.contains(&status) {
                    Err(AuthError::Retryable(message))
                } else {
                    Err(AuthError::Failed(message))
                }
            }
        }
    }

    /// The models the account may use.
    pub async fn list_models(&self, access_token: &str) -> Result<Vec<ModelInfo>, AuthError> {
        let base = self.endpoints.base_url.trim_end_matches('/');
        let url = format!("{base}/models");
        let client = self.http.get().map_err(|e| AuthError::Failed(e.to_string()))?;
        let response = client
            .get(&url)
            .bearer_auth(access_token)
            .send()
            .await
            .map_err(|e| AuthError::Failed(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(AuthError::Failed(format!("{}, url='{url}'", status_text(status))));
        }
        let body: Value = response
            .json()
            .await
            .map_err(|e| AuthError::Failed(e.to_string()))?;
        let Some(items) = body.get("data").and_then(Value::as_array) else {
            return Err(AuthError::Failed(format!(
                "Unexpected models response for {base}"
            )));
        };
        Ok(items.iter().filter_map(model_info).collect())
    }

    /// POSTs a form; the answer's status and JSON body (`null` when it is not JSON).
    async fn post_form(&self, url: &str, form: &[(&str, &str)]) -> Result<(u16, Value), reqwest::Error> {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let response = self
            .http
            .get()?
            .post(url)
            .headers(
                self.headers
                    .get_or_init(|| device_headers(&self.share_dir))
                    .clone(),
            )
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await?;
        Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }
}

/// `401, message='Unauthorized'` (the shape of aiohttp's status errors).
fn status_text(status: reqwest::StatusCode) -> String {
    format!(
        "{}, message='{}'",
        status.as_u16(),
        status.canonical_reason().unwrap_or_default()
    )
}

/// A JSON value as Python's `str()` would show a scalar.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn model_info(item: &Value) -> Option<ModelInfo> {
    let id = item.get("id").filter(|v| !v.is_null()).map(text_of)?;
    if id.is_empty() {
        return None;
    }
    let flag = |key: &str| item.get(key).is_some_and(truthy);
    Some(ModelInfo {
        id,
        context_length: item.get("context_length").and_then(Value::as_u64).unwrap_or(0),
        supports_reasoning: flag("supports_reasoning"),
        supports_image_in: flag("supports_image_in"),
        supports_video_in: flag("supports_video_in"),
        display_name: item.get("display_name").filter(|v| truthy(v)).map(text_of),
    })
}

/// The reference's device headers (`X-Msh-Platform`, `X-Msh-Version`, `X-Msh-Device-*`), sent to the
/// account server, the coding API and the web services. Values are made ASCII (header values must be).
pub fn device_headers(share_dir: &Path) -> HeaderMap {
    let uname = nix::sys::utsname::uname().ok();
    let part = |get: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uname
            .as_ref()
            .map(|u| get(u).to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let (system, node, release, version, machine) = (
        part(|u| u.sysname()),
        part(|u| u.nodename()),
        part(|u| u.release()),
        part(|u| u.version()),
        part(|u| u.machine()),
    );
    let system = if system == "Darwin" {
        "macOS".to_owned()
    } else {
        system
    };
    let model = [system.as_str(), release.as_str(), machine.as_str()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let pairs = [
        ("x-msh-platform", "kimi_cli".to_owned()),
        ("x-msh-version", crate::KIMI_CLI_VERSION.to_owned()),
        ("x-msh-device-name", node),
        ("x-msh-device-model", model),
        ("x-msh-os-version", version),
        ("x-msh-device-id", device_id(share_dir)),
    ];
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let ascii: String = value.chars().filter(char::is_ascii).collect();
        let ascii = ascii.trim();
        let value = if ascii.is_empty() { "unknown" } else { ascii };
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

/// `<share>/device_id`: a random id made once and kept (reference `get_device_id`).
fn device_id(share_dir: &Path) -> String {
    let path = share_dir.join("device_id");
    if let Ok(text) = std::fs::read_to_string(&path) {
        return text.trim().to_owned();
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    if let Err(e) = crate::private_files::write_secret(&path, id.as_bytes()) {
        tracing::warn!(path = %path.display(), error = %e, "device id not saved");
    }
    id
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn model_capabilities_follow_the_reference() {
        let model = |id: &str, reasoning: bool, image: bool| ModelInfo {
            id: id.into(),
            context_length: 1,
            supports_reasoning: reasoning,
            supports_image_in: image,
            supports_video_in: false,
            display_name: None,
        };
        assert_eq!(model("plain", false, false).capabilities(), BTreeSet::new());
        assert_eq!(
            model("reasoner", true, true).capabilities(),
            BTreeSet::from([Capability::Thinking, Capability::ImageIn])
        );
        assert_eq!(
            model("x-Thinking-y", false, false).capabilities(),
            BTreeSet::from([Capability::Thinking, Capability::AlwaysThinking])
        );
        assert_eq!(
            model("kimi-k2.5", false, false).capabilities(),
            BTreeSet::from([Capability::Thinking, Capability::ImageIn, Capability::VideoIn])
        );
    }

    #[test]
    fn models_are_read_leniently() {
        let items = json!([
            {"id": "kimi-for-coding", "context_length": 262144, "supports_reasoning": true,
             "display_name": "Kimi for Coding"},
            {"id": "", "context_length": 1},
            {"context_length": 1},
            {"id": "bare", "display_name": ""}
        ]);
        let models: Vec<ModelInfo> = items.as_array().unwrap().iter().filter_map(model_info).collect();
        assert_eq!(models.len(), 2);
        assert_eq!(models[0].display_name.as_deref(), Some("Kimi for Coding"));
        assert_eq!(
            (models[1].context_length, models[1].display_name.clone()),
            (0, None)
        );
    }

    #[test]
    fn the_device_id_is_made_once_and_kept_private() {
        let share = tempfile::tempdir().unwrap();
        let first = device_id(share.path());
        assert_eq!(first.len(), 32);
        assert_eq!(device_id(share.path()), first);
        let headers = device_headers(share.path());
        assert_eq!(headers["x-msh-platform"], "kimi_cli");
        assert_eq!(headers["x-msh-device-id"], first.as_str());
        assert_eq!(headers.len(), 6);
    }
}
