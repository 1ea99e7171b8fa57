//! `login` and `logout` (reference `login_kimi_code`, `logout_kimi_code`): the device flow, the stored
//! tokens, and the managed provider, models and services they write to `<share>/config.toml`.
//!
//! Both report progress as [`LoginEvent`]s, which the command prints as lines (`--json`: the
//! reference's JSON objects, which the TypeScript SDK's `login()` reads for the verification URL).

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::client::{AccountClient, ModelInfo, Poll};
use super::{AuthError, Endpoints, MANAGED_PROVIDER, OAUTH_KEY, PLATFORM_ID, token};
use crate::config::{
    self, Capability, Config, ConfigSource, Env, ModelConfig, OAuthRef, OAuthStorage, ProviderConfig,
    ProviderType, Secret, ServiceConfig,
};

/// What a [`LoginEvent`] reports (the reference's `OAuthEventKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoginEventKind {
    /// Something to tell the user.
    Info,
    /// The flow failed; the command exits 1.
    Error,
    /// Waiting for the user to approve (sent once per device code).
    Waiting,
    /// Where the user approves; `data` has `verification_url` and `user_code`.
    VerificationUrl,
    /// Done.
    Success,
}

/// One step of `login` or `logout`.
#[derive(Debug, Clone, PartialEq)]
pub struct LoginEvent {
    /// What happened.
    pub kind: LoginEventKind,
    /// The reference's text.
    pub message: String,
    /// Details for programs (only some kinds have them).
    pub data: Option<Value>,
}

impl LoginEvent {
    fn new(kind: LoginEventKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            data: None,
        }
    }

    fn error(message: impl Into<String>) -> Self {
        Self::new(LoginEventKind::Error, message)
    }

    /// The `--json` form: `{"type", "message"}` and `data` when there is some, in that order.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("type".into(), json!(self.kind));
        object.insert("message".into(), json!(self.message));
        if let Some(data) = &self.data {
            object.insert("data".into(), data.clone());
        }
        Value::Object(object)
    }
}

/// The reference's messages.
const VISIT_URL: &str = "Please visit the following URL to finish authorization.";
const DEVICE_EXPIRED: &str = "Device code expired, restarting login...";
const LOGGED_IN: &str = "Logged in successfully.";
const LOGGED_OUT: &str = "Logged out successfully.";
const NO_MODELS: &str = "No models available for the selected platform.";

/// Signs in: runs the device flow (calling `open_url` with the verification page), stores the tokens
/// and writes the account's models to `<share>/config.toml`. Returns whether it succeeded; every
/// outcome is also reported through `emit`.
pub async fn login(
    share_dir: &Path,
    env: &Env,
    mut emit: impl FnMut(LoginEvent),
    open_url: impl Fn(&str),
) -> bool {
    // Reference: the configuration is read before anything else, so a broken file stops the login early.
    let mut config = match config::load_in(&ConfigSource::Default, share_dir) {
        Ok(config) => config,
        Err(e) => {
            emit(LoginEvent::error(e.to_string()));
            return false;
        }
    };
    let client = AccountClient::new(Endpoints::from_env(env), share_dir);
    let tokens = match device_flow(&client, &mut emit, &open_url).await {
        Ok(tokens) => tokens,
        Err(e) => {
            emit(LoginEvent::error(format!("Login failed: {e}")));
            return false;
        }
    };
    if let Err(e) = token::save(share_dir, OAUTH_KEY, &tokens) {
        emit(LoginEvent::error(format!("Login failed: {e}")));
        return false;
    }
    let models = match client.list_models(&tokens.access_token).await {
        Ok(models) if models.is_empty() => {
            emit(LoginEvent::error(NO_MODELS));
            return false;
        }
        Ok(models) => models,
        Err(e) => {
            tracing::error!(error = %e, "models of the account not listed");
            emit(LoginEvent::error(format!("Failed to get models: {e}")));
            return false;
        }
    };
    apply_account(&mut config, &models, &client.endpoints().base_url);
    if let Err(e) = config::save(&crate::paths::config_file(share_dir), &config) {
        emit(LoginEvent::error(format!("Login failed: {e}")));
        return false;
    }
    emit(LoginEvent::new(LoginEventKind::Success, LOGGED_IN));
    true
}

/// Signs out: removes the stored tokens and everything `login` wrote to the configuration.
pub fn logout(share_dir: &Path, mut emit: impl FnMut(LoginEvent)) -> bool {
    let mut config = match config::load_in(&ConfigSource::Default, share_dir) {
        Ok(config) => config,
        Err(e) => {
            emit(LoginEvent::error(e.to_string()));
            return false;
        }
    };
    if let Err(e) = token::delete(share_dir, OAUTH_KEY) {
        emit(LoginEvent::error(format!("Logout failed: {e}")));
        return false;
    }
    remove_account(&mut config);
    if let Err(e) = config::save(&crate::paths::config_file(share_dir), &config) {
        emit(LoginEvent::error(format!("Logout failed: {e}")));
        return false;
    }
    emit(LoginEvent::new(LoginEventKind::Success, LOGGED_OUT));
    true
}

/// Device codes until one is approved (an expired code starts over, as in the reference).
async fn device_flow(
    client: &AccountClient,
    emit: &mut impl FnMut(LoginEvent),
    open_url: &impl Fn(&str),
) -> Result<token::OAuthToken, AuthError> {
    loop {
        let auth = client.device_authorization().await?;
        emit(LoginEvent::new(LoginEventKind::Info, VISIT_URL));
        emit(LoginEvent {
            kind: LoginEventKind::VerificationUrl,
            message: format!("Verification URL: {}", auth.verification_uri_complete),
            data: Some(json!({
                "verification_url": auth.verification_uri_complete,
                "user_code": auth.user_code,
            })),
        });
        open_url(&auth.verification_uri_complete);
        let mut told_waiting = false;
        let approved = loop {
            match client.poll(&auth).await {
                Ok(Poll::Token(tokens)) => break Ok(tokens),
                Ok(Poll::Pending { error, description }) => {
                    if !told_waiting {
                        emit(LoginEvent {
                            kind: LoginEventKind::Waiting,
                            message: format!("Waiting for user authorization...: {}", description.trim()),
                            data: Some(json!({"error": error, "error_description": description})),
                        });
                        told_waiting = true;
                    }
                    tokio::time::sleep(Duration::from_secs(auth.interval)).await;
                }
                Err(e) => break Err(e),
            }
        };
        match approved {
            Err(AuthError::DeviceExpired) => emit(LoginEvent::new(LoginEventKind::Info, DEVICE_EXPIRED)),
            other => return other,
        }
    }
}

/// The account's key of a model (`kimi-code/<id>`).
fn model_key(id: &str) -> String {
    format!("{PLATFORM_ID}/{id}")
}

/// What `login` writes (reference `_apply_kimi_code_config`): the managed provider, the account's
/// models in place of earlier ones, the first of them as the default (thinking on when it can think),
/// and the web services, all pointing at the stored tokens.
fn apply_account(config: &mut Config, models: &[ModelInfo], base_url: &str) {
    let oauth = OAuthRef {
        storage: OAuthStorage::File,
        key: OAUTH_KEY.to_owned(),
    };
    let mut provider = ProviderConfig::new(ProviderType::Kimi, base_url, "");
    provider.oauth = Some(oauth.clone());
    config.providers.insert(MANAGED_PROVIDER.to_owned(), provider);
    config
        .models
        .retain(|_, model| model.provider != MANAGED_PROVIDER);
    for model in models {
        let capabilities = model.capabilities();
        config.models.insert(
            model_key(&model.id),
            ModelConfig {
                provider: MANAGED_PROVIDER.to_owned(),
                model: model.id.clone(),
                max_context_size: model.context_length,
                capabilities: (!capabilities.is_empty()).then_some(capabilities),
                display_name: model.display_name.clone(),
            },
        );
    }
    if let Some(first) = models.first() {
        let capabilities = first.capabilities();
        config.default_model = model_key(&first.id);
        config.default_thinking = capabilities.contains(&Capability::Thinking)
            || capabilities.contains(&Capability::AlwaysThinking);
    }
    let service = |path: &str| ServiceConfig {
        base_url: format!("{base_url}/{path}"),
        api_key: Secret::default(),
        custom_headers: None,
        oauth: Some(oauth.clone()),
    };
    config.services.moonshot_search = Some(service("search"));
    config.services.moonshot_fetch = Some(service("fetch"));
}

/// What `logout` removes (reference `logout_kimi_code`): the managed provider and its models (the
/// default model too when it was one of them) and both web services.
fn remove_account(config: &mut Config) {
    config.providers.remove(MANAGED_PROVIDER);
    let before = config.models.len();
    let default_was_managed = config
        .models
        .get(&config.default_model)
        .is_some_and(|model| model.provider == MANAGED_PROVIDER);
    config
        .models
        .retain(|_, model| model.provider != MANAGED_PROVIDER);
    if default_was_managed {
        config.default_model.clear();
    }
    tracing::debug!(removed = before - config.models.len(), "managed models removed");
    config.services.moonshot_search = None;
    config.services.moonshot_fetch = None;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use pretty_assertions::assert_eq;

    use super::*;

    fn model(id: &str, reasoning: bool) -> ModelInfo {
        ModelInfo {
            id: id.into(),
            context_length: 262_144,
            supports_reasoning: reasoning,
            supports_image_in: false,
            supports_video_in: false,
            display_name: Some(format!("{id}!")),
        }
    }

    fn own_model() -> ModelConfig {
        ModelConfig {
            provider: "mine".into(),
            model: "m".into(),
            max_context_size: 1,
            capabilities: None,
            display_name: None,
        }
    }

    #[test]
    fn login_replaces_the_managed_models_and_logout_removes_exactly_them() {
        let mut config = Config::default();
        config.providers.insert(
            "mine".into(),
            ProviderConfig::new(ProviderType::OpenAiLegacy, "http://x", "k"),
        );
        config.models.insert("own".into(), own_model());
        config.models.insert(
            "kimi-code/old".into(),
            ModelConfig {
                provider: MANAGED_PROVIDER.into(),
                ..own_model()
            },
        );
        config.default_model = "own".into();
        let original = config.clone();

        apply_account(
            &mut config,
            &[model("coder", true), model("plain", false)],
            "http://api/v1",
        );
        assert_eq!(config.default_model, "kimi-code/coder");
        assert!(config.default_thinking);
        let keys: Vec<&str> = config.models.keys().map(String::as_str).collect();
        assert_eq!(keys, ["kimi-code/coder", "kimi-code/plain", "own"]);
        let coder = &config.models["kimi-code/coder"];
        assert_eq!(coder.capabilities, Some(BTreeSet::from([Capability::Thinking])));
        assert_eq!(coder.display_name.as_deref(), Some("coder!"));
        assert_eq!(config.models["kimi-code/plain"].capabilities, None);
        let provider = &config.providers[MANAGED_PROVIDER];
        assert_eq!(
            (provider.kind, provider.base_url.as_str()),
            (ProviderType::Kimi, "http://api/v1")
        );
        assert!(provider.api_key.is_empty());
        assert_eq!(provider.oauth.as_ref().map(|o| o.key.as_str()), Some(OAUTH_KEY));
        let search = config.services.moonshot_search.clone().unwrap();
        assert_eq!(search.base_url, "http://api/v1/search");
        assert_eq!(
            config.services.moonshot_fetch.clone().unwrap().base_url,
            "http://api/v1/fetch"
        );

        remove_account(&mut config);
        assert_eq!(config.default_model, "", "the default was a managed model");
        config.default_model = original.default_model.clone();
        config.default_thinking = original.default_thinking;
        let mut expected = original;
        expected.models.remove("kimi-code/old");
        assert_eq!(config, expected);
    }

    #[test]
    fn logout_keeps_a_default_model_of_the_users_own() {
        let mut config = Config::default();
        config.models.insert("own".into(), own_model());
        apply_account(&mut config, &[model("coder", false)], "http://api");
        config.default_model = "own".into();
        remove_account(&mut config);
        assert_eq!(config.default_model, "own");
    }

    #[test]
    fn events_have_the_reference_json_shape() {
        let event = LoginEvent {
            kind: LoginEventKind::VerificationUrl,
            message: "Verification URL: http://v".into(),
            data: Some(json!({"verification_url": "http://v", "user_code": "ABCD"})),
        };
        let keys: Vec<String> = event.to_json().as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["type", "message", "data"]);
        assert_eq!(event.to_json()["type"], "verification_url");
        assert_eq!(
            LoginEvent::error("x").to_json(),
            json!({"type": "error", "message": "x"})
        );
    }
}
