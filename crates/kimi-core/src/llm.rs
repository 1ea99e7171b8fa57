//! Building the chat provider for a run from the resolved model.

use std::collections::BTreeMap;
use std::sync::Arc;

use kimi_llm::ChatProvider;
use kimi_llm::echo::{EchoProvider, ScriptedEchoProvider};

use crate::config::{Env, ProviderType, ResolvedModel};
use crate::soul::ModelInfo;

/// Why no provider could be built although one is configured.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The provider's own setup failed (e.g. the scripted-echo file is missing).
    #[error("{0}")]
    Setup(String),
    /// A provider type this build does not implement.
    #[error("provider type `{0}` is not supported by kimi-agent yet")]
    Unsupported(&'static str),
}

/// The provider for `resolved`, or `None` when no LLM is set (the turn then answers -32001).
/// `process_env` is consulted after the provider's own `env` table (the reference copies that table
/// into the process environment; we never mutate it).
pub fn create_provider(
    resolved: &ResolvedModel,
    process_env: &Env,
) -> Result<Option<Arc<dyn ChatProvider>>, LlmError> {
    if !resolved.is_llm_set() {
        return Ok(None);
    }
    let mut env: BTreeMap<String, String> = process_env.clone();
    if let Some(provider_env) = &resolved.provider.env {
        env.extend(provider_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let provider: Arc<dyn ChatProvider> = match resolved.provider.kind {
        ProviderType::Echo => Arc::new(EchoProvider::new()),
        ProviderType::ScriptedEcho => {
            Arc::new(ScriptedEchoProvider::from_env(&env).map_err(|e| LlmError::Setup(e.to_string()))?)
        }
        other => return Err(LlmError::Unsupported(other.as_str())),
    };
    Ok(Some(provider))
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
