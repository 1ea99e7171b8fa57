//! Choosing the model for a run: `--model`, `default_model`, environment overrides, capabilities.
//!
//! Reference behaviour (the Python CLI's app start-up and `llm.py`):
//! - `--model ALIAS` wins when the alias exists; an unknown alias is *not* an error, it falls
//!   through to the placeholder (not to `default_model`);
//! - with no `--model`, `default_model` is used when set;
//! - otherwise a placeholder: a `kimi` provider with empty URL and key, an empty model name and a
//!   100 000-token window, which environment variables may fill in;
//! - environment overrides apply to `kimi` providers (`KIMI_*`) and to `openai_legacy` /
//!   `openai_responses` (`OPENAI_BASE_URL`, `OPENAI_API_KEY`) only; empty variables are ignored;
//! - there is no usable LLM ("LLM not set") unless the provider is a test provider or both the
//!   base URL and the model name are non-empty.

use std::collections::{BTreeMap, BTreeSet};

use super::error::ConfigError;
use super::schema::{Capability, Config, ModelConfig, ProviderConfig, ProviderType, Secret};

/// Context window of the placeholder model.
pub const PLACEHOLDER_MAX_CONTEXT_SIZE: u64 = 100_000;

/// A snapshot of the process environment, passed explicitly so tests never touch the real one.
pub type Env = BTreeMap<String, String>;

/// The current process environment (variables that are not UTF-8 are left out).
pub fn process_env() -> Env {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// The model a run uses, after environment overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedModel {
    /// The alias from `[models]`, or `None` for the placeholder.
    pub alias: Option<String>,
    /// The provider's name from `[providers]`; empty for the placeholder.
    pub provider_name: String,
    /// The provider, with environment overrides applied.
    pub provider: ProviderConfig,
    /// The model, with environment overrides applied.
    pub model: ModelConfig,
    /// Declared capabilities plus those derived from the model name.
    pub capabilities: BTreeSet<Capability>,
    /// Request parameters from `KIMI_MODEL_*` variables (only for `kimi` providers).
    pub generation: GenerationOverrides,
    /// Which overriding variables were applied and their values (API keys masked), for the log.
    pub applied_env: BTreeMap<&'static str, String>,
}

/// Request parameters taken from the environment for `kimi` providers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationOverrides {
    /// `KIMI_MODEL_TEMPERATURE`.
    pub temperature: Option<f64>,
    /// `KIMI_MODEL_TOP_P`.
    pub top_p: Option<f64>,
    /// `KIMI_MODEL_MAX_COMPLETION_TOKENS`, else `KIMI_MODEL_MAX_TOKENS`.
    pub max_completion_tokens: Option<CompletionCap>,
    /// `KIMI_MODEL_THINKING_KEEP`: sent as `thinking.keep`, only while thinking is on.
    pub thinking_keep: Option<String>,
}

/// A completion-token cap from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionCap {
    /// At most this many tokens.
    Limit(u64),
    /// The variable was zero or negative: send no cap at all.
    Unlimited,
}

/// What to do with the provider's thinking switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingSwitch {
    /// Turn thinking on (effort "high").
    On,
    /// Turn thinking off.
    Off,
    /// Leave the provider's default.
    Unchanged,
}

impl ResolvedModel {
    /// Whether an LLM can be built from this: test providers always can, others need a base URL
    /// and a model name. When this is false the reference answers prompts with "LLM not set".
    pub fn is_llm_set(&self) -> bool {
        self.provider.kind.is_offline()
            || (!self.provider.base_url.is_empty() && !self.model.model.is_empty())
    }

    /// The thinking switch for a requested mode (`--thinking` or `default_thinking`).
    ///
    /// Reference: an always-thinking model is on whatever was asked; asking for thinking only
    /// switches it on when the model can think, and otherwise leaves the provider alone.
    pub fn thinking_switch(&self, requested: Option<bool>) -> ThinkingSwitch {
        if self.capabilities.contains(&Capability::AlwaysThinking)
            || (requested == Some(true) && self.capabilities.contains(&Capability::Thinking))
        {
            ThinkingSwitch::On
        } else if requested == Some(false) {
            ThinkingSwitch::Off
        } else {
            ThinkingSwitch::Unchanged
        }
    }

    /// The name to show for the model: its display name, else a canonical form of its name.
    pub fn display_name(&self) -> &str {
        display_name(&self.model)
    }
}

/// The name to show for a model: `display_name` when set; `kimi-code` shows as `kimi-for-coding`.
pub fn display_name(model: &ModelConfig) -> &str {
    match model.display_name.as_deref() {
        Some(name) if !name.is_empty() => name,
        _ if model.model == "kimi-code" => "kimi-for-coding",
        _ => &model.model,
    }
}

/// Capabilities of a model: the declared ones, plus `thinking` and `always_thinking` when the name
/// contains "thinking" or "reason" (any case), or else `thinking`, `image_in` and `video_in` for
/// `kimi-for-coding` and `kimi-code`.
pub fn derive_capabilities(model: &ModelConfig) -> BTreeSet<Capability> {
    let mut caps = model.capabilities.clone().unwrap_or_default();
    let lower = model.model.to_lowercase();
    if lower.contains("thinking") || lower.contains("reason") {
        caps.extend([Capability::Thinking, Capability::AlwaysThinking]);
    } else if matches!(model.model.as_str(), "kimi-for-coding" | "kimi-code") {
        caps.extend([Capability::Thinking, Capability::ImageIn, Capability::VideoIn]);
    }
    caps
}

impl Config {
    /// Picks the model for a run from `--model` and `default_model` and applies the environment.
    ///
    /// Fails only when an overriding variable holds a malformed number.
    pub fn resolve_model(&self, cli_model: Option<&str>, env: &Env) -> Result<ResolvedModel, ConfigError> {
        let cli_model = cli_model.filter(|m| !m.is_empty());
        let alias = match cli_model {
            Some(name) => self.models.contains_key(name).then_some(name),
            None => Some(self.default_model.as_str()).filter(|m| !m.is_empty()),
        };
        if let (Some(asked), None) = (cli_model, alias) {
            tracing::warn!(
                model = asked,
                "model alias not found in config, using the placeholder"
            );
        }
        let entry = alias.and_then(|a| {
            let model = self.models.get(a)?;
            let provider = self.providers.get(&model.provider)?;
            Some((a, model, provider))
        });
        let (alias, mut model, mut provider) = match entry {
            Some((a, m, p)) => (Some(a.to_owned()), m.clone(), p.clone()),
            None => (
                None,
                ModelConfig {
                    provider: String::new(),
                    model: String::new(),
                    max_context_size: PLACEHOLDER_MAX_CONTEXT_SIZE,
                    capabilities: None,
                    display_name: None,
                },
                ProviderConfig::new(ProviderType::Kimi, "", ""),
            ),
        };
        let applied_env = apply_env(&mut provider, &mut model, env)?;
        let generation = if provider.kind == ProviderType::Kimi {
            generation_overrides(env)?
        } else {
            GenerationOverrides::default()
        };
        Ok(ResolvedModel {
            alias,
            provider_name: model.provider.clone(),
            capabilities: derive_capabilities(&model),
            provider,
            model,
            generation,
            applied_env,
        })
    }
}

fn get<'a>(env: &'a Env, var: &str) -> Option<&'a str> {
    env.get(var).map(String::as_str).filter(|v| !v.is_empty())
}

fn apply_env(
    provider: &mut ProviderConfig,
    model: &mut ModelConfig,
    env: &Env,
) -> Result<BTreeMap<&'static str, String>, ConfigError> {
    let mut applied = BTreeMap::new();
    match provider.kind {
        ProviderType::Kimi => {
            if let Some(url) = get(env, "KIMI_BASE_URL") {
                provider.base_url = url.to_owned();
                applied.insert("KIMI_BASE_URL", url.to_owned());
            }
            if let Some(key) = get(env, "KIMI_API_KEY") {
                provider.api_key = Secret::new(key);
                applied.insert("KIMI_API_KEY", "******".to_owned());
            }
            if let Some(name) = get(env, "KIMI_MODEL_NAME") {
                model.model = name.to_owned();
                applied.insert("KIMI_MODEL_NAME", name.to_owned());
            }
            if let Some(raw) = get(env, "KIMI_MODEL_MAX_CONTEXT_SIZE") {
                model.max_context_size = raw.trim().parse().map_err(|_| ConfigError::Env {
                    var: "KIMI_MODEL_MAX_CONTEXT_SIZE",
                    value: raw.to_owned(),
                    expected: "a non-negative integer",
                })?;
                applied.insert("KIMI_MODEL_MAX_CONTEXT_SIZE", raw.to_owned());
            }
            if let Some(raw) = get(env, "KIMI_MODEL_CAPABILITIES") {
                // Reference: comma list, case-insensitive, unknown names dropped; it replaces the
                // declared set even when nothing in it is known.
                let caps = raw
                    .split(',')
                    .filter_map(|c| Capability::from_name(&c.trim().to_lowercase()))
                    .collect();
                model.capabilities = Some(caps);
                applied.insert("KIMI_MODEL_CAPABILITIES", raw.to_owned());
            }
        }
        ProviderType::OpenAiLegacy | ProviderType::OpenAiResponses => {
            // Reference: applied, but not reported among the overrides.
            if let Some(url) = get(env, "OPENAI_BASE_URL") {
                provider.base_url = url.to_owned();
            }
            if let Some(key) = get(env, "OPENAI_API_KEY") {
                provider.api_key = Secret::new(key);
            }
        }
        ProviderType::Anthropic
        | ProviderType::GoogleGenai
        | ProviderType::Gemini
        | ProviderType::VertexAi
        | ProviderType::Echo
        | ProviderType::ScriptedEcho
        | ProviderType::Chaos
        | ProviderType::Cassette => {}
    }
    Ok(applied)
}

fn generation_overrides(env: &Env) -> Result<GenerationOverrides, ConfigError> {
    let float = |var: &'static str| -> Result<Option<f64>, ConfigError> {
        get(env, var)
            .map(|raw| {
                raw.trim().parse::<f64>().map_err(|_| ConfigError::Env {
                    var,
                    value: raw.to_owned(),
                    expected: "a number",
                })
            })
            .transpose()
    };
    // Reference: the first of the two names holding an integer wins; a malformed value is skipped.
    let max_completion_tokens = ["KIMI_MODEL_MAX_COMPLETION_TOKENS", "KIMI_MODEL_MAX_TOKENS"]
        .into_iter()
        .filter_map(|var| get(env, var)?.trim().parse::<i64>().ok())
        .map(|n| {
            u64::try_from(n)
                .ok()
                .filter(|&n| n > 0)
                .map_or(CompletionCap::Unlimited, CompletionCap::Limit)
        })
        .next();
    Ok(GenerationOverrides {
        temperature: float("KIMI_MODEL_TEMPERATURE")?,
        top_p: float("KIMI_MODEL_TOP_P")?,
        max_completion_tokens,
        thinking_keep: get(env, "KIMI_MODEL_THINKING_KEEP").map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load::from_text;
    use pretty_assertions::assert_eq;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn config() -> Config {
        from_text(
            r#"
default_model = "main"
[providers.moonshot]
type = "kimi"
base_url = "https://api.moonshot.example/v1"
api_key = "sk-file"
[providers.oai]
type = "openai_legacy"
base_url = "https://oai.example/v1"
api_key = "sk-oai"
[providers.echo]
type = "_scripted_echo"
base_url = ""
api_key = ""
[models.main]
provider = "moonshot"
model = "kimi-k2"
max_context_size = 200000
capabilities = ["image_in"]
[models.gpt]
provider = "oai"
model = "gpt-x"
max_context_size = 128000
[models.scripted]
provider = "echo"
model = ""
max_context_size = 1000
"#,
        )
        .unwrap()
    }

    #[test]
    fn cli_alias_wins_over_default_model() {
        let r = config().resolve_model(Some("gpt"), &Env::new()).unwrap();
        assert_eq!(r.alias.as_deref(), Some("gpt"));
        assert_eq!(r.provider_name, "oai");
        assert_eq!(r.model.model, "gpt-x");
        assert!(r.is_llm_set());
    }

    #[test]
    fn default_model_is_used_without_cli_model() {
        let r = config().resolve_model(None, &Env::new()).unwrap();
        assert_eq!(r.alias.as_deref(), Some("main"));
        assert_eq!(r.provider.api_key.expose(), "sk-file");
        assert_eq!(r.capabilities, BTreeSet::from([Capability::ImageIn]));
        assert!(r.applied_env.is_empty());
    }

    #[test]
    fn unknown_cli_model_falls_back_to_the_placeholder_not_the_default() {
        let r = config().resolve_model(Some("nope"), &Env::new()).unwrap();
        assert_eq!(r.alias, None);
        assert_eq!(r.provider_name, "");
        assert_eq!(r.provider.kind, ProviderType::Kimi);
        assert_eq!(r.provider.base_url, "");
        assert_eq!(r.model.max_context_size, PLACEHOLDER_MAX_CONTEXT_SIZE);
        assert!(!r.is_llm_set());
    }

    #[test]
    fn empty_config_gives_the_placeholder_which_env_can_fill_in() {
        let c = Config::default();
        let r = c.resolve_model(None, &Env::new()).unwrap();
        assert!(!r.is_llm_set());
        let r = c
            .resolve_model(
                None,
                &env(&[
                    ("KIMI_BASE_URL", "https://env.example/v1"),
                    ("KIMI_API_KEY", "sk-env"),
                    ("KIMI_MODEL_NAME", "kimi-for-coding"),
                    ("KIMI_MODEL_MAX_CONTEXT_SIZE", "4096"),
                ]),
            )
            .unwrap();
        assert!(r.is_llm_set());
        assert_eq!(r.provider.base_url, "https://env.example/v1");
        assert_eq!(r.provider.api_key.expose(), "sk-env");
        assert_eq!(r.model.max_context_size, 4096);
        assert_eq!(
            r.capabilities,
            BTreeSet::from([Capability::Thinking, Capability::ImageIn, Capability::VideoIn])
        );
        assert_eq!(r.applied_env["KIMI_API_KEY"], "******");
        assert_eq!(r.applied_env.len(), 4);
    }

    #[test]
    fn kimi_env_overrides_apply_only_to_kimi_providers() {
        let vars = env(&[("KIMI_BASE_URL", "https://env"), ("KIMI_MODEL_NAME", "other")]);
        let r = config().resolve_model(Some("gpt"), &vars).unwrap();
        assert_eq!(r.provider.base_url, "https://oai.example/v1");
        assert_eq!(r.model.model, "gpt-x");
        let r = config().resolve_model(None, &vars).unwrap();
        assert_eq!(r.provider.base_url, "https://env");
        assert_eq!(r.model.model, "other");
    }

    #[test]
    fn openai_env_overrides_apply_to_openai_providers_only() {
        let vars = env(&[("OPENAI_BASE_URL", "https://proxy"), ("OPENAI_API_KEY", "sk-o")]);
        let r = config().resolve_model(Some("gpt"), &vars).unwrap();
        assert_eq!(r.provider.base_url, "https://proxy");
        assert_eq!(r.provider.api_key.expose(), "sk-o");
        assert!(r.applied_env.is_empty());
        let r = config().resolve_model(None, &vars).unwrap();
        assert_eq!(r.provider.base_url, "https://api.moonshot.example/v1");
    }

    #[test]
    fn empty_env_values_are_ignored() {
        let r = config()
            .resolve_model(None, &env(&[("KIMI_BASE_URL", "")]))
            .unwrap();
        assert_eq!(r.provider.base_url, "https://api.moonshot.example/v1");
    }

    #[test]
    fn capabilities_from_env_replace_the_declared_ones() {
        let r = config()
            .resolve_model(
                None,
                &env(&[("KIMI_MODEL_CAPABILITIES", " Thinking, bogus ,video_in")]),
            )
            .unwrap();
        assert_eq!(
            r.capabilities,
            BTreeSet::from([Capability::Thinking, Capability::VideoIn])
        );
        let r = config()
            .resolve_model(None, &env(&[("KIMI_MODEL_CAPABILITIES", "bogus")]))
            .unwrap();
        assert!(r.capabilities.is_empty());
    }

    #[test]
    fn malformed_numbers_in_env_are_errors_naming_the_variable() {
        let err = config()
            .resolve_model(None, &env(&[("KIMI_MODEL_MAX_CONTEXT_SIZE", "big")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid value \"big\" in environment variable KIMI_MODEL_MAX_CONTEXT_SIZE: \
             expected a non-negative integer"
        );
        let err = config()
            .resolve_model(None, &env(&[("KIMI_MODEL_TEMPERATURE", "hot")]))
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Env {
                var: "KIMI_MODEL_TEMPERATURE",
                ..
            }
        ));
    }

    #[test]
    fn generation_overrides_are_read_for_kimi_only() {
        let vars = env(&[
            ("KIMI_MODEL_TEMPERATURE", "0.3"),
            ("KIMI_MODEL_TOP_P", "0.9"),
            ("KIMI_MODEL_MAX_COMPLETION_TOKENS", "oops"),
            ("KIMI_MODEL_MAX_TOKENS", "2048"),
            ("KIMI_MODEL_THINKING_KEEP", "all"),
        ]);
        let r = config().resolve_model(None, &vars).unwrap();
        assert_eq!(
            r.generation,
            GenerationOverrides {
                temperature: Some(0.3),
                top_p: Some(0.9),
                max_completion_tokens: Some(CompletionCap::Limit(2048)),
                thinking_keep: Some("all".into()),
            }
        );
        let r = config().resolve_model(Some("gpt"), &vars).unwrap();
        assert_eq!(r.generation, GenerationOverrides::default());

        let vars = env(&[
            ("KIMI_MODEL_MAX_COMPLETION_TOKENS", "0"),
            ("KIMI_MODEL_MAX_TOKENS", "5"),
        ]);
        let r = config().resolve_model(None, &vars).unwrap();
        assert_eq!(r.generation.max_completion_tokens, Some(CompletionCap::Unlimited));
    }

    #[test]
    fn test_providers_need_no_url_or_model_name() {
        let r = config().resolve_model(Some("scripted"), &Env::new()).unwrap();
        assert_eq!(r.provider.kind, ProviderType::ScriptedEcho);
        assert!(r.is_llm_set());
    }

    #[test]
    fn capabilities_are_derived_from_model_names() {
        let model = |name: &str| ModelConfig {
            provider: "p".into(),
            model: name.into(),
            max_context_size: 1,
            capabilities: None,
            display_name: None,
        };
        let both = BTreeSet::from([Capability::Thinking, Capability::AlwaysThinking]);
        assert_eq!(derive_capabilities(&model("kimi-k2-Thinking")), both);
        assert_eq!(derive_capabilities(&model("o1-reasoner")), both);
        assert_eq!(
            derive_capabilities(&model("kimi-code")),
            BTreeSet::from([Capability::Thinking, Capability::ImageIn, Capability::VideoIn])
        );
        assert!(derive_capabilities(&model("kimi-k2")).is_empty());
        assert_eq!(display_name(&model("kimi-code")), "kimi-for-coding");
        assert_eq!(display_name(&model("kimi-k2")), "kimi-k2");
    }

    #[test]
    fn thinking_switch_follows_capabilities() {
        let mut r = config().resolve_model(None, &Env::new()).unwrap();
        assert_eq!(r.thinking_switch(Some(true)), ThinkingSwitch::Unchanged);
        assert_eq!(r.thinking_switch(Some(false)), ThinkingSwitch::Off);
        assert_eq!(r.thinking_switch(None), ThinkingSwitch::Unchanged);
        r.capabilities.insert(Capability::Thinking);
        assert_eq!(r.thinking_switch(Some(true)), ThinkingSwitch::On);
        r.capabilities.insert(Capability::AlwaysThinking);
        assert_eq!(r.thinking_switch(Some(false)), ThinkingSwitch::On);
    }
}
