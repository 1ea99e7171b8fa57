//! What the builder reads or starts before the session is held: MCP servers found in other agents'
//! configurations, the sandbox, the extra directories as a reader sees them, the model switch of
//! subagents, the line cap.

use std::path::PathBuf;

use super::kinds::ModelSwitch;
use crate::config::{Config, Env};
use crate::sandbox::{Enforcement, Sandbox, SandboxMode, SandboxPolicy};
use crate::session::{self, Session};
use crate::state::StateFile;

/// `ours` and, after them, the stdio servers other agents' configurations define (`mcp_discover`); a
/// file or entry that cannot be used is logged and skipped.
pub(super) fn discovered_mcp_servers(
    ours: Vec<crate::mcp::ServerConfig>,
    work_dir: &std::path::Path,
) -> Vec<crate::mcp::ServerConfig> {
    let Some(home) = crate::paths::home_dir() else {
        tracing::warn!("mcp_discover: no home directory, nothing discovered");
        return ours;
    };
    let found = crate::mcp::discover::discover(&home, work_dir);
    for warning in &found.warnings {
        tracing::warn!("mcp_discover: {warning}");
    }
    for server in &found.servers {
        tracing::info!(server = %server.server.name, file = %server.origin.display(), "MCP server discovered");
    }
    crate::mcp::discover::merge(ours, &found)
}

/// The session's extra directories as a process that does not hold the session sees them (it writes
/// nothing, so nothing is dropped or added in `state.json`): the stored ones, then `--add-dir`'s.
pub(super) fn stored_and_flag_dirs(session: &Session, flags: &[PathBuf]) -> Vec<PathBuf> {
    StateFile::load(&session.state_path())
        .additional_dirs
        .iter()
        .map(PathBuf::from)
        .chain(flags.iter().cloned())
        .map(|dir| session::canonical_work_dir(&dir))
        .collect()
}

/// The sandbox the configuration and `--sandbox` ask for, after the kernel's trial; said in the log
/// (loudly when it cannot be enforced: every command will then be refused).
pub(super) fn start_sandbox(config: &Config, flag: Option<SandboxMode>) -> Sandbox {
    let sandbox = Sandbox::start(sandbox_policy(config, flag));
    match sandbox.enforcement() {
        Enforcement::Unavailable(_) => tracing::error!("sandbox: {}", sandbox.summary()),
        Enforcement::Off | Enforcement::Enforced { .. } => tracing::info!("sandbox: {}", sandbox.summary()),
    }
    sandbox
}

/// The sandbox policy of the configuration, with `--sandbox` over `sandbox_mode`.
pub fn sandbox_policy(config: &Config, flag: Option<SandboxMode>) -> SandboxPolicy {
    SandboxPolicy {
        mode: flag.unwrap_or(config.sandbox_mode),
        network: config.sandbox_network,
        extra_roots: config.sandbox_writable_roots.clone(),
    }
}

/// Builds the provider of a configured model alias, for subagents started with `model`.
pub(super) fn model_switch(config: &Config, env: &Env, options: &crate::llm::ProviderOptions) -> ModelSwitch {
    let (config, env, options) = (config.clone(), env.clone(), options.clone());
    ModelSwitch::new(move |alias| {
        let resolved = config
            .resolve_model(Some(alias), &env)
            .map_err(|e| e.to_string())?;
        let llm = crate::llm::create_provider(&resolved, &env, &options).map_err(|e| format!("{e:#}"))?;
        let model = crate::llm::model_info(&resolved, llm.as_ref());
        Ok((llm, model))
    })
}

/// The line cap: `KIMI_AGENT_MAX_LINE_BYTES` or 64 MiB.
pub(super) fn max_line_bytes() -> usize {
    std::env::var("KIMI_AGENT_MAX_LINE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or(kimi_wire::framing::DEFAULT_MAX_LINE_BYTES)
}

pub(super) fn clamp_u32(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}
