//! Building the chat provider for a run from the resolved model.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kimi_llm::cassette::{CassetteProvider, CassetteWriter, RecordingMeta, RecordingProvider, RunPaths};
use kimi_llm::echo::{EchoProvider, ScriptedEchoProvider};
use kimi_llm::google::GoogleApi;
use kimi_llm::{
    ChaosConfig, ChaosProvider, ChatProvider, CompletionBudget, Flavor, OpenAiCompatConfig, ProviderSettings,
    UserAgent,
};

use crate::auth::Endpoints;
use crate::auth::provider::{AccountChatProvider, AccountTokens, BuildProvider};
use crate::config::{CompletionCap, Env, ProviderType, ResolvedModel, ThinkingSwitch};
use crate::soul::ModelInfo;

/// Why no provider could be built although one is configured.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The provider's own setup failed (e.g. the scripted-echo file is missing).
    #[error("{0}")]
    Setup(String),
}

/// Per-run inputs of a provider besides the resolved model.
#[derive(Debug, Clone)]
pub struct ProviderOptions {
    /// `--thinking` / `--no-thinking`, or `default_thinking`.
    pub thinking: Option<bool>,
    /// The session id (Kimi's `prompt_cache_key`).
    pub session_id: String,
    /// `loop_control.reserved_context_size`.
    pub reserved_context_size: u64,
    /// The User-Agent handle; `initialize` adds the client's name to it.
    pub user_agent: UserAgent,
    /// The share directory, where a provider with `oauth` finds the account's tokens.
    pub share_dir: PathBuf,
    /// This run's directories, which cassettes record and match (`work_dir`, `share_dir`, `home`).
    pub paths: RunPaths,
    /// `--record-llm`: where every model call is recorded.
    pub record: Option<Arc<CassetteWriter>>,
}

/// The provider for `resolved`, or `None` when no LLM is set (the turn then answers -32001).
/// `process_env` is consulted after the provider's own `env` table (the reference copies that table
/// into the process environment; we never mutate it).
pub fn create_provider(
    resolved: &ResolvedModel,
    process_env: &Env,
    options: &ProviderOptions,
) -> Result<Option<Arc<dyn ChatProvider>>, LlmError> {
    if !resolved.is_llm_set() {
        return Ok(None);
    }
    let mut env: BTreeMap<String, String> = process_env.clone();
    if let Some(provider_env) = &resolved.provider.env {
        env.extend(provider_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let provider: Arc<dyn ChatProvider> = match resolved.provider.kind {
        ProviderType::Cassette => {
            let strict = resolved.provider.strict.unwrap_or(true);
            let file = Path::new(&resolved.provider.base_url);
            let player = CassetteProvider::open(file, &resolved.model.model, strict, &options.paths)
                .map_err(|e| LlmError::Setup(e.to_string()))?;
            Arc::new(player)
        }
        ProviderType::Echo => Arc::new(EchoProvider::new()),
        ProviderType::ScriptedEcho => {
            Arc::new(ScriptedEchoProvider::from_env(&env).map_err(|e| LlmError::Setup(e.to_string()))?)
        }
        ProviderType::Kimi => openai_compat(Flavor::Kimi, resolved, options, &env)?,
        ProviderType::OpenAiLegacy => openai_compat(Flavor::OpenAiLegacy, resolved, options, &env)?,
        ProviderType::Chaos => {
            let inner = openai_compat(Flavor::Kimi, resolved, options, &env)?;
            let config = ChaosConfig::default().with_env(|key| env.get(key).cloned());
            Arc::new(ChaosProvider::new(inner, config))
        }
        ProviderType::Anthropic => {
            kimi_llm::anthropic::create(settings(resolved, options, &env)?).map_err(setup)?
        }
        ProviderType::OpenAiResponses => {
            kimi_llm::responses::create(settings(resolved, options, &env)?).map_err(setup)?
        }
        ProviderType::Gemini | ProviderType::GoogleGenai => {
            google(GoogleApi::Gemini, resolved, options, &env)?
        }
        ProviderType::VertexAi => google(GoogleApi::VertexAi, resolved, options, &env)?,
    };
    let Some(writer) = &options.record else {
        return Ok(Some(provider));
    };
    let meta = RecordingMeta {
        provider: resolved.provider.kind.as_str().to_owned(),
        model: resolved.model.model.clone(),
        parameters: parameters(resolved, options),
        paths: options.paths.clone(),
        secrets: vec![resolved.provider.api_key.expose().to_owned()],
    };
    Ok(Some(Arc::new(RecordingProvider::new(
        provider,
        Arc::clone(writer),
        meta,
    ))))
}

/// What a cassette notes about the model's generation settings, for whoever reads it.
fn parameters(resolved: &ResolvedModel, options: &ProviderOptions) -> serde_json::Value {
    let cap = resolved.generation.max_completion_tokens.map(|cap| match cap {
        CompletionCap::Limit(n) => serde_json::json!(n),
        CompletionCap::Unlimited => serde_json::json!("unlimited"),
    });
    serde_json::json!({
        "thinking": thinking(resolved, options),
        "temperature": resolved.generation.temperature,
        "top_p": resolved.generation.top_p,
        "max_completion_tokens": cap,
        "max_context_size": resolved.model.max_context_size,
    })
}

/// Seconds an HTTP provider may stay silent (before the answer starts, or between two chunks of a
/// streamed one) before the attempt fails as a timeout and the step is retried. Read from the
/// provider's `env` table, then the process environment.
pub const READ_TIMEOUT_ENV: &str = "KIMI_AGENT_PROVIDER_READ_TIMEOUT_S";

/// The silence allowed when [`READ_TIMEOUT_ENV`] is not set: the OpenAI SDK's (and so the
/// reference's) 600 s. Models that think for minutes before their first token need that much.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(600);

/// [`READ_TIMEOUT_ENV`] as a duration; a value that is not a positive number is refused.
fn read_timeout(env: &Env) -> Result<Duration, LlmError> {
    let Some(text) = env.get(READ_TIMEOUT_ENV) else {
        return Ok(DEFAULT_READ_TIMEOUT);
    };
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| {
            LlmError::Setup(format!(
                "{READ_TIMEOUT_ENV} must be a positive number of seconds, got {text:?}"
            ))
        })
}

/// Every provider type this build runs, in the reference's order, test providers last.
pub const PROVIDER_TYPES: [ProviderType; 11] = [
    ProviderType::Kimi,
    ProviderType::OpenAiLegacy,
    ProviderType::OpenAiResponses,
    ProviderType::Anthropic,
    ProviderType::GoogleGenai,
    ProviderType::Gemini,
    ProviderType::VertexAi,
    ProviderType::Echo,
    ProviderType::ScriptedEcho,
    ProviderType::Chaos,
    ProviderType::Cassette,
];

/// Thinking on, off, or left to the provider, from `--thinking` and the model's capabilities.
fn thinking(resolved: &ResolvedModel, options: &ProviderOptions) -> Option<bool> {
    match resolved.thinking_switch(options.thinking) {
        ThinkingSwitch::On => Some(true),
        ThinkingSwitch::Off => Some(false),
        ThinkingSwitch::Unchanged => None,
    }
}

fn setup(error: kimi_llm::ChatError) -> LlmError {
    LlmError::Setup(error.to_string())
}

/// What the Anthropic, Responses and Google providers share. Reference: they get the config's URL,
/// key and `custom_headers`, the thinking switch and (Anthropic) the session id; the `KIMI_MODEL_*`
/// generation overrides are Kimi's only.
fn settings(
    resolved: &ResolvedModel,
    options: &ProviderOptions,
    env: &Env,
) -> Result<ProviderSettings, LlmError> {
    let provider = &resolved.provider;
    let mut settings = ProviderSettings::new(
        provider.base_url.clone(),
        provider.api_key.expose().to_owned(),
        resolved.model.model.clone(),
    );
    settings.custom_headers = provider.custom_headers.clone().unwrap_or_default();
    settings.thinking = thinking(resolved, options);
    settings.session_id = Some(options.session_id.clone());
    settings.user_agent = options.user_agent.clone();
    settings.read_timeout = read_timeout(env)?;
    Ok(settings)
}

/// A Gemini API or Vertex AI provider; the SDK's environment variables are read from `env` (the
/// provider's `env` table over the process environment).
fn google(
    api: GoogleApi,
    resolved: &ResolvedModel,
    options: &ProviderOptions,
    env: &Env,
) -> Result<Arc<dyn ChatProvider>, LlmError> {
    let lookup = |key: &str| env.get(key).cloned();
    kimi_llm::google::create(settings(resolved, options, env)?, api, &lookup).map_err(setup)
}

fn openai_compat(
    flavor: Flavor,
    resolved: &ResolvedModel,
    options: &ProviderOptions,
    env: &Env,
) -> Result<Arc<dyn ChatProvider>, LlmError> {
    let provider = &resolved.provider;
    let mut config = OpenAiCompatConfig::new(
        flavor,
        provider.base_url.clone(),
        provider.api_key.expose().to_owned(),
        resolved.model.model.clone(),
    );
    config.custom_headers = provider.custom_headers.clone().unwrap_or_default();
    config.reasoning_key = provider.reasoning_key.clone();
    config.temperature = resolved.generation.temperature;
    config.top_p = resolved.generation.top_p;
    config.max_completion_tokens = match resolved.generation.max_completion_tokens {
        None => CompletionBudget::Auto,
        Some(CompletionCap::Limit(n)) => CompletionBudget::Cap(n),
        Some(CompletionCap::Unlimited) => CompletionBudget::Unlimited,
    };
    config.max_context_size = resolved.model.max_context_size;
    config.reserved_context_size = options.reserved_context_size;
    config.thinking = thinking(resolved, options);
    config.thinking_keep = resolved.generation.thinking_keep.clone();
    config.session_id = Some(options.session_id.clone());
    config.user_agent = options.user_agent.clone();
    config.read_timeout = read_timeout(env)?;
    let Some(oauth) = &provider.oauth else {
        return kimi_llm::create(config).map_err(|e| LlmError::Setup(e.to_string()));
    };
    // Signed in with `login`: the account's access token, kept fresh, instead of a fixed key.
    let tokens = Arc::new(AccountTokens::new(
        options.share_dir.clone(),
        &oauth.key,
        Endpoints::from_env(env),
    ));
    let fallback_key = config.api_key.clone();
    let build: BuildProvider = Box::new(move |key| {
        let mut config = config.clone();
        key.clone_into(&mut config.api_key);
        kimi_llm::create(config)
    });
    let provider =
        AccountChatProvider::new(tokens, fallback_key, build).map_err(|e| LlmError::Setup(e.to_string()))?;
    Ok(Arc::new(provider))
}

/// The facts the loop needs about the model.
pub fn model_info(resolved: &ResolvedModel, provider: Option<&Arc<dyn ChatProvider>>) -> ModelInfo {
    ModelInfo {
        name: provider
            .map(|p| p.model_name().to_owned())
            .unwrap_or_else(|| resolved.model.model.clone()),
        max_context_size: resolved.model.max_context_size,
        capabilities: resolved
            .capabilities
            .iter()
            .map(|c| c.as_str().to_owned())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(value: &str) -> Env {
        Env::from([(READ_TIMEOUT_ENV.to_owned(), value.to_owned())])
    }

    #[test]
    fn the_read_timeout_defaults_to_the_sdk_value_and_can_be_set() {
        assert_eq!(read_timeout(&Env::new()).unwrap(), DEFAULT_READ_TIMEOUT);
        assert_eq!(read_timeout(&env("2.5")).unwrap(), Duration::from_millis(2500));
        assert_eq!(read_timeout(&env(" 30 ")).unwrap(), Duration::from_secs(30));
        for bad in ["0", "-1", "soon", "NaN", "inf", ""] {
            let error = read_timeout(&env(bad)).unwrap_err().to_string();
            assert!(error.contains(READ_TIMEOUT_ENV), "{bad}: {error}");
        }
    }
}
