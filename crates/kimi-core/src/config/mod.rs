//! Configuration: the `config.toml` schema, loading it, and choosing the model for a run.
//!
//! - [`schema`]: [`Config`] and its sections, with the reference CLI's defaults and limits.
//! - [`load`](mod@load): [`load()`] from a [`ConfigSource`] (default file, `--config-file`, or
//!   `--config` text), creating the default file on first use.
//! - [`model`]: [`Config::resolve_model`], which applies `--model`, `default_model` and the
//!   environment, and tells whether an LLM is set.
//!
//! Errors are [`ConfigError`]s that name the file (or the `--config` text) and the offending key.

mod error;
pub mod load;
pub mod model;
pub mod schema;

pub use error::ConfigError;
pub use load::{ConfigSource, load_in, save};
pub use model::{CompletionCap, Env, ResolvedModel, ThinkingSwitch, process_env};
pub use schema::{
    BackgroundConfig, Capability, Config, HookDef, HookEvent, HookOnError, McpToolNames, ModelConfig,
    OAuthRef, OAuthStorage, ProviderConfig, ProviderType, Secret, ServiceConfig, Services, ShellEnvConfig,
    ShellEnvInherit,
};
